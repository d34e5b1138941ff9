"""`adapt`, `merge` and `drop_adapters`: the library's methods in the blocks of a keras-hub
backbone (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA: `backbones.ADAPTABLE`).

`adapt(backbone, config)` changes the backbone in place, as keras-hub's own `enable_lora`
does: each `TransformerEncoder` block gets the method's layers (`keras3.layers`) where the
Keras 2 block has them, and the base freezes as the Keras 2 path freezes it, so the same
config trains the same parameters on both stacks.
"""

import dataclasses
import math

from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import layers
from keras_adapters.layers import bottleneck
from keras_adapters.methods import projections
from keras_adapters.methods import registry
from keras_adapters.utils import errors

# The backbones `adapt` knows, by class name (keras-hub's `keras_hub.models.<name>`).
SUPPORTED_BACKBONES = tuple(backbones.ADAPTABLE)


def adapt(backbone, config):
  """Puts the method of `config` into every block of a keras-hub `backbone`, in place.

  Bottleneck adapters (`AdapterConfig`) go after the attention and the feed-forward
  sub-layers' outputs, before the residual add and LayerNorm (Houlsby's placement), or
  with `original_ln_before` between that add and LayerNorm and the LayerNorm again
  (Pfeiffer's: `AdapterConfig(mh_adapter=False, original_ln_before=True)`), or parallel
  to the sub-layers, reading their input (`is_parallel`, He et al.'s); LoRA
  and (IA)³ (`LoRAConfig`, `IA3Config`) change the block's projections (`query`, `key`,
  `value`, `attention_output`, `intermediate`, `output`). The base freezes: only the
  method's layers train, with the LayerNorms (the embedding one included) when the config
  says so (`train_layer_norms`; always with bottleneck adapters), as on the Keras 2 path. A
  task built on the backbone (`keras_hub.models.BertTextClassifier(backbone=...)`) trains
  its head too.

  Example:
  ```python
  backbone = keras_hub.models.BertBackbone.from_preset(...)
  kak.adapt(backbone, kak.LoRAConfig(r=8))
  classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=2)
  ```

  Args:
    backbone: A keras-hub backbone of `SUPPORTED_BACKBONES`, not adapted yet.
    config: An `AdapterConfig`, `LoRAConfig` or `IA3Config`.

  Returns:
    The backbone.

  Raises:
    UsageError: For another backbone, an adapted one, or a config (or one of its fields)
      that the Keras 3 path does not support yet.
  """
  _check_backbone(backbone)
  check_config(config)
  pooler_specs = [spec for spec in config.delta_specs() if projections.POOLER in spec["targets"]]
  if pooler_specs and getattr(backbone, backbones.POOLER_ATTRIBUTE, None) is None:
    raise errors.UsageError(
        f"{type(config).__name__}(target_modules={list(config.target_modules)!r}): the "
        f"{type(backbone).__name__} has no pooler; leave 'pooler' out.")
  blocks = backbone.transformer_layers
  try:
    config.validate_for(len(blocks))
  except ValueError as error:
    raise errors.UsageError(str(error)) from None
  # What an artifact records (`keras3.artifacts`): the config, and the base's fingerprint
  # before anything in it trains.
  backbone.base_fingerprint = base_weights.fingerprint(backbone)
  backbone.adapter_config = config
  for variable in backbone.weights:
    variable.trainable = False
  hidden_size = backbone.hidden_dim
  for index, block in enumerate(blocks):
    if index in config.leave_out:
      continue
    for spec in config.delta_specs():
      _add_deltas(block, spec)
    adapter_size = config.bottleneck_size(hidden_size)
    if adapter_size is not None:
      _add_adapters(block, config, adapter_size, hidden_size)
  # The pooler is no block's: `leave_out` does not apply to it, as on the Keras 2 path.
  for spec in pooler_specs:
    _add_pooler_delta(backbone, spec)
  if config.train_layer_norms:
    # AdapterDrop's training freezes the embeddings' and the lowest blocks' LayerNorms.
    frozen_below = config.layer_norms_frozen_below
    # pylint: disable=protected-access
    for layer_norm in [backbone.embeddings_layer_norm] * (frozen_below == 0) + [
        norm for block in blocks[frozen_below:]
        for norm in (block._self_attention_layer_norm, block._feedforward_layer_norm)]:
      # By variable, as the base was frozen: the layer's own flag is still on.
      for variable in layer_norm.weights:
        variable.trainable = True
  _forget_traced_functions(backbone)
  return backbone


def merge(model):
  """Folds the LoRA and (IA)³ layers of a backbone `adapt` changed into its frozen kernels.

  The blocks get their own projections back, with the changes in their kernels and biases:
  the same outputs (within float32 rounding) at the base's cost. Bottleneck adapters, which
  cannot be folded in, stay.

  Args:
    model: The adapted backbone, or a keras-hub task holding it (`model.backbone`).

  Returns:
    The number of projections changed.
  """
  backbone = getattr(model, "backbone", model)
  backbones.check_adaptable(backbone)
  merged = 0
  for block in backbone.transformer_layers:
    for owner, attribute, wrapper in _method_layers(block):
      if isinstance(wrapper, layers.AdaptedProjection):
        _replace_sublayer(owner, attribute, wrapper.merged_projection())
        merged += 1
  pooler = getattr(backbone, backbones.POOLER_ATTRIBUTE, None)
  if isinstance(pooler, layers.AdaptedProjection):
    _replace_graph_layer(backbone, backbones.POOLER_ATTRIBUTE, pooler.merged_projection())
    merged += 1
  for holder in {id(m): m for m in (model, backbone)}.values():
    _forget_traced_functions(holder)
  return merged


def drop_adapters(model, layer_indices):
  """AdapterDrop (Rücklé et al. 2021): removes the method's layers from the blocks
  `layer_indices` of a backbone `adapt` changed, as `AdaptedBert.drop_adapters` does on
  Keras 2; those blocks compute as the base's again (their LayerNorms keep what they
  trained).

  Args:
    model: The adapted backbone, or a keras-hub task holding it (`model.backbone`).
    layer_indices: Indices of the blocks to drop the layers of.

  Returns:
    The number of adapters, or adapted projections, removed.

  Raises:
    UsageError: An index names no block of the backbone.
  """
  backbone = getattr(model, "backbone", model)
  backbones.check_adaptable(backbone)
  blocks = backbone.transformer_layers
  outside = sorted(i for i in layer_indices if not 0 <= i < len(blocks))
  if outside:
    raise errors.UsageError(
        f"drop_adapters names layers {outside} that the {type(backbone).__name__} does not "
        f"have: it has layers 0..{len(blocks) - 1}.")
  removed = 0
  for index in sorted(set(layer_indices)):
    for owner, attribute, wrapper in _method_layers(blocks[index]):
      _replace_sublayer(owner, attribute, getattr(wrapper, _WRAPPED[type(wrapper)]))
      # A parallel adapter's tap on its sub-layer's input goes with the adapter.
      removed += not isinstance(wrapper, layers.SublayerInputTap)
  for holder in {id(m): m for m in (model, backbone)}.values():
    _forget_traced_functions(holder)
  return removed


# The attribute of each layer `adapt` puts into a block that holds the base layer it wraps.
_WRAPPED = {layers.AdaptedProjection: "projection", layers.AdaptedSublayerOutput: "dropout",
            layers.AdaptedLayerNorm: "layer_norm", layers.SublayerInputTap: "projection"}


def _method_layers(block):
  """(owner, attribute, layer) of each layer `adapt` put into `block`."""
  places = [(getattr(block, owner_name) if owner_name else block, attribute)
            for owner_name, attribute in backbones.PROJECTION_ATTRIBUTES.values()]
  places += [(block, attribute) for attribute in (*backbones.ADAPTER_ATTRIBUTES.values(),
                                                  *backbones.LAYER_NORM_ATTRIBUTES.values())]
  return [(owner, attribute, getattr(owner, attribute)) for owner, attribute in places
          if type(getattr(owner, attribute)) in _WRAPPED]


def _check_backbone(backbone):
  backbones.check_adaptable(backbone)
  sublayers = backbone._flatten_layers()  # pylint: disable=protected-access
  if any(isinstance(layer, tuple(_WRAPPED)) for layer in sublayers):
    raise errors.UsageError(
        f"The {type(backbone).__name__} is adapted already; adapt a backbone once (build "
        "or load a fresh one for another config).")
  if any(getattr(layer, "lora_enabled", False) for layer in sublayers):
    raise errors.UsageError(
        f"The {type(backbone).__name__} has keras-hub's own LoRA (enable_lora); adapt a "
        "backbone without it, or use LoRAConfig here instead.")


def _supported_fields():
  """The config fields the Keras 3 path takes, by config class: each registered method's
  config says which (`keras3_fields`); a method without them does not run here yet."""
  return {cls: cls.keras3_fields for cls in registry.config_classes()
          if getattr(cls, "keras3_fields", None)}


def check_config(config):
  """Raises a one-line `UsageError`, before any work, for a config `adapt` does not take: not
  a method's config the Keras 3 path runs, or a field of it at a value it does not run yet."""
  supported_fields = _supported_fields()
  supported = supported_fields.get(type(config))
  if supported is None:
    raise errors.UsageError(
        f"keras_adapters.keras3.adapt takes one of "
        f"{', '.join(c.__name__ for c in supported_fields)}, got {config!r}.")
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if field.name not in supported and value != field.default:
      raise errors.UsageError(
          f"{type(config).__name__}({field.name}={value!r}) is not supported on Keras 3 yet: "
          f"leave {field.name} at {field.default!r} (Keras 3 takes "
          f"{', '.join(supported)}), or use the Keras 2 path (keras_adapters.AdaptedBert).")
  if getattr(config, "original_ln_before", False) and config.residual_before_ln is not True:
    raise errors.UsageError(
        f"AdapterConfig(original_ln_before=True, residual_before_ln="
        f"{config.residual_before_ln!r}) is not supported on Keras 3 yet: with the base's "
        "LayerNorm before the adapter, its skip must start before that LayerNorm "
        "(residual_before_ln=True, Pfeiffer's), or use the Keras 2 path "
        "(keras_adapters.AdaptedBert).")


def _add_deltas(block, spec):
  """Wraps the block's projections named in `spec` (a config's `delta_specs()` item)."""
  for target in projections.PROJECTIONS:
    if target not in spec["targets"]:
      continue
    owner_name, attribute = backbones.PROJECTION_ATTRIBUTES[target]
    owner = getattr(block, owner_name) if owner_name else block
    projection = getattr(owner, attribute)
    delta = layers.MethodDelta(spec["method"], target, math.prod(projection.bias.shape),
                               spec["targets"][target], dtype=block.dtype_policy,
                               name=f"{target}_{spec['method']}")
    _replace_sublayer(owner, attribute, layers.AdaptedProjection(
        projection, [delta], dtype=block.dtype_policy, name=f"{target}_adapted"))


def _add_pooler_delta(backbone, spec):
  """Wraps BERT's pooler projection for a config's `delta_specs()` item that targets it."""
  pooler = getattr(backbone, backbones.POOLER_ATTRIBUTE)
  delta = layers.MethodDelta(spec["method"], projections.POOLER, math.prod(pooler.bias.shape),
                             spec["targets"][projections.POOLER], dtype=pooler.dtype_policy,
                             name=f"{projections.POOLER}_{spec['method']}")
  _replace_graph_layer(backbone, backbones.POOLER_ATTRIBUTE, layers.AdaptedProjection(
      pooler, [delta], dtype=pooler.dtype_policy, name=f"{projections.POOLER}_adapted"))


def _add_adapters(block, config, adapter_size, hidden_size):
  """A bottleneck adapter after each sub-layer the config places one at: on its output, or
  in the place of its LayerNorm (`original_ln_before`)."""
  options = config.adapter_options()
  for placement in backbones.ADAPTER_ATTRIBUTES:
    if not options[placement]:
      continue
    adapter = layers.BottleneckAdapter(
        adapter_size, config.activation, config.init_stddev,
        {name: options[name] for name in bottleneck.LAYER_OPTIONS},
        dtype=block.dtype_policy, name=placement)
    adapter.build((None, None, hidden_size))
    if options["original_ln_before"]:
      attribute, wrapper = backbones.LAYER_NORM_ATTRIBUTES[placement], layers.AdaptedLayerNorm
    else:
      attribute, wrapper = backbones.ADAPTER_ATTRIBUTES[placement], layers.AdaptedSublayerOutput
    extra = {}
    if options["is_parallel"]:
      owner_name, tapped = backbones.PROJECTION_ATTRIBUTES[
          backbones.SUBLAYER_INPUT_PROJECTIONS[placement]]
      owner = getattr(block, owner_name) if owner_name else block
      extra["tap"] = layers.SublayerInputTap(getattr(owner, tapped), dtype=block.dtype_policy,
                                             name=f"{tapped.strip('_')}_input")
      _replace_sublayer(owner, tapped, extra["tap"])
    _replace_sublayer(block, attribute, wrapper(
        getattr(block, attribute), adapter, dtype=block.dtype_policy,
        name=f"{attribute.strip('_')}_adapted", **extra))


def _forget_traced_functions(model):
  """Drops the `fit`, `evaluate` and `predict` functions `model` traced before its layers
  changed, which would still compute with the old ones: its next call traces the new."""
  for name in ("train_function", "test_function", "predict_function"):
    if getattr(model, name, None) is not None:
      setattr(model, name, None)


def _replace_graph_layer(model, attribute, layer):
  """Sets `model.<attribute>`, a layer that the functional `model`'s graph calls (unlike a
  block's sub-layers, which the block calls by attribute), to `layer` in the graph too: its
  nodes call `layer` in the old one's place."""
  old = getattr(model, attribute)
  _replace_sublayer(model, attribute, layer)
  # pylint: disable=protected-access
  for nodes in model._nodes_by_depth.values():
    for node in nodes:
      if node.operation is old:
        node.operation = layer
  model._operations = [layer if operation is old else operation
                       for operation in model._operations]
  for depth, operations in model._operations_by_depth.items():
    model._operations_by_depth[depth] = [layer if operation is old else operation
                                         for operation in operations]


def _replace_sublayer(owner, attribute, layer):
  """Sets `owner.<attribute>` to `layer` in a built Keras 3 layer, tracking the new layer in
  place of the old one (a built layer's state is locked, as `Dense.enable_lora` knows)."""
  tracker = owner._tracker  # pylint: disable=protected-access
  was_locked = tracker.locked
  tracker.unlock()
  tracker.untrack(getattr(owner, attribute))
  setattr(owner, attribute, layer)
  if was_locked:
    tracker.lock()

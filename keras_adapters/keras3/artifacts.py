"""Keras 3 task models saved as the library's adapter artifacts and rebuilt from them.

The format is the Keras 2 path's (`keras_adapters.hub.adapter_artifact`): the same files,
config keys and tensor keys (`transformer/layer_0/attention_adapter/down_project/kernel`,
`transformer/layer_0/query/lora/lora_a`, `head/0/kernel`, ...) and the same base fingerprint
(`keras3.base_weights`), so a task saved by either stack loads on the other and gives the
same logits on the same base.
"""

import dataclasses

import numpy as np

import keras
from keras import ops

from keras_adapters.hub import adapter_artifact
# The package's `adapt` function hides the module's name: its names are imported.
from keras_adapters.keras3.adapt import adapt  # pylint: disable=g-importing-member
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import layers
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.models import classifier_head

AdapterArtifactError = adapter_artifact.AdapterArtifactError
PreprocessingConfig = adapter_artifact.PreprocessingConfig

POOLINGS = classifier_head.POOLINGS
# The Keras 2 block's adapter slots → the keras-hub block's placements (`adapt`), and its
# LayerNorms → the keras-hub block's, after the same sub-layers.
_SLOTS = {"attention_adapter": "mh_adapter", "feedforward_adapter": "output_adapter"}
_LAYER_NORMS = {"self_attention_layer_norm": "_self_attention_layer_norm",
                "output_layer_norm": "_feedforward_layer_norm"}
_SLOT_LAYER_NORMS = dict(zip(_SLOTS, _LAYER_NORMS.values()))


def build_classifier(backbone, num_classes, dropout_rate=0.1, pooling="cls",
                     hidden_layers=0, hidden_activation="tanh"):
  """The Keras 2 `build_classifier`'s head on a keras-hub backbone: a functional model from
  the backbone's inputs (`token_ids`, `segment_ids`, `padding_mask`) to logits.

  Args:
    backbone: A keras-hub `BertBackbone`, adapted (`adapt`) or not.
    num_classes: Logits; 1 for a regression task's score.
    dropout_rate: Dropout before each dense layer of the head while training.
    pooling: One of `POOLINGS`.
    hidden_layers: Dense layers of the hidden size (and `hidden_activation`) before the
      logits.
    hidden_activation: Their activation.

  Returns:
    A `keras.Model` whose `head_config` records the head as artifacts do.
  """
  classifier_head.check_head(num_classes, pooling, hidden_layers)
  inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key)
            for key in ("token_ids", "segment_ids", "padding_mask")}
  outputs = backbone(inputs)
  pooled = classifier_head.pool(outputs, pooling, lambda sequence: keras.layers.Lambda(
      _masked_mean, name="mean_pooling")([sequence, inputs["padding_mask"]]))
  logits = classifier_head.logits(keras, pooled, num_classes, dropout_rate, hidden_layers,
                                  hidden_activation)
  model = keras.Model(inputs, logits, name="classifier")
  model.head_config = dataclasses.asdict(classifier_head.HeadConfig(
      num_classes, pooling, dropout_rate, hidden_layers=hidden_layers,
      hidden_activation=hidden_activation))
  return model


def _masked_mean(tensors):
  sequence_output, padding_mask = tensors
  mask = ops.expand_dims(ops.cast(padding_mask, sequence_output.dtype), -1)
  return ops.sum(sequence_output * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)


def save_adapters(model, directory, metadata=None, *, label_names=None, preprocessing=None,
                  base_handle=None, overwrite=False):
  """Writes a Keras 3 task's adapters, LayerNorms and head as an adapter artifact, which
  `load_task_model` (and the Keras 2 path's `keras_adapters.load_task_model`) rebuild.

  Example:
  ```python
  kak.adapt(backbone, kak.LoRAConfig(r=8))
  classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=2)
  classifier.fit(...)
  kak.save_adapters(classifier, "adapters", label_names=["negative", "positive"])
  ```

  Args:
    model: A backbone `adapt` changed, a keras-hub `BertTextClassifier` on one, or a model
      of `build_classifier`.
    directory: Folder to write (as `keras_adapters.save_adapters`).
    metadata: Optional JSON-serialisable dict stored with the config.
    label_names: Class names in logit order.
    preprocessing: A `PreprocessingConfig` (the TF Hub preprocessing model and text
      fields), needed to export the task from its artifact alone.
    base_handle: The base's TF Hub handle or path, recorded for the Keras 2 path (which
      rebuilds the base from it); default the one the backbone was converted from, if any.
    overwrite: Replace a non-empty folder that is not an artifact.

  Returns:
    `directory`.
  """
  backbone = adapted_backbone(model, "save_adapters")
  head = head_config(model, backbone)
  if label_names is not None:
    if head is None or len(label_names) != head["num_classes"]:
      raise AdapterArtifactError(
          f"label_names={list(label_names)} does not fit the model's head "
          f"({'no head' if head is None else str(head['num_classes']) + ' logits'}).")
    head = dict(head, label_names=tuple(label_names))
  weights = task_weights(model)
  if backbone.adapter_config.delta_specs() and not any(
      f"/{spec['method']}/" in key for spec in backbone.adapter_config.delta_specs()
      for key in weights):
    raise AdapterArtifactError(
        "The backbone's LoRA or (IA)^3 layers were merged into its base (kak.merge), so it "
        "has no adapter set left to save: save the adapters before merging.")
  config = adapter_artifact.task_config(
      base=_base_record(backbone, base_handle), adapter_name=adapter_name(model),
      adapter_config=backbone.adapter_config, head=head, preprocessing=preprocessing,
      metadata=metadata)
  tensors = {key: np.asarray(ops.convert_to_numpy(variable)) for key, variable in weights.items()}
  return adapter_artifact.write_artifact(directory, config, tensors, overwrite=overwrite)


def load_adapters(model, directory):
  """Loads an artifact into a Keras 3 model built like the saved one (same base, config
  and head), after checking that it was trained on this base."""
  backbone = adapted_backbone(model, f"load_adapters({directory!r})")
  config = adapter_artifact.read_adapter_config(directory)
  adapter_artifact.check_base(config, directory, backbone.base_fingerprint,
                              tf_hub_handle(backbone))
  tensors = adapter_artifact.read_tensors(directory)
  targets = task_weights(model)
  adapter_artifact.check_tensors_fit(config, directory, tensors,
                                     {key: tuple(v.shape) for key, v in targets.items()})
  for key, variable in targets.items():
    variable.assign(tensors[key])


def load_task_model(directory, backbone):
  """Rebuilds a task on a keras-hub backbone from its artifact, saved by either stack.

  Example:
  ```python
  model = kak.load_task_model("runs/airline/export/adapters", backbone)
  logits = model.predict({"token_ids": ..., "segment_ids": ..., "padding_mask": ...})
  ```

  Args:
    directory: An artifact with a head (`save_adapters` of either stack).
    backbone: The base as a keras-hub `BertBackbone`, not adapted yet (e.g.
      `kak.from_tf_hub(handle)` of the TF Hub encoder the Keras 2 path trained on). Its
      weights must be the artifact's base (the fingerprint is checked) and its feed-forward
      activation the recorded one.

  Returns:
    The `build_classifier` model, with the artifact's weights; its `head_config` has the
    label names, its `preprocessing_config` the recorded `PreprocessingConfig` (or `None`).

  Raises:
    AdapterArtifactError: The artifact is missing, corrupt or has no head; it was trained on
      another base, with another activation, or with a tuning that changed the base.
  """
  config = adapter_artifact.read_adapter_config(directory)
  adapter_artifact.require_task_description(config, directory, "load_task_model")
  changed = adapter_artifact.changed_base_weights(config)
  if changed:
    raise AdapterArtifactError(
        f"The artifact at {directory!r} changes base weights ({changed[0]!r}...: tuning "
        f"{config['adapter_config'].get('tuning')!r}); Keras 3 serves adapter sets on a "
        "frozen base: load it with keras_adapters.load_task_model (Keras 2).")
  backbones.check_adaptable(backbone)
  adapter_artifact.check_base(config, directory, base_weights.fingerprint(backbone),
                              tf_hub_handle(backbone))
  recorded, activation = config["base"]["activation"], base_weights.activation_name(backbone)
  if recorded != activation:
    raise AdapterArtifactError(
        f"The artifact at {directory!r} was trained with the base's {recorded!r} feed-forward "
        f"activation; this backbone computes {activation!r} (keras-hub's BertBackbone has "
        "the tanh-approximate GELU): pass a backbone with the encoder's own activation, as "
        "kak.from_tf_hub builds it.")
  adapter_config = adapter_config_lib.check_set_config(config["adapter_config"])
  adapt(backbone, adapter_config)
  head = config["head"]
  model = build_classifier(backbone, head["num_classes"], dropout_rate=head["dropout_rate"],
                           pooling=head["pooling"], hidden_layers=head.get("hidden_layers", 0),
                           hidden_activation=head.get("hidden_activation", "tanh"))
  model.adapter_name = config["adapter_name"]
  load_adapters(model, directory)
  model.head_config = dict(model.head_config, label_names=adapter_artifact.label_names(head))
  model.preprocessing_config = (None if config.get("preprocessing") is None else
                                adapter_artifact.preprocessing_config(config, directory))
  return model


def task_weights(model):
  """The task's variables by artifact key: its adapter set's (`adapter_weights`) and, for a
  model with a head, the head's `head/<i>/<name>` (by position among the trainable
  variables outside the backbone, as on the Keras 2 path)."""
  backbone = getattr(model, "backbone", None) or _the_backbone(model)
  keyed = adapter_weights(backbone)
  backbone_ids = {id(v) for v in backbone.weights}
  head = [v for v in model.trainable_variables if id(v) not in backbone_ids]
  for index, variable in enumerate(head):
    keyed[f"head/{index}/{variable.name.rsplit('/', 1)[-1]}"] = variable
  return keyed


def adapter_weights(backbone):
  """An adapted backbone's adapter set by the Keras 2 path's keys: the LayerNorms (the
  embedding one and each block's two), the bottleneck adapters and the projections'
  changes (the pooler's too)."""
  keyed = _layer_norm("embeddings/layer_norm", backbone.embeddings_layer_norm)
  # pylint: disable=protected-access
  for index, block in enumerate(backbone.transformer_layers):
    prefix = f"transformer/layer_{index}"
    for slot, attribute in _LAYER_NORMS.items():
      # A LayerNorm an adapter wraps (Pfeiffer's placement) is the wrapper's `layer_norm`.
      norm = getattr(block, attribute)
      keyed.update(_layer_norm(f"{prefix}/{slot}", getattr(norm, "layer_norm", norm)))
    for slot, placement in _SLOTS.items():
      # An adapter sits after the sub-layer's dropout or (Pfeiffer's) at its LayerNorm.
      for wrapper in (getattr(block, backbones.ADAPTER_ATTRIBUTES[placement]),
                      getattr(block, _SLOT_LAYER_NORMS[slot])):
        if isinstance(getattr(wrapper, "adapter", None), layers.BottleneckAdapter):
          keyed.update({f"{prefix}/{slot}/{name}": variable
                        for name, variable in _bottleneck_weights(wrapper.adapter).items()})
    for target, (owner, attribute) in backbones.PROJECTION_ATTRIBUTES.items():
      projection = getattr(getattr(block, owner) if owner else block, attribute)
      if isinstance(projection, layers.AdaptedProjection):
        for delta in projection.deltas:
          keyed.update(_delta_weights(f"{prefix}/{target}", delta))
  pooler = getattr(backbone, backbones.POOLER_ATTRIBUTE, None)
  if isinstance(pooler, layers.AdaptedProjection):
    # The Keras 2 encoder's pooler is its `pooler_transform`.
    for delta in pooler.deltas:
      keyed.update(_delta_weights("pooler_transform", delta))
  return keyed


def _delta_weights(prefix, delta):
  return {f"{prefix}/{delta.method}/{name}": variable
          for name, variable in delta.weights_by_key().items()}


def _bottleneck_weights(adapter):
  """A `BottleneckAdapter`'s weights by their names inside it, as the Keras 2 `Adapter`'s
  (`down_project/kernel`, `ln_after/gamma`)."""
  keyed = {f"{name}/{part}": getattr(dense, part)
           for name, dense in (("down_project", adapter.down_project),
                               ("up_project", adapter.up_project))
           for part in ("kernel", "bias")}
  for name, norm in (("ln_before", adapter.layer_norm_before),
                     ("ln_after", adapter.layer_norm_after)):
    if norm is not None:
      keyed.update(_layer_norm(name, norm))
  return keyed


def _layer_norm(prefix, layer):
  return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def _the_backbone(model):
  if hasattr(model, "transformer_layers"):
    return model
  found = [layer for layer in model._flatten_layers()  # pylint: disable=protected-access
           if hasattr(layer, "transformer_layers")]
  if len(found) != 1:
    raise AdapterArtifactError(
        f"Adapter artifacts need a model with exactly one keras-hub backbone; found "
        f"{len(found)}.")
  return found[0]


def adapted_backbone(model, user):
  """The keras-hub backbone of `model` (itself, a task's `backbone`, or the one inside it),
  or an error naming `user` (what asked) when `adapt` has not changed it."""
  backbone = getattr(model, "backbone", None) or _the_backbone(model)
  if getattr(backbone, "adapter_config", None) is None:
    raise AdapterArtifactError(
        f"{user}: the model's {type(backbone).__name__} has no adapter set; put one in with "
        "kak.adapt(backbone, config) first.")
  return backbone


def head_config(model, backbone):
  """The head as artifacts record it: `build_classifier`'s own record, a keras-hub
  `BertTextClassifier`'s (BERT's pooler, dropout, dense), or `None` for a bare backbone."""
  if model is backbone:
    return None
  if hasattr(model, "head_config"):
    return dict(model.head_config)
  if type(model).__name__ == "BertTextClassifier":
    activation = getattr(model.activation, "__name__", str(model.activation))
    if activation != "linear":
      raise AdapterArtifactError(
          f"The BertTextClassifier has activation={activation!r}; artifacts record heads "
          "that give logits: build it with activation=None.")
    return dict(num_classes=model.num_classes, pooling="cls", dropout_rate=model.dropout,
                label_names=None, kind="classifier", hidden_layers=0,
                hidden_activation="tanh")
  raise AdapterArtifactError(
      f"save_adapters does not know the head of a {type(model).__name__}: pass the backbone, "
      "a keras-hub BertTextClassifier or a kak.build_classifier model.")


def adapter_name(model):
  """The name of the model's adapter set, as artifacts record it ("default" unless set)."""
  return getattr(model, "adapter_name", None) or "default"


def tf_hub_handle(backbone):
  """The TF Hub handle a backbone was converted from (`from_tf_hub`), else ""."""
  return getattr(backbone, "tf_hub_handle", None) or ""


def _base_record(backbone, base_handle):
  block = backbone.transformer_layers[0]
  return dict(handle=str(base_handle or tf_hub_handle(backbone)),
              fingerprint=backbone.base_fingerprint,
              activation=base_weights.activation_name(backbone),
              dropout_rate=backbone.dropout, attention_dropout_rate=backbone.dropout,
              layer_norm_epsilon=block.layer_norm_epsilon)

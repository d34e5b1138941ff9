"""Adapter sets: what one task puts into a shared BERT encoder, and `AdapterSet` to hold it."""

from typing import Callable, NamedTuple, Tuple

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import layer_norm as layer_norm_lib

_ADAPTER_SLOTS = ("attention_adapter", "feedforward_adapter")
_LAYER_NORM_SLOTS = ("self_attention_layer_norm", "output_layer_norm")


class EncoderAdapters(NamedTuple):
  """What an adapter set puts into an encoder: the embedding LayerNorm, per block its
  `BlockAdapters` (two adapters, two LayerNorms, changes to its projections) and the changes
  to the pooler's projection, applied in turn. Entries are callables, as in `BlockAdapters`.
  """
  embedding_layer_norm: Callable
  blocks: Tuple[adapted_transformer_block.BlockAdapters, ...]
  pooler: Tuple[Callable, ...] = ()


def adapter_weights_by_key(adapters):
  """The weights of an `EncoderAdapters` of Keras layers, by stable keys.

  Keys are the Model Garden names of an encoder's own adapters, LayerNorms and projection
  changes (`embeddings/layer_norm/gamma`,
  `transformer/layer_0/attention_adapter/down_project/kernel`,
  `transformer/layer_0/query/lora/lora_a`, `pooler_transform/lora/lora_a`, ...) whichever
  set they come from, so one set's
  weights load into another's.

  Args:
    adapters: An `EncoderAdapters` whose entries are `LayerNormalization` and `Adapter`
      layers (or `None` for an absent adapter) and `ProjectionDelta` layers.

  Returns:
    A dict from key to variable.
  """
  prefixed = [("embeddings/layer_norm", adapters.embedding_layer_norm)]
  for index, block in enumerate(adapters.blocks):
    prefixed += [(f"transformer/layer_{index}/{slot}", layer)
                 for slot, layer in block.slots().items() if layer is not None]
    prefixed += [(f"transformer/layer_{index}/{layer.name}", layer)
                 for layers in block.projection_changes().values() for layer in layers]
  prefixed += [(layer.name, layer) for layer in adapters.pooler]
  keyed = {}
  for prefix, layer in prefixed:
    parts = ({"gamma": layer.gamma, "beta": layer.beta}
             if isinstance(layer, keras.layers.LayerNormalization) else layer.weights_by_key())
    keyed.update({f"{prefix}/{name}": weight for name, weight in parts.items()})
  return keyed


def is_base_layer_norm(key):
  """Whether an `adapter_weights_by_key` key is a weight of one of the base's LayerNorms
  (the embedding one or a block's two), not of an adapter's own."""
  return key.endswith(("/gamma", "/beta")) and not any(
      f"/{slot}/" in key for slot in _ADAPTER_SLOTS)


@keras.utils.register_keras_serializable(package="keras_adapters")
class AdapterSet(keras.layers.Layer):
  """A task's own adapters and LayerNorms for every layer of a BERT encoder, kept beside it.

  An `AdaptedBertEncoder` holds one set of adapters and LayerNorms in its blocks; each further
  task on the same frozen base holds its own in an `AdapterSet` and passes
  `encoder_adapters()` to the encoder's call. Sub-layers are named as in the encoder
  (`transformer/layer_0/attention_adapter`, `embeddings/layer_norm`, ...) and are created by
  `build()`; LayerNorms start at the identity (gamma 1, beta 0): `AdaptedBert.add_adapter`
  copies the base's values in.

  Example:
  >>> adapter_set = AdapterSet(num_layers=2, adapter_size=4, leave_out=(0,))
  >>> adapter_set.build((None, None, 16))
  >>> adapter_set.count_params()  # one block's two adapters, five LayerNorms
  456

  Args:
    num_layers: Transformer blocks of the encoder.
    adapter_size: Adapter bottleneck `m`, or `None` for LayerNorms only.
    activation: Nonlinearity inside the adapters.
    init_stddev: Standard deviation of the adapters' initial projections.
    leave_out: Indices of the blocks that get no adapters.
    adapter_options: A dict of AdapterHub options (`adapter.ADAPTER_OPTIONS`): which
      sub-layers get adapters and how they join them.
    layer_norm_epsilon: LayerNorm epsilon of the encoder.
    embedding_width: Width of the encoder's embeddings, which its embedding LayerNorm
      normalises; `None` means the hidden size the set is built for.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, num_layers, adapter_size=None, activation="relu", init_stddev=1e-2,
               leave_out=(), layer_norm_epsilon=1e-12, embedding_width=None,
               adapter_options=None, **kwargs):
    super().__init__(**kwargs)
    self.num_layers = num_layers
    self.adapter_size = adapter_size
    self.activation = activation
    self.init_stddev = init_stddev
    self.leave_out = tuple(leave_out)
    self.layer_norm_epsilon = layer_norm_epsilon
    self.embedding_width = embedding_width
    self.adapter_options = dict(adapter_options or {})
    adapter_lib.validate_options(self.adapter_options)

  def build(self, input_shape):
    hidden_size = tf.TensorShape(input_shape)[-1]
    # Slot path → (layer maker, width); a dict, so that AdapterDrop can remove an adapter and
    # the set still checkpoints.
    self.slots = {}
    options = {**adapter_lib.ADAPTER_OPTIONS, **self.adapter_options}
    placed = [slot for slot, flag in zip(_ADAPTER_SLOTS, ("mh_adapter", "output_adapter"))
              if options.pop(flag)]
    paths = [("embeddings/layer_norm", self._layer_norm, self.embedding_width or hidden_size)]
    for index in range(self.num_layers):
      paths += [(f"transformer/layer_{index}/{slot}", self._layer_norm, hidden_size)
                for slot in _LAYER_NORM_SLOTS]
      if self.adapter_size is not None and index not in self.leave_out:
        paths += [(f"transformer/layer_{index}/{slot}",
                   lambda name: self._adapter(name, options), hidden_size) for slot in placed]
    with tf.name_scope(self.name):
      for path, make, width in paths:
        layer = make(path)
        with tf.name_scope(path):
          layer.build(tf.TensorShape([None, None, width]))
        self.slots[path] = layer
    super().build(input_shape)

  def _layer_norm(self, name):
    return layer_norm_lib.LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype="float32", name=name)

  def _adapter(self, name, options):
    return adapter_lib.Adapter(self.adapter_size, activation=self.activation,
                               init_stddev=self.init_stddev, dtype=self.dtype_policy,
                               name=name, **options)

  def encoder_adapters(self):
    """The set as the encoder's call takes it: an `EncoderAdapters` of this set's layers."""
    blocks = []
    for index in range(self.num_layers):
      layers = {slot: self.slots.get(f"transformer/layer_{index}/{slot}")
                for slot in _ADAPTER_SLOTS + _LAYER_NORM_SLOTS}
      blocks.append(adapted_transformer_block.BlockAdapters(**layers))
    return EncoderAdapters(self.slots["embeddings/layer_norm"], tuple(blocks))

  def drop_adapters(self, layers):
    """Removes the adapters of the blocks `layers` (AdapterDrop); their LayerNorms stay."""
    for index in layers:
      for slot in _ADAPTER_SLOTS:
        path = f"transformer/layer_{index}/{slot}"
        if path in self.slots:
          del self.slots[path]  # Through the tracking wrapper, which dict.pop would bypass.
    self.leave_out = tuple(sorted(set(self.leave_out) | set(layers)))

  def get_config(self):
    config = super().get_config()
    config.update({
        "num_layers": self.num_layers,
        "adapter_size": self.adapter_size,
        "activation": self.activation,
        "init_stddev": self.init_stddev,
        "leave_out": list(self.leave_out),
        "layer_norm_epsilon": self.layer_norm_epsilon,
        "embedding_width": self.embedding_width,
        "adapter_options": self.adapter_options,
    })
    return config

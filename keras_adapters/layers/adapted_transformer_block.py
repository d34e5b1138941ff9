"""A BERT Transformer encoder block with bottleneck adapters in its sub-layers."""

from typing import Callable, Mapping, NamedTuple, Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from keras_adapters import methods  # pylint: disable=unused-import  (registers them)
from keras_adapters.layers import activations
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import dropout
from keras_adapters.layers import layer_norm as layer_norm_lib
from keras_adapters.layers import self_attention as self_attention_lib
from keras_adapters.methods import projection_delta
from keras_adapters.methods import registry


class BlockAdapters(NamedTuple):
  """What an adapter set puts into one block: its two adapters, two LayerNorms and the
  changes to its projections.

  Each is a Keras layer or a function applying per-example parameters. A LayerNorm maps
  `[batch, seq, hidden]` to the same shape; an adapter is called as `Adapter` is, on the
  sub-layer's output, its input and its LayerNorm, and may be `None` (no adapter there).
  `projections` maps a projection's name (`projection_delta.PROJECTIONS`) to the changes
  applied to it in turn, each called as a `ProjectionDelta` is (LoRA, (IA)³); `None`: none.
  """
  attention_adapter: Optional[Callable]
  self_attention_layer_norm: Callable
  feedforward_adapter: Optional[Callable]
  output_layer_norm: Callable
  projections: Optional[Mapping[str, Tuple[Callable, ...]]] = None

  def slots(self):
    """The adapters and LayerNorms by slot name (without `projections`)."""
    return {slot: getattr(self, slot) for slot in SLOTS}

  def projection_changes(self):
    """`projections`, `{}` when there are none."""
    return self.projections or {}


# The adapter and LayerNorm slots of `BlockAdapters`, in order.
SLOTS = BlockAdapters._fields[:4]


@keras.utils.register_keras_serializable(package="keras_adapters")
class AdaptedTransformerBlock(keras.layers.Layer):
  """Post-LayerNorm BERT block with an adapter after each output projection.

  The data path is BERT's, by default with the two adapters where Houlsby et al. put them:
  after the attention output projection and after the feed-forward output projection, each
  after the sub-layer's dropout and before its residual add and LayerNorm.

      a = LayerNorm(x + Adapter(Dropout(SelfAttention(x))))
      y = LayerNorm(a + Adapter(Dropout(W_out · act(W_in · a))))

  `adapter_options` (AdapterHub's names, `adapter.ADAPTER_OPTIONS`) pick other placements:
  the feed-forward adapter only (Pfeiffer), parallel adapters, the base's LayerNorm before
  the adapter too, the adapters' own LayerNorms and scaling. `projection_deltas` add a
  method's layers to projections (LoRA, (IA)³; `keras_adapters.methods`).

  Sub-layer names follow the Model Garden `TransformerEncoderBlock` (`self_attention`,
  `self_attention_layer_norm`, `intermediate`, `output`, `output_layer_norm`), so TF Hub
  variables map onto them by name. The adapters are `attention_adapter` and
  `feedforward_adapter`. Every sub-layer is a Keras layer with its own `trainable` flag.
  A call may swap the block's own adapters and LayerNorms for another set's
  (`adapters=BlockAdapters(...)`): one base serves several tasks.

  Example:
  >>> block = AdaptedTransformerBlock(num_heads=2, intermediate_size=64, adapter_size=8)
  >>> block(tf.zeros([2, 5, 32])).shape
  TensorShape([2, 5, 32])

  Args:
    num_heads: Number of attention heads; must divide the hidden size.
    intermediate_size: Width of the feed-forward inner layer.
    activation: Feed-forward activation. `"gelu"` is the exact (erf) GELU of the TF Hub
      BERTs; `"gelu_approximate"` is the tanh approximation of the original BERT code.
    dropout_rate: Dropout on each sub-layer output and on the embeddings (BERT's 0.1).
    attention_dropout_rate: Dropout on the attention probabilities.
    layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).
    recompute_attention: When the attention probabilities are recomputed in the backward
      pass instead of kept, trading step time for memory
      (`self_attention.RECOMPUTE_CHOICES`): "auto" from
      `self_attention.RECOMPUTE_FROM_LENGTH` tokens, "always" or "never".
    adapter_size: Adapter bottleneck `m`, or `None` for a block without adapters.
    adapter_activation: Nonlinearity inside the adapters.
    adapter_init_stddev: Standard deviation of the adapters' initial projections.
    adapter_options: A dict of AdapterHub options (`adapter.ADAPTER_OPTIONS`); unset ones
      keep their (Houlsby) defaults.
    projection_deltas: A list of `{"method": name, "targets": {projection: options}}`: the
      registered method's layer (`methods.registry`) at each projection, with those options.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self,
               num_heads,
               intermediate_size,
               activation="gelu",
               dropout_rate=0.1,
               attention_dropout_rate=0.1,
               layer_norm_epsilon=1e-12,
               recompute_attention="auto",
               adapter_size=None,
               adapter_activation="relu",
               adapter_init_stddev=1e-2,
               adapter_options=None,
               projection_deltas=None,
               **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.activation = activation
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.recompute_attention = recompute_attention
    self.adapter_size = adapter_size
    self.adapter_activation = adapter_activation
    self.adapter_init_stddev = adapter_init_stddev
    self.adapter_options = dict(adapter_options or {})
    adapter_lib.validate_options(self.adapter_options)
    self.projection_deltas = [dict(spec) for spec in projection_deltas or ()]

  def build(self, input_shape):
    hidden_size = input_shape[-1]
    # Sub-layers compute in the block's policy (the LayerNorms in float32), so that a block
    # given `dtype=` computes in it whatever the global policy.
    self.self_attention = self_attention_lib.SelfAttention(
        num_heads=self.num_heads, dropout_rate=self.attention_dropout_rate,
        recompute_attention=self.recompute_attention, dtype=self.dtype_policy, name="self_attention")
    self.attention_dropout = dropout.Dropout(self.dropout_rate, dtype=self.dtype_policy)
    self.self_attention_layer_norm = self._layer_norm("self_attention_layer_norm")
    # The activation apart from its projection, which a method may change before it.
    self.intermediate = keras.layers.Dense(
        self.intermediate_size, dtype=self.dtype_policy, name="intermediate")
    self.intermediate_activation = activations.get(self.activation)
    self._training_activation = activations.get(self.activation, training=True)
    self.output_dense = keras.layers.Dense(hidden_size, dtype=self.dtype_policy, name="output")
    self.output_dropout = dropout.Dropout(self.dropout_rate, dtype=self.dtype_policy)
    self.output_layer_norm = self._layer_norm("output_layer_norm")
    options = {**adapter_lib.ADAPTER_OPTIONS, **self.adapter_options}
    after_attention, after_feedforward = options.pop("mh_adapter"), options.pop("output_adapter")
    self.attention_adapter = self._adapter("attention_adapter", after_attention, options)
    self.feedforward_adapter = self._adapter("feedforward_adapter", after_feedforward, options)
    # Every sub-layer builds here, each in its own name scope, as a call would scope it, so
    # variable names read like a TF Hub export's: ".../transformer/layer_0/self_attention/
    # query/kernel". The order is the one this block always had (the LayerNorms and the
    # feed-forward projections, the methods' layers, then the attention and the adapters in
    # the order a call reaches them), so a seeded build draws the same initial weights.
    for layer, shape in ((self.self_attention_layer_norm, input_shape),
                         (self.output_layer_norm, input_shape),
                         (self.intermediate, input_shape),
                         (self.output_dense, tf.TensorShape(input_shape)[:-1].concatenate(
                             [self.intermediate_size]))):
      with tf.name_scope(layer.name):
        layer.build(shape)
    self.deltas = self._build_deltas(hidden_size)
    for layer in (self.self_attention, self.attention_adapter, self.feedforward_adapter):
      if layer is not None:
        with tf.name_scope(layer.name):
          layer.build(input_shape)
    super().build(input_shape)

  def _build_deltas(self, hidden_size):
    """Projection name → its method layers, named `<projection>/<method>`, built."""
    deltas = {}
    for spec in self.projection_deltas:
      layer_class = registry.get(spec["method"]).layer_class
      for target, options in spec["targets"].items():
        width_in, width_out = projection_delta.projection_widths(
            target, hidden_size, self.intermediate_size)
        layer = layer_class(target=target, units=width_out, dtype=self.dtype_policy,
                            name=f"{target}/{spec['method']}", **options)
        with tf.name_scope(layer.name):
          layer.build(tf.TensorShape([None, width_in]))
        deltas.setdefault(target, []).append(layer)
    return deltas

  def _layer_norm(self, name):
    # LayerNorm in float32 even under mixed precision, as the Model Garden does.
    return layer_norm_lib.LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype="float32", name=name)

  def _adapter(self, name, placed, options):
    if self.adapter_size is None or not placed:
      return None
    return adapter_lib.Adapter(
        self.adapter_size,
        activation=self.adapter_activation,
        init_stddev=self.adapter_init_stddev,
        dtype=self.dtype_policy,
        name=name,
        **options)

  @property
  def adapters(self):
    """The block's own adapters, empty when it has none."""
    return [a for a in (self.attention_adapter, self.feedforward_adapter) if a is not None]

  def projection_variables(self, target):
    """The frozen `(kernel, bias)` variables of the projection `target`."""
    if target in ("intermediate", "output"):
      dense = self.intermediate if target == "intermediate" else self.output_dense
      return dense.kernel, dense.bias
    return self.self_attention.projection_variables(target)

  @property
  def projection_layers(self):
    """The block's own method layers (LoRA, (IA)³), empty when it has none."""
    return [layer for layers in self.deltas.values() for layer in layers]

  def own_adapters(self):
    """The block's own adapters, LayerNorms and projection changes, as a `BlockAdapters`."""
    return BlockAdapters(self.attention_adapter, self.self_attention_layer_norm,
                         self.feedforward_adapter, self.output_layer_norm,
                         {target: tuple(layers) for target, layers in self.deltas.items()})

  def call(self, inputs, attention_mask=None, training=None, adapters=None):
    if adapters is None:
      adapters = self.own_adapters()
    projections = adapters.projection_changes()
    attention = self.self_attention(inputs, attention_mask=attention_mask, training=training,
                                    projections=projections)
    attention = self.attention_dropout(attention, training=training)
    attention = _join(adapters.attention_adapter, attention, inputs,
                      adapters.self_attention_layer_norm)

    # A training call's activation has a one-pass gradient (`activations`), same values.
    activation = (self._training_activation if activations.is_training_call(training)
                  else self.intermediate_activation)
    intermediate = projection_delta.apply_projection(
        projections.get("intermediate", ()), attention, self.intermediate, training)
    feedforward = projection_delta.apply_projection(
        projections.get("output", ()), activation(intermediate), self.output_dense, training)
    feedforward = self.output_dropout(feedforward, training=training)
    return _join(adapters.feedforward_adapter, feedforward, attention,
                 adapters.output_layer_norm)

  def get_config(self):
    config = super().get_config()
    config.update({
        "num_heads": self.num_heads,
        "intermediate_size": self.intermediate_size,
        "activation": self.activation,
        "dropout_rate": self.dropout_rate,
        "attention_dropout_rate": self.attention_dropout_rate,
        "layer_norm_epsilon": self.layer_norm_epsilon,
        "recompute_attention": self.recompute_attention,
        "adapter_size": self.adapter_size,
        "adapter_activation": self.adapter_activation,
        "adapter_init_stddev": self.adapter_init_stddev,
        "adapter_options": self.adapter_options,
        "projection_deltas": self.projection_deltas,
    })
    return config


def _join(adapter, hidden, sublayer_input, layer_norm):
  """A sub-layer's output: BERT's `layer_norm(x + hidden)`, or as its adapter places it."""
  # The sub-layer's output, in the compute dtype, joins the residual stream in float32 (the
  # LayerNorms' dtype), as the Model Garden's block adds its feed-forward output; so does the
  # input an adapter gets.
  hidden, sublayer_input = tf.cast(hidden, tf.float32), tf.cast(sublayer_input, tf.float32)
  if adapter is None:
    return layer_norm(sublayer_input + hidden)
  return adapter(hidden, sublayer_input=sublayer_input, layer_norm=layer_norm)


# Their old import path, kept: the activations moved to `activations`.
gelu_approximate = activations.gelu_approximate
gelu_exact = activations.gelu_exact

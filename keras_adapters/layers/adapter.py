"""The bottleneck adapter as a Keras 2 layer; where it joins a Transformer sub-layer and how
(AdapterHub's options) is its definition, `bottleneck.py`."""

import functools

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import bottleneck

ADAPTER_OPTIONS = bottleneck.ADAPTER_OPTIONS
ADAPTER_LAYER_NORM_EPSILON = bottleneck.ADAPTER_LAYER_NORM_EPSILON
AdapterParts = bottleneck.AdapterParts
validate_options = bottleneck.validate_options
place_adapter = functools.partial(bottleneck.place_adapter, tf)


@keras.utils.register_keras_serializable(package="keras_adapters")
class Adapter(keras.layers.Layer):
  """Bottleneck adapter with an internal skip connection (Houlsby et al. 2019).

  Called on `h` alone it computes `h + s · (W_up · f(W_down · h + b_down) + b_up)`. Called
  on a Transformer sub-layer's output `h` with the sub-layer's input `x` and the base's
  LayerNorm, it computes the sub-layer's whole output the way AdapterHub does for its
  options (`place_adapter`); by default Houlsby's `LayerNorm(x + h + W_up · f(W_down · h))`.
  Both projections start from a truncated normal (cut at two standard deviations) with a
  small standard deviation and the biases start at zero, so a new adapter is close to the
  identity and a frozen network keeps its pre-trained behaviour at the first step. For
  hidden size `d` and bottleneck `m` it holds `2md + d + m` parameters (plus `2d` per own
  LayerNorm), created by `build()`.

  Example:
  >>> adapter = Adapter(adapter_size=8)
  >>> adapter.build((None, None, 32))
  >>> adapter.count_params()
  552
  >>> adapter(tf.zeros([2, 5, 32])).shape
  TensorShape([2, 5, 32])

  Args:
    adapter_size: `m`, the width of the down-projection; must be positive.
    activation: The nonlinearity `f` between the projections, any Keras activation name
      (AdapterHub's relu, swish/silu, gelu, tanh).
    init_stddev: Standard deviation of the truncated-normal initial projections. `0` makes
      the adapter an exact identity at initialisation.
    is_parallel, scaling, original_ln_before, original_ln_after, residual_before_ln,
      adapter_residual_before_ln, ln_before, ln_after: AdapterHub's options, see
      `ADAPTER_OPTIONS`; the defaults are Houlsby's.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, adapter_size, activation="relu", init_stddev=1e-2, is_parallel=False,
               scaling=1.0, original_ln_before=False, original_ln_after=True,
               residual_before_ln=True, adapter_residual_before_ln=False, ln_before=False,
               ln_after=False, **kwargs):
    super().__init__(**kwargs)
    # bool is an int subclass: True must not pass as a size of 1.
    if (isinstance(adapter_size, bool) or not isinstance(adapter_size, int)
        or adapter_size <= 0):
      raise ValueError(
          f"Adapter adapter_size must be a positive integer, got {adapter_size!r}. "
          "The paper uses sizes from 2 to 256; 64 is the usual default.")
    if init_stddev < 0:
      raise ValueError(f"Adapter init_stddev must be >= 0, got {init_stddev!r}.")
    self.adapter_size = adapter_size
    self.activation = activation
    self.init_stddev = init_stddev
    self.is_parallel = is_parallel
    self.scaling = scaling
    self.original_ln_before = original_ln_before
    self.original_ln_after = original_ln_after
    self.residual_before_ln = residual_before_ln
    self.adapter_residual_before_ln = adapter_residual_before_ln
    self.ln_before = ln_before
    self.ln_after = ln_after
    validate_options(self.options())

  def options(self):
    """The AdapterHub options of this adapter, as a dict."""
    return {name: getattr(self, name) for name in bottleneck.LAYER_OPTIONS}

  def build(self, input_shape):
    input_shape = tf.TensorShape(input_shape)
    self.down_project, self.up_project = bottleneck.projection_layers(
        keras, self.adapter_size, input_shape[-1], self.activation, self.init_stddev,
        self.dtype_policy)
    self.layer_norm_before = (bottleneck.own_layer_norm(keras, "ln_before") if self.ln_before
                              else None)
    self.layer_norm_after = (bottleneck.own_layer_norm(keras, "ln_after") if self.ln_after
                             else None)
    # Built here, each in its own name scope, so the weights exist (and are named
    # ".../down_project/kernel") before the first call.
    shapes = {self.down_project: input_shape,
              self.up_project: input_shape[:-1].concatenate([self.adapter_size]),
              self.layer_norm_before: input_shape, self.layer_norm_after: input_shape}
    for layer, shape in shapes.items():
      if layer is not None:
        with tf.name_scope(layer.name):
          layer.build(shape)
    super().build(input_shape)

  def weights_by_key(self):
    """The weights by their name inside the adapter (`down_project/kernel`, `ln_after/gamma`)."""
    keyed = {f"{dense.name}/{part}": getattr(dense, part)
             for dense in (self.down_project, self.up_project) for part in ("kernel", "bias")}
    for norm in (self.layer_norm_before, self.layer_norm_after):
      if norm is not None:
        keyed.update({f"{norm.name}/gamma": norm.gamma, f"{norm.name}/beta": norm.beta})
    return keyed

  def call(self, inputs, sublayer_input=None, layer_norm=None):
    parts = AdapterParts(
        project=lambda h: self.up_project(self.down_project(h)),
        norm_before=self.layer_norm_before, norm_after=self.layer_norm_after)
    if sublayer_input is None:
      return inputs + self.scaling * parts.project(inputs)
    return place_adapter(parts, self.options(), inputs, sublayer_input, layer_norm)

  def get_config(self):
    config = super().get_config()
    config.update({
        "adapter_size": self.adapter_size,
        "activation": self.activation,
        "init_stddev": self.init_stddev,
        **self.options(),
    })
    return config

"""The bottleneck adapter, and where it joins a Transformer sub-layer (AdapterHub's options)."""

from typing import Callable, NamedTuple, Optional

import tensorflow as tf
import tf_keras as keras

# Where an adapter sits and how it joins the residual stream, under AdapterHub's names (its
# `BnConfig`); the defaults are Houlsby's placement, AdapterHub's `DoubleSeqBnConfig`.
# - mh_adapter / output_adapter: an adapter after the attention / feed-forward sub-layer.
# - is_parallel: the adapter reads the sub-layer's input and its output is added to the
#   sub-layer's (He et al. 2022) instead of transforming the sub-layer's output.
# - scaling: factor on the adapter's up-projection.
# - original_ln_before: the base's residual add and LayerNorm come before the adapter too.
# - original_ln_after: the base's residual add and LayerNorm come after the adapter.
# - residual_before_ln: the adapter's own skip connection starts before the base LayerNorm
#   (True), after it (False), or after the base residual add ("post_add").
# - adapter_residual_before_ln: with ln_after, the adapter's skip joins before that LayerNorm.
# - ln_before / ln_after: a LayerNorm of the adapter's own on its input / on its output.
ADAPTER_OPTIONS = dict(
    mh_adapter=True, output_adapter=True, is_parallel=False, scaling=1.0,
    original_ln_before=False, original_ln_after=True, residual_before_ln=True,
    adapter_residual_before_ln=False, ln_before=False, ln_after=False)
# Options of one adapter (the others say which sub-layers get one).
_ADAPTER_LAYER_OPTIONS = tuple(k for k in ADAPTER_OPTIONS
                               if k not in ("mh_adapter", "output_adapter"))
# The adapters' own LayerNorms are PyTorch's (`nn.LayerNorm`) in AdapterHub: epsilon 1e-5.
ADAPTER_LAYER_NORM_EPSILON = 1e-5


def validate_options(options):
  """Raises a clear error for unknown options or combinations AdapterHub cannot run either.

  Args:
    options: A dict of some `ADAPTER_OPTIONS` keys.
  """
  unknown = sorted(set(options) - set(ADAPTER_OPTIONS))
  if unknown:
    raise ValueError(f"Unknown adapter options {unknown}; known: {list(ADAPTER_OPTIONS)}.")
  options = {**ADAPTER_OPTIONS, **options}
  for name in ADAPTER_OPTIONS:
    if name not in ("scaling", "residual_before_ln") and not isinstance(options[name], bool):
      raise ValueError(f"Adapter option {name} must be True or False, got {options[name]!r}.")
  if options["residual_before_ln"] not in (True, False, "post_add"):
    raise ValueError("residual_before_ln must be True, False or 'post_add', got "
                     f"{options['residual_before_ln']!r}.")
  if options["residual_before_ln"] == "post_add" and not options["original_ln_before"]:
    raise ValueError("residual_before_ln='post_add' takes the skip after the base's residual "
                     "add, which only original_ln_before=True makes: set both.")
  if options["is_parallel"] and options["original_ln_before"]:
    raise ValueError("original_ln_before=True applies to sequential adapters only; a parallel "
                     "adapter (is_parallel=True) reads the sub-layer's input.")
  scaling = options["scaling"]
  if isinstance(scaling, bool) or not isinstance(scaling, (int, float)):
    raise ValueError(
        f"scaling must be a number, got {scaling!r} (AdapterHub's learned scalings 'learned' "
        "and 'channel' are not supported).")


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
    return {name: getattr(self, name) for name in _ADAPTER_LAYER_OPTIONS}

  def build(self, input_shape):
    input_shape = tf.TensorShape(input_shape)
    self.down_project = keras.layers.Dense(
        self.adapter_size,
        activation=self.activation,
        kernel_initializer=self._kernel_initializer(),
        dtype=self.dtype_policy,
        name="down_project")
    self.up_project = keras.layers.Dense(
        input_shape[-1], kernel_initializer=self._kernel_initializer(),
        dtype=self.dtype_policy, name="up_project")
    self.layer_norm_before = self._layer_norm("ln_before") if self.ln_before else None
    self.layer_norm_after = self._layer_norm("ln_after") if self.ln_after else None
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

  def _layer_norm(self, name):
    return keras.layers.LayerNormalization(
        epsilon=ADAPTER_LAYER_NORM_EPSILON, dtype="float32", name=name)

  def _kernel_initializer(self):
    # One initializer object per kernel, as in the Model Garden: a shared seeded instance
    # would give both projections the same draw.
    return keras.initializers.TruncatedNormal(stddev=self.init_stddev)

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


class AdapterParts(NamedTuple):
  """An adapter's computations as callables: `project` (`W_up · f(W_down · h)` with biases)
  and its own LayerNorms `norm_before` and `norm_after` (`None` when absent)."""
  project: Callable
  norm_before: Optional[Callable] = None
  norm_after: Optional[Callable] = None


def place_adapter(parts, options, hidden, sublayer_input, layer_norm):
  """A Transformer sub-layer's output with an adapter, as AdapterHub computes it.

  AdapterHub's `bottleneck_layer_forward` for one adapter: `pre_forward` (where the
  adapter's skip starts, whether the base's residual add and LayerNorm come first), the
  adapter (its own LayerNorms, scaling, skip), then `post_forward` (the base's residual add
  and LayerNorm after it). A parallel adapter reads the sub-layer's input instead.

  Args:
    parts: The adapter's `AdapterParts`.
    options: Its options (`ADAPTER_OPTIONS` keys other than the placement flags).
    hidden: The sub-layer's output after its dropout, `[batch, seq, hidden]`.
    sublayer_input: The sub-layer's input `x` (the base's residual).
    layer_norm: The base's LayerNorm of this sub-layer, a callable.

  Returns:
    The sub-layer's output, what the base computes as `layer_norm(x + hidden)`; float32.
  """
  # The residual stream is float32 under mixed precision too, as the LayerNorms give it (the
  # Model Garden's block adds its feed-forward output in float32 as well): `hidden` and the
  # projection, in the compute dtype, join it in float32.
  hidden, sublayer_input = tf.cast(hidden, tf.float32), tf.cast(sublayer_input, tf.float32)

  def bottleneck(inputs):
    if parts.norm_before is not None:
      inputs = parts.norm_before(inputs)
    return options["scaling"] * tf.cast(parts.project(inputs), tf.float32)

  if options["is_parallel"]:
    output = bottleneck(sublayer_input)
    if parts.norm_after is not None:
      output = parts.norm_after(output)
    output += hidden
  else:
    residual = hidden
    if options["original_ln_before"]:
      hidden = hidden + sublayer_input
      if options["residual_before_ln"] == "post_add":
        residual = hidden
      hidden = layer_norm(hidden)
    if options["residual_before_ln"] is False:
      residual = hidden
    output = bottleneck(hidden)
    if options["adapter_residual_before_ln"]:
      output += residual
    if parts.norm_after is not None:
      output = parts.norm_after(output)
    if not options["adapter_residual_before_ln"]:
      output += residual
  if options["original_ln_after"]:
    output = layer_norm(output + sublayer_input)
  return output

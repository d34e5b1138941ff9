"""The bottleneck adapter's one definition, for Keras 2 and Keras 3: where it joins a
Transformer sub-layer (AdapterHub's options), its layers and how they start, and the
placement's computation.

Plain Python over namespaces: `ops` with TensorFlow's names and meanings (`cast`), `tf` for
Keras 2 or `keras.ops` for Keras 3, and `keras`, the `tf_keras` or `keras` module.
"""

from typing import Callable, NamedTuple, Optional

from keras_adapters.methods.adapters import options as _options

# Where an adapter joins a sub-layer: defined with the method's config, read here.
ADAPTER_OPTIONS = _options.ADAPTER_OPTIONS
LAYER_OPTIONS = _options.LAYER_OPTIONS
validate_options = _options.validate_options

# The adapters' own LayerNorms are PyTorch's (`nn.LayerNorm`) in AdapterHub: epsilon 1e-5.
ADAPTER_LAYER_NORM_EPSILON = 1e-5


def projection_layers(keras, adapter_size, width, activation, init_stddev, dtype):
  """The adapter's `down_project` (`width` → `adapter_size`, with the activation) and
  `up_project` Dense layers of `keras` (tf_keras or Keras 3), unbuilt.

  Both kernels start from a truncated normal (cut at two standard deviations) of
  `init_stddev`, the biases at zero: a new adapter is close to the identity.
  """
  # One initializer object per kernel, as in the Model Garden: a shared seeded instance
  # would give both projections the same draw.
  return (keras.layers.Dense(adapter_size, activation=activation, dtype=dtype,
                             kernel_initializer=keras.initializers.TruncatedNormal(
                                 stddev=init_stddev), name="down_project"),
          keras.layers.Dense(width, dtype=dtype, kernel_initializer=(
              keras.initializers.TruncatedNormal(stddev=init_stddev)), name="up_project"))


def own_layer_norm(keras, name):
  """One of the adapter's own LayerNorms (`ln_before`, `ln_after`), of `keras`, in float32."""
  return keras.layers.LayerNormalization(epsilon=ADAPTER_LAYER_NORM_EPSILON, dtype="float32",
                                         name=name)


class AdapterParts(NamedTuple):
  """An adapter's computations as callables: `project` (`W_up · f(W_down · h)` with biases)
  and its own LayerNorms `norm_before` and `norm_after` (`None` when absent)."""
  project: Callable
  norm_before: Optional[Callable] = None
  norm_after: Optional[Callable] = None


def place_adapter(ops, parts, options, hidden, sublayer_input, layer_norm):
  """A Transformer sub-layer's output with an adapter, as AdapterHub computes it.

  AdapterHub's `bottleneck_layer_forward` for one adapter: `pre_forward` (where the
  adapter's skip starts, whether the base's residual add and LayerNorm come first), the
  adapter (its own LayerNorms, scaling, skip), then `post_forward` (the base's residual add
  and LayerNorm after it). A parallel adapter reads the sub-layer's input instead.

  Args:
    ops: The ops namespace, `tf` or `keras.ops`.
    parts: The adapter's `AdapterParts`.
    options: Its options (`ADAPTER_OPTIONS` keys other than the placement flags).
    hidden: The sub-layer's output after its dropout, `[batch, seq, hidden]`.
    sublayer_input: The sub-layer's input `x` (the base's residual); `None` where the base
      adds it and applies its LayerNorm itself after (`original_ln_after=False`, sequential,
      `original_ln_before=False`).
    layer_norm: The base's LayerNorm of this sub-layer, a callable.

  Returns:
    The sub-layer's output, what the base computes as `layer_norm(x + hidden)`; float32.
  """
  # The residual stream is float32 under mixed precision too, as the LayerNorms give it (the
  # Model Garden's block adds its feed-forward output in float32 as well): `hidden` and the
  # projection, in the compute dtype, join it in float32.
  hidden = ops.cast(hidden, "float32")
  if sublayer_input is not None:
    sublayer_input = ops.cast(sublayer_input, "float32")

  def bottleneck(inputs):
    if parts.norm_before is not None:
      inputs = parts.norm_before(inputs)
    return options["scaling"] * ops.cast(parts.project(inputs), "float32")

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

"""The Keras 3 layers that `adapt` puts into a keras-hub block: a method's change to a
projection, the projection with its changes, and a bottleneck adapter after a sub-layer.

Each computes with its method's one definition (`methods/<name>/definition.py`,
`layers/bottleneck.py`) over `keras.ops`, so Keras 2 and Keras 3 share the weights, their
names and initialisers, the computation and the merge rule.
"""

import math

import keras
from keras import ops

from keras_adapters.layers import bottleneck
from keras_adapters.methods import registry


class MethodDelta(keras.layers.Layer):
  """A registered method's trained change to one frozen projection `x · W + b` (LoRA, (IA)³).

  Called with the projection's input `[tokens, in]` and the frozen projection as a function,
  it returns the projection's new output, as the Keras 2 `ProjectionDelta` layers do.

  Args:
    method: The method's registry name ("lora", "ia3").
    target: The projection it changes (`projections.PROJECTIONS`).
    units: The projection's output width.
    options: The method's layer options (its config's `layer_options(target)`).
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, method, target, units, options, **kwargs):
    super().__init__(**kwargs)
    self.method = method
    self.target = target
    self.units = units
    self.options = dict(options)
    self._definition = registry.get(method).definition

  def build(self, input_shape):
    weights = self._definition.weights(self.options, input_shape[-1], self.units)
    for key, (shape, initializer) in weights.items():
      setattr(self, key, self.add_weight(shape=shape, name=key,
                                         initializer=keras.initializers.get(initializer)))
    self._keys = tuple(weights)
    self.update_dropout = keras.layers.Dropout(self.options.get("dropout", 0.0),
                                               dtype=self.dtype_policy)

  def weights_by_key(self):
    """The layer's weights by their name inside it (`lora_a`, `scale`)."""
    return {key: getattr(self, key) for key in self._keys}

  def start_from(self, kernel, bias):
    """Sets what starts from the frozen projection's `[in, out]` `kernel` (DoRA's
    magnitudes), as the Keras 2 layers' `start_from` does."""
    del bias  # No method's start reads it.
    start_from = getattr(self._definition, "start_from", None)
    if start_from is not None:
      for key, value in start_from(ops, self.weights_by_key(), self.options, kernel).items():
        getattr(self, key).assign(value)

  def call(self, inputs, project, training=None):  # pylint: disable=arguments-differ
    rate = self.options.get("dropout", 0.0)
    dropout = ((lambda x: self.update_dropout(x, training=training)) if rate and training
               else None)
    return self._definition.apply(ops, self.weights_by_key(), self.options, inputs, project,
                                  dropout)

  def merge(self, kernel, bias):
    """The `[in, out]` kernel and `[out]` bias with this change folded in."""
    return self._definition.merge(ops, self.weights_by_key(), self.options, kernel, bias)


class AdaptedProjection(keras.layers.Layer):
  """A frozen `Dense` or `EinsumDense` of a keras-hub block with changes to it.

  The projection is computed as the Keras 2 path computes it, one 2-D product
  `[tokens, in] · [in, out] + [out]` (the attention's `[hidden, heads, head_size]` kernels
  flattened), each change wrapping the one before, then reshaped to the projection's output
  and passed through its activation (the feed-forward `intermediate`'s GELU comes after the
  changes, as in the Keras 2 block).

  Args:
    projection: The frozen `Dense` or `EinsumDense`, built, with a bias.
    deltas: `MethodDelta` layers, applied in turn (the first wraps the projection).
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, projection, deltas, **kwargs):
    super().__init__(**kwargs)
    self.projection = projection
    self.deltas = list(deltas)
    kernel, bias = projection.kernel, projection.bias
    self._input_axes = len(kernel.shape) - len(bias.shape)
    self.width_in = math.prod(kernel.shape[:self._input_axes])
    self.width_out = math.prod(bias.shape)
    kernel, bias = self._frozen_kernel_and_bias()
    for delta in self.deltas:
      delta.build((None, self.width_in))
      delta.start_from(kernel, bias)
    self.built = True

  def _frozen_kernel_and_bias(self):
    """The projection's kernel `[in, out]` and bias `[out]`, as the methods read them."""
    return (ops.reshape(self.projection.kernel, (self.width_in, self.width_out)),
            ops.reshape(self.projection.bias, (self.width_out,)))

  def call(self, inputs, training=None):
    kernel, bias = self._frozen_kernel_and_bias()
    project = FrozenProjection(
        lambda x: ops.matmul(x, ops.cast(kernel, x.dtype)) + ops.cast(bias, x.dtype),
        kernel, bias)
    for delta in self.deltas:
      project = FrozenProjection(_wrapped(delta, project, training), kernel, bias)
    outputs = project(ops.reshape(inputs, (-1, self.width_in)))
    outputs = ops.reshape(outputs, tuple(ops.shape(inputs)[:-self._input_axes])
                          + tuple(self.projection.bias.shape))
    return self.projection.activation(outputs)

  def merged_projection(self):
    """Folds the changes into the projection's kernel and bias; returns the projection."""
    kernel, bias = self.projection.kernel, self.projection.bias
    merged_kernel, merged_bias = self._frozen_kernel_and_bias()
    for delta in self.deltas:
      merged_kernel, merged_bias = delta.merge(merged_kernel, merged_bias)
    kernel.assign(ops.reshape(merged_kernel, kernel.shape))
    bias.assign(ops.reshape(merged_bias, bias.shape))
    return self.projection

  def compute_output_shape(self, input_shape):
    return self.projection.compute_output_shape(input_shape)


class FrozenProjection:
  """A projection as a method's change receives it: a function of the input (the frozen
  projection, or it with the changes before applied) that also holds the frozen kernel
  `[in, out]` and bias `[out]`, which a change may read (DoRA's norms).

  Args:
    function: Computes the projection's output from its input.
    kernel: The frozen kernel `[in, out]`.
    bias: The frozen bias `[out]`.
  """

  def __init__(self, function, kernel, bias):
    self._function = function
    self.kernel = kernel
    self.bias = bias

  def __call__(self, inputs):
    return self._function(inputs)


def _wrapped(delta, project, training):
  return lambda x: delta(x, project=project, training=training)


class BottleneckAdapter(keras.layers.Layer):
  """A bottleneck adapter on a sub-layer's output `h`, before the block's residual add and
  LayerNorm: by default Houlsby's `h + s · (W_up · f(W_down · h + b_down) + b_up)`, with
  AdapterHub's options that apply there (`scaling`, `ln_before`, `ln_after`,
  `adapter_residual_before_ln`). Called with the block's LayerNorm, it sits in that
  LayerNorm's place instead, on the residual sum (`original_ln_before`, Pfeiffer's). Called
  with the sub-layer's input `x`, it is parallel to the sub-layer (`is_parallel`).

  Args:
    adapter_size: `m`, the width of the down-projection.
    activation: The nonlinearity between the projections.
    init_stddev: Standard deviation of the projections' truncated-normal start.
    options: The adapter's AdapterHub options (`bottleneck.LAYER_OPTIONS` keys), sequential
      with the base's residual add and LayerNorm after it.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, adapter_size, activation, init_stddev, options, **kwargs):
    super().__init__(**kwargs)
    self.adapter_size = adapter_size
    self.activation = activation
    self.init_stddev = init_stddev
    defaults = {name: bottleneck.ADAPTER_OPTIONS[name] for name in bottleneck.LAYER_OPTIONS}
    self.options = {**defaults, **options}

  def build(self, input_shape):
    self.down_project, self.up_project = bottleneck.projection_layers(
        keras, self.adapter_size, input_shape[-1], self.activation, self.init_stddev,
        self.dtype_policy)
    self.down_project.build(input_shape)
    self.up_project.build(tuple(input_shape[:-1]) + (self.adapter_size,))
    self.layer_norm_before, self.layer_norm_after = (
        bottleneck.own_layer_norm(keras, name) if self.options[name] else None
        for name in ("ln_before", "ln_after"))
    for norm in (self.layer_norm_before, self.layer_norm_after):
      if norm is not None:
        norm.build(input_shape)

  def call(self, inputs, layer_norm=None, sublayer_input=None):  # pylint: disable=arguments-differ
    parts = bottleneck.AdapterParts(
        project=lambda h: self.up_project(self.down_project(h)),
        norm_before=self.layer_norm_before, norm_after=self.layer_norm_after)
    if sublayer_input is not None:
      # Parallel (`is_parallel`): `h + s · f(x)` from the sub-layer's input `x`; the block adds
      # `x` and normalises after this.
      return bottleneck.place_adapter(ops, parts, {**self.options, "original_ln_after": False},
                                      inputs, sublayer_input, None)
    if layer_norm is None:
      # On the sub-layer's output: the block adds the residual and normalises after this.
      return bottleneck.place_adapter(ops, parts, {**self.options, "original_ln_after": False},
                                      inputs, None, None)
    # On the block's sum `h + x`, in place of its LayerNorm. With the adapter's skip from `h`
    # (`residual_before_ln=True`), `x` enters the result only through that sum: the sum
    # stands for `h`, zero for `x`.
    return bottleneck.place_adapter(ops, parts, self.options, inputs, ops.zeros_like(inputs),
                                    layer_norm)


class AdaptedSublayerOutput(keras.layers.Layer):
  """A keras-hub block's dropout on a sub-layer's output, then a `BottleneckAdapter`: the
  block adds the residual to this output and normalises it, as Houlsby's placement needs.
  With a `SublayerInputTap` the adapter is parallel: it reads the sub-layer's input.

  Args:
    dropout: The block's `Dropout` on the sub-layer's output.
    adapter: The `BottleneckAdapter`, built.
    tap: The `SublayerInputTap` of the same sub-layer, for a parallel adapter.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, dropout, adapter, tap=None, **kwargs):
    super().__init__(**kwargs)
    self.dropout = dropout
    self.adapter = adapter
    self.tap = tap
    self.built = True

  def call(self, inputs, training=None):
    outputs = self.dropout(inputs, training=training)
    if self.tap is None:
      return self.adapter(outputs)
    return self.adapter(outputs, sublayer_input=self.tap.tapped.value)

  def compute_output_shape(self, input_shape):
    return input_shape


class _Tapped:
  """Holds a `SublayerInputTap`'s last input: a plain object, which Keras does not track."""
  value = None


class SublayerInputTap(keras.layers.Layer):
  """A block's projection that keeps its input for a parallel adapter: the projection that
  reads the sub-layer's input `x` first (the attention's query, the feed-forward's
  intermediate). The adapter after the sub-layer (`AdaptedSublayerOutput`) reads `x` from
  it later in the same call of the block; keras-hub's block hands `x` to no other layer of
  ours.

  Args:
    projection: The block's `Dense` or `EinsumDense` (or it wrapped).
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, projection, **kwargs):
    super().__init__(**kwargs)
    self.projection = projection
    self.tapped = _Tapped()
    self.built = True

  def call(self, inputs):
    self.tapped.value = inputs
    return self.projection(inputs)

  def compute_output_shape(self, input_shape):
    return self.projection.compute_output_shape(input_shape)


class AdaptedLayerNorm(keras.layers.Layer):
  """A keras-hub block's LayerNorm on a sub-layer's residual sum `h + x`, with a
  `BottleneckAdapter` on the normalised sum and the LayerNorm again after it: Pfeiffer's
  placement (`original_ln_before`), `LayerNorm(h + x + s · f(LayerNorm(h + x)))`.

  Args:
    layer_norm: The block's `LayerNormalization` after the sub-layer.
    adapter: The `BottleneckAdapter`, built.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, layer_norm, adapter, **kwargs):
    super().__init__(**kwargs)
    self.layer_norm = layer_norm
    self.adapter = adapter
    self.built = True

  def call(self, inputs):
    return self.adapter(inputs, layer_norm=self.layer_norm)

  def compute_output_shape(self, input_shape):
    return input_shape

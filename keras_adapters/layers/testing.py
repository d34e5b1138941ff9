"""What the layer tests share: adapter placements (AdapterHub's three presets and combinations
of its options), mixed-precision policies, tolerances that hold on every CPU
(`assert_close_at_scale`), tasks' adapter sets to route between, and `run_layer_test`, the
checks every Keras layer of the library passes."""

import inspect

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter_set as adapter_set_lib
from keras_adapters.layers import task_routing

# Name → `adapter_options` (AdapterHub's names). The first three are AdapterHub's
# DoubleSeqBnConfig (Houlsby), SeqBnConfig (Pfeiffer) and ParBnConfig (parallel); the others
# together set every remaining option away from its default at least once.
PLACEMENT_VARIANTS = {
    "houlsby": {},
    "pfeiffer": dict(mh_adapter=False, original_ln_before=True),
    "parallel": dict(mh_adapter=False, is_parallel=True, scaling=4.0),
    "own_layer_norms_post_add": dict(original_ln_before=True, residual_before_ln="post_add",
                                     ln_before=True, ln_after=True,
                                     adapter_residual_before_ln=True),
    "parallel_own_layer_norms": dict(is_parallel=True, ln_before=True, ln_after=True,
                                     scaling=0.5),
    "residual_after_ln_alone": dict(output_adapter=False, original_ln_before=True,
                                    residual_before_ln=False, original_ln_after=False,
                                    scaling=2.0),
}

# The mixed-precision policies everything must work under, as `parameterized.named_parameters`
# cases (name, `training.precision` name, machine epsilon of the compute dtype). A test enters
# each with `precision.policy_scope(name)`, which restores the policy it found, and states its
# tolerances against float32 in epsilons: bfloat16 keeps 8 bits of mantissa, float16 11.
MIXED_PRECISIONS = (("bfloat16", "bfloat16", 2.0**-7), ("float16", "float16", 2.0**-10))


def mixed_precision_gap(actual, expected, epsilon):
  """The largest difference of a mixed-precision result from the float32 one, in `epsilon`s
  times the float32 result's largest magnitude (at least 1): the rounding errors of sums of
  products grow with the magnitudes summed, not with each element's."""
  expected = np.asarray(expected, np.float64)
  difference = np.max(np.abs(np.asarray(actual, np.float64) - expected))
  return float(difference / (epsilon * max(1.0, float(np.max(np.abs(expected))))))


def assert_close_at_scale(test_case, actual, expected, rtol, msg=None):
  """Asserts that each tensor of `actual` (one, or a list or nest of them) differs from the
  matching one of `expected` by at most `rtol` times that expected tensor's largest magnitude,
  or 1 if that is smaller.

  Another summation order (AVX2 or AVX-512 kernels, oneDNN or Eigen, XLA's fusions) changes
  a float32 sum by rounding errors that grow with the magnitudes summed, not with the sum: a
  gradient element that is a small difference of large terms carries their error. So an
  element-wise relative tolerance, or an absolute one fitted on one CPU, fails on another
  CPU's correct result; a bound relative to the tensor's scale holds there and still fails a
  real error, which moves elements by a visible part of that scale. The scale is at least 1
  because a tensor can cancel to far less than the terms it was summed from (the gradient of
  attention's key bias is 0 up to rounding).
  """
  tf.nest.assert_same_structure(actual, expected, check_types=False)
  for got, want in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
    want = np.asarray(want, np.float64)
    tolerance = rtol * max(1.0, float(np.max(np.abs(want), initial=0.0)))
    test_case.assertAllClose(np.asarray(got, np.float64), want, rtol=0, atol=tolerance,
                             msg=f"{msg or ''} (tolerance {tolerance:.3g}: {rtol:g} times the "
                             "largest magnitude, or 1)")


def random_adapter_set(seed, **kwargs):
  """A built `AdapterSet(**kwargs)` for the tiny test encoders (two blocks of width 16, by
  default with gelu adapters), every weight random as after training: a new set's LayerNorms
  are the identity, which would hide a LayerNorm taken from the wrong set."""
  layer = adapter_set_lib.AdapterSet(**{"num_layers": 2, "activation": "gelu", **kwargs})
  layer.build((None, None, 16))
  rng = np.random.RandomState(seed)
  for weight in layer.weights:
    weight.assign(rng.normal(scale=0.3, size=weight.shape))
  return layer


def routed_adapter_sets():
  """Three tasks to route between: bottlenecks 4 and 2 (block 0 left out of the second),
  and a task without adapters."""
  return [random_adapter_set(0, adapter_size=4),
          random_adapter_set(1, adapter_size=2, leave_out=(0,)), random_adapter_set(2)]


def stacked_adapter_sets(adapter_sets, **kwargs):
  """`StackedAdapters` of the sets' weights as an artifact stores them (NumPy arrays by
  `adapter_weights_by_key` keys); `kwargs` are its other arguments (`adapter_options`)."""
  first = adapter_sets[0]
  return task_routing.StackedAdapters(
      [{key: weight.numpy() for key, weight in adapter_set_lib.adapter_weights_by_key(
          adapter_set.encoder_adapters()).items()} for adapter_set in adapter_sets],
      num_layers=first.num_layers, activation=first.activation,
      layer_norm_epsilon=first.layer_norm_epsilon, **kwargs)


def run_layer_test(test_case, layer_cls, init_kwargs, input_data, *, expected_output_shape,
                   expected_num_trainable_weights=None, expected_num_non_trainable_weights=None,
                   call=None, weights_in_constructor=False, custom_objects=None):
  """Checks what every Keras layer of this library owes its users, as keras-hub's
  `TestCase.run_layer_test` does; returns the layer, built, for the test's own checks.

  - Its weights are made by its build, on the first call: none before it (or, with
    `weights_in_constructor`, all of them already), none added by later calls.
  - `get_config()` holds every argument of its constructor, with the values `init_kwargs`
    gave (tuples as lists); `from_config` and `keras.layers.deserialize(serialize(...))`
    rebuild a layer with an equal config and the same weights (shapes, trainability) which,
    given the same values, computes the same outputs.
  - Its output shapes and numbers of trainable and non-trainable weights are the expected.
  - In a training call, every trainable weight gets a gradient.

  Args:
    test_case: The running `tf.test.TestCase`.
    layer_cls: The layer class.
    init_kwargs: Constructor arguments of the layer tested.
    input_data: What the layer is called on (a tensor, a list or a dict of them).
    expected_output_shape: The shape of the output as a tuple (`None` for an unknown
      dimension), or a dict or list of them for a layer with several outputs.
    expected_num_trainable_weights: Checked when given.
    expected_num_non_trainable_weights: Checked when given.
    call: How the layer is used, `call(layer, input_data, training)` → outputs; by default
      `layer(input_data, training=training)`. For a layer used otherwise than by calling it,
      or called with more arguments.
    weights_in_constructor: The layer makes its weights when constructed, not in build.
    custom_objects: For `keras.layers.deserialize`, if the class is not registered.

  Returns:
    The layer tested.
  """
  call = call or (lambda layer, inputs, training: layer(inputs, training=training))
  layer = layer_cls(**init_kwargs)
  test_case.assertEqual(bool(layer.weights), weights_in_constructor,
                        "weights before the first call")
  config = layer.get_config()
  parameters = inspect.signature(layer_cls.__init__).parameters.items()
  arguments = [name for name, parameter in parameters if name != "self" and parameter.kind
               not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)]
  test_case.assertEmpty([name for name in arguments if name not in config],
                        f"constructor arguments missing from {layer_cls.__name__}.get_config()")
  for name, value in init_kwargs.items():
    test_case.assertIn(name, config)
    test_case.assertEqual(_as_lists(config[name]), _as_lists(value), f"get_config()[{name!r}]")

  outputs = call(layer, input_data, False)
  test_case.assertTrue(layer.built)
  num_weights = len(layer.weights)
  test_case.assertEqual(_shapes(outputs), _expected_shapes(expected_output_shape))
  if expected_num_trainable_weights is not None:
    test_case.assertLen(layer.trainable_weights, expected_num_trainable_weights)
  if expected_num_non_trainable_weights is not None:
    test_case.assertLen(layer.non_trainable_weights, expected_num_non_trainable_weights)

  serialized = keras.layers.serialize(layer)
  for how, rebuilt in (
      ("from_config", layer_cls.from_config(config)),
      ("deserialize", keras.layers.deserialize(serialized, custom_objects=custom_objects))):
    test_case.assertIsInstance(rebuilt, layer_cls, how)
    test_case.assertEqual(rebuilt.get_config(), config, how)
    call(rebuilt, input_data, False)  # Builds it.
    test_case.assertEqual(_weight_shapes(rebuilt), _weight_shapes(layer), how)
    rebuilt.set_weights(layer.get_weights())
    _assert_same_outputs(test_case, call(rebuilt, input_data, False), outputs, how)

  with tf.GradientTape() as tape:
    losses = [tf.reduce_sum(tf.square(tf.cast(output, tf.float32)))
              for output in tf.nest.flatten(call(layer, input_data, True))
              if output.dtype.is_floating]
  gradients = tape.gradient(losses, layer.trainable_weights)
  test_case.assertEmpty([weight.name for weight, gradient
                         in zip(layer.trainable_weights, gradients) if gradient is None],
                        "trainable weights without a gradient")
  test_case.assertLen(layer.weights, num_weights, "weights added after the first call")
  return layer


def _as_lists(value):
  """`value` with its tuples as lists, as a config that went through JSON holds them."""
  if isinstance(value, (list, tuple)):
    return [_as_lists(item) for item in value]
  if isinstance(value, dict):
    return {key: _as_lists(item) for key, item in value.items()}
  return value


def _shapes(outputs):
  """The shapes of a layer's outputs as tuples, in their dict or list structure."""
  if isinstance(outputs, dict):
    return {key: _shapes(value) for key, value in outputs.items()}
  if isinstance(outputs, (list, tuple)):
    return [_shapes(value) for value in outputs]
  return tuple(outputs.shape.as_list())


def _expected_shapes(expected):
  """`expected` as `_shapes` gives it: a tuple of dimensions is a shape, other tuples and lists
  hold several."""
  if isinstance(expected, dict):
    return {key: _expected_shapes(value) for key, value in expected.items()}
  if all(dimension is None or isinstance(dimension, int) for dimension in expected):
    return tuple(expected)
  return [_expected_shapes(value) for value in expected]


def _weight_shapes(layer):
  # Not their names: `deserialize` builds a layer outside its name scope.
  return ([tuple(weight.shape) for weight in layer.trainable_weights],
          [tuple(weight.shape) for weight in layer.non_trainable_weights])


def _assert_same_outputs(test_case, actual, expected, how):
  test_case.assertEqual(_shapes(actual), _shapes(expected), how)
  for got, want in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
    if want.dtype.is_floating:
      test_case.assertAllClose(got, want, atol=1e-6, msg=how)
    else:
      test_case.assertAllEqual(got, want, msg=how)

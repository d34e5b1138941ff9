"""Tests for the shared layer checks: `assert_close_at_scale` passes rounding and fails real
errors; `run_layer_test` passes a correct layer and fails broken ones."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import testing


class _Scale(keras.layers.Layer):
  """A correct layer: `inputs * scale`, the scale starting at `initial`."""

  def __init__(self, initial=1.0, **kwargs):
    super().__init__(**kwargs)
    self.initial = initial

  def build(self, input_shape):
    self.scale = self.add_weight("scale", [input_shape[-1]],
                                 initializer=keras.initializers.Constant(self.initial))
    super().build(input_shape)

  def call(self, inputs):
    return inputs * self.scale

  def get_config(self):
    return {**super().get_config(), "initial": self.initial}


class _ForgetsItsArgument(_Scale):

  def get_config(self):
    return keras.layers.Layer.get_config(self)


class _KeepsTheDefault(_Scale):

  def get_config(self):
    return {**super().get_config(), "initial": 1.0}


class _HasAnUnusedWeight(_Scale):

  def build(self, input_shape):
    self.offset = self.add_weight("offset", [input_shape[-1]])
    super().build(input_shape)


def _run(test_case, layer_cls):
  return testing.run_layer_test(
      test_case, layer_cls, dict(initial=2.0), tf.ones([2, 3]), expected_output_shape=(2, 3),
      custom_objects={layer_cls.__name__: layer_cls})


class AssertCloseAtScaleTest(tf.test.TestCase):

  def test_rounding_of_a_small_element_beside_large_ones_passes(self):
    """The XLA gradient seen on an AVX2 CPU: 1.14e-5 off an element of 0.04 in a tensor up to
    18, which an element-wise rtol=1e-5, atol=1e-5 refused."""
    expected = [np.array([18.0, -3.0, 0.04]), np.array([[2.0]])]
    actual = [np.array([18.0, -3.0, 0.04 + 1.14e-5]), np.array([[2.0]])]
    testing.assert_close_at_scale(self, actual, expected, rtol=1e-5)

  def test_a_real_error_fails(self):
    """An element off by a thousandth of the scale fails, and so does a small tensor off by a
    tenth of itself beside a large one: each tensor is held to its own scale (at least 1)."""
    with self.assertRaisesRegex(AssertionError, r"tolerance 0.00018: 1e-05 times"):
      testing.assert_close_at_scale(self, [np.array([18.0, 0.05])],
                                    [np.array([18.0, 0.05 + 0.018])], rtol=1e-5)
    with self.assertRaisesRegex(AssertionError, r"tolerance 1e-05: 1e-05 times"):
      testing.assert_close_at_scale(self, [np.array([18.0]), np.array([0.11])],
                                    [np.array([18.0]), np.array([0.1])], rtol=1e-5)

  def test_structures_must_match(self):
    with self.assertRaises((ValueError, TypeError)):
      testing.assert_close_at_scale(self, [np.ones(2)], [np.ones(2), np.ones(2)], rtol=1e-5)


class RunLayerTestTest(tf.test.TestCase, parameterized.TestCase):

  def test_a_correct_layer_passes(self):
    self.assertAllEqual(_run(self, _Scale).scale, [2.0, 2.0, 2.0])

  @parameterized.named_parameters(
      ("get_config_misses_an_argument", _ForgetsItsArgument,
       r"\['initial'\].*constructor arguments missing from _ForgetsItsArgument.get_config"),
      ("get_config_holds_another_value", _KeepsTheDefault, r"get_config\(\)\['initial'\]"),
      ("a_weight_gets_no_gradient", _HasAnUnusedWeight,
       r"/offset:0'\].*trainable weights without a gradient"),
  )
  def test_a_broken_layer_fails(self, layer_cls, message):
    with self.assertRaisesRegex(AssertionError, message):
      _run(self, layer_cls)


if __name__ == "__main__":
  tf.test.main()

"""Tests for `run_layer_test`: it passes a correct layer and fails broken ones."""

from absl.testing import parameterized
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

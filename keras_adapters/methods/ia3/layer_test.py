"""Tests for the (IA)³ layer."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods.ia3 import layer as ia3_layer
from keras_adapters.methods import testing


_inputs = testing.random_inputs
_projection = testing.random_projection


def _random_scale(layer, seed=2):
  layer.scale.assign(np.random.RandomState(seed).uniform(0.2, 2.0, size=layer.scale.shape))
  return layer.scale.numpy()


class IA3Test(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(1234)

  @parameterized.named_parameters(
      ("output_scaling", False, (4, 6)),
      ("input_scaling", True, (4, 6)),
      ("output_scaling_3d", False, (2, 3, 6)),
      ("input_scaling_3d", True, (2, 3, 6)),
  )
  def test_starts_as_the_identity(self, scales_input, shape):
    """The scale starts at ones: the output is the projection's, exactly."""
    project, _, _ = _projection(6, 5)
    layer = ia3_layer.IA3("value", 5, scales_input=scales_input)
    x = _inputs(shape)
    output = layer(x, project=project)
    self.assertAllEqual(layer.scale, tf.ones(layer.scale.shape))
    self.assertAllEqual(output, project(x))

  def test_output_scaling(self):
    """`(x · W + b) ⊙ l`, in NumPy."""
    project, kernel, bias = _projection(6, 5)
    layer = ia3_layer.IA3("key", 5)
    layer.build((None, 6))
    scale = _random_scale(layer)
    self.assertEqual(scale.shape, (5,))
    self.assertEqual(layer.weights_by_key(), {"scale": layer.scale})
    x = _inputs()
    self.assertAllClose(layer(x, project=project), (x.numpy() @ kernel + bias) * scale,
                        atol=1e-5, rtol=1e-5)

  def test_input_scaling(self):
    """`(x ⊙ l) · W + b`, in NumPy: the bias is not scaled."""
    project, kernel, bias = _projection(6, 5)
    layer = ia3_layer.IA3("output", 5, scales_input=True)
    layer.build((None, 6))
    scale = _random_scale(layer)
    self.assertEqual(scale.shape, (6,))
    x = _inputs((2, 3, 6))
    self.assertAllClose(layer(x, project=project), (x.numpy() * scale) @ kernel + bias,
                        atol=1e-5, rtol=1e-5)

  @parameterized.named_parameters(
      ("output_scaling", False),
      ("input_scaling", True),
  )
  def test_merged_kernel_computes_the_call(self, scales_input):
    """`merge(W, b)` gives the kernel and bias whose projection equals the call."""
    project, kernel, bias = _projection(6, 5)
    layer = ia3_layer.IA3("intermediate", 5, scales_input=scales_input)
    layer.build((None, 6))
    scale = _random_scale(layer)
    merged_kernel, merged_bias = layer.merge(tf.constant(kernel), tf.constant(bias))
    self.assertAllClose(merged_bias, bias if scales_input else bias * scale)
    x = _inputs()
    self.assertAllClose(tf.matmul(x, merged_kernel) + merged_bias, layer(x, project=project),
                        atol=1e-5, rtol=1e-5)

  def test_unknown_target_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, "'ffn'"):
      ia3_layer.IA3("ffn", 5)


if __name__ == "__main__":
  tf.test.main()

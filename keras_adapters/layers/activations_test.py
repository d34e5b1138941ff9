"""Tests for the feed-forward activations and their one-pass gradient."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import activations
from keras_adapters.layers import adapted_transformer_block

# Above and below the size from which the gradient is one XLA pass.
_LARGE = [4, activations.FUSE_FROM_ELEMENTS // 4 + 8]
_SMALL = [3, 40]


def _x(shape, dtype=tf.float32, seed=0):
  # Values from -6 to 6: both tails of the GELU and its bend around 0.
  return tf.cast(np.random.RandomState(seed).uniform(-6, 6, size=shape), dtype)


def _gradient(function, x, dy):
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = function(x)
  return y, tape.gradient(y, x, output_gradients=dy)


def _xla_functions(concrete_function):
  """Names of the functions in `concrete_function`'s graph that XLA must compile."""
  return [f.signature.name for f in concrete_function.graph.as_graph_def().library.function
          if "_XlaMustCompile" in f.attr and f.attr["_XlaMustCompile"].b]


class ActivationsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(("exact", "gelu", False), ("tanh", "gelu_approximate", True))
  def test_gelu_activations_equal_keras(self, name, approximate):
    """"gelu" is Keras' exact GELU and "gelu_approximate" its tanh form, values and gradients."""
    x = tf.constant(np.linspace(-8.0, 8.0, 1001), tf.float32)
    ours = activations.get(name)
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(x)
      got, expected = ours(x), keras.activations.gelu(x, approximate=approximate)
    self.assertAllClose(got, expected, atol=1e-6)
    self.assertAllClose(tape.gradient(got, x), tape.gradient(expected, x), atol=1e-5)

  @parameterized.product(name=["gelu", "gelu_approximate"], shape=[_SMALL, _LARGE])
  def test_a_training_activation_has_the_values_and_gradient_of_autodiffs(self, name, shape):
    x, dy = _x(shape), _x(shape, seed=1)
    plain_y, plain_gradient = _gradient(tf.function(activations.get(name)), x, dy)
    y, gradient = _gradient(tf.function(activations.get(name, training=True)), x, dy)
    # The same function; TensorFlow's graph optimiser may round the tanh form's another way.
    self.assertAllClose(y, plain_y, atol=1e-6, rtol=1e-6)
    # float32 rounding of the two orders of operations, scaled to the gradients' size (up to
    # 6 × 1.13): where the tanh form saturates, XLA's tanh and TensorFlow's differ by ulps of 1.
    scale = float(tf.reduce_max(tf.abs(plain_gradient)))
    self.assertAllClose(gradient, plain_gradient, atol=1e-5 * scale, rtol=1e-5)

  @parameterized.parameters(tf.bfloat16, tf.float16)
  def test_mixed_precision_gradients_stay_in_their_dtype(self, dtype):
    x, dy = _x(_LARGE, dtype), _x(_LARGE, dtype, seed=1)
    _, gradient = _gradient(tf.function(activations.get("gelu", training=True)), x, dy)
    _, expected = _gradient(tf.function(activations.gelu_exact), tf.cast(x, tf.float32),
                            tf.cast(dy, tf.float32))
    self.assertEqual(gradient.dtype, dtype)
    # Within a few units of the half-precision type's last place on gradients up to 7.
    self.assertAllClose(tf.cast(gradient, tf.float32), expected,
                        atol=0.15 if dtype == tf.bfloat16 else 0.02, rtol=0.02)

  def test_the_gradient_from_the_fusing_size_is_an_xla_function_and_the_forward_is_not(self):
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)] * 2)
    def backward(x, dy):
      return _gradient(activations.get("gelu", training=True), x, dy)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def forward(x):
      return activations.get("gelu", training=True)(x)

    self.assertLen(_xla_functions(backward.get_concrete_function()), 1)
    self.assertEmpty(_xla_functions(forward.get_concrete_function()))

  def test_other_names_are_keras_activations_and_inference_gets_the_plain_gelu(self):
    self.assertIs(activations.get("relu", training=True), keras.activations.relu)
    self.assertIs(activations.get("gelu"), activations.gelu_exact)
    self.assertIs(activations.get("gelu_approximate"), activations.gelu_approximate)
    # The activations' old import path.
    self.assertIs(adapted_transformer_block.gelu_exact, activations.gelu_exact)

  def test_only_a_python_true_is_a_training_call(self):
    self.assertTrue(activations.is_training_call(True))
    for training in (False, None, tf.constant(True)):
      self.assertFalse(activations.is_training_call(training))


if __name__ == "__main__":
  tf.test.main()

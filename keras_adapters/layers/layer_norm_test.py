"""Tests for the LayerNorm whose training calls take one pass forward and one backward."""

from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import activations
from keras_adapters.layers import layer_norm
from keras_adapters.layers import testing
from keras_adapters.utils import precision

_EPSILON = 1e-12  # BERT's: below what TensorFlow's fused normalisation kernel accepts.


def _twins(epsilon=_EPSILON):
  """Ours and Keras' `LayerNormalization`, built on width 48, with the same random weights."""
  ours = layer_norm.LayerNormalization(epsilon=epsilon)
  theirs = keras.layers.LayerNormalization(epsilon=epsilon)
  rng = np.random.RandomState(0)
  for layer in (ours, theirs):
    layer.build([None, None, 48])
  for ours_weight, their_weight in zip(ours.weights, theirs.weights):
    value = rng.normal(1.0, 0.5, size=ours_weight.shape)
    ours_weight.assign(value)
    their_weight.assign(value)
  return ours, theirs


def _inputs(rows):
  """`[2, rows, 48]` values with a large mean and spread per row, as a residual stream has."""
  rng = np.random.RandomState(1)
  return tf.constant(rng.normal(rng.normal(0, 5, [2, rows, 1]), 3.0, [2, rows, 48]),
                     tf.float32)


def _values_and_gradients(layer, x, training):
  output_gradient = tf.constant(np.random.RandomState(2).normal(size=x.shape), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(x)
    output = layer(x, training=training)
  return [output] + tape.gradient(output, [x] + layer.weights, output_gradients=output_gradient)


class LayerNormalizationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("op_by_op", 16),  # 2 x 16 x 48 values: below FUSE_FROM_ELEMENTS, no XLA.
      ("one_pass", activations.FUSE_FROM_ELEMENTS // 96 + 1))
  def test_training_calls_give_keras_values_and_gradients(self, rows):
    """Values, and the gradients of the inputs, gamma and beta, of Keras' LayerNorm: to a
    float32 rounding of each tensor's scale (gamma's and beta's sum over every row)."""
    ours, theirs = _twins()
    x = _inputs(rows)
    testing.assert_close_at_scale(self, _values_and_gradients(ours, x, training=True),
                                  _values_and_gradients(theirs, x, training=True), rtol=1e-5)

  def test_the_large_call_compiles_its_passes_with_xla(self):
    """From FUSE_FROM_ELEMENTS values on, the forward and backward passes are the XLA ones."""
    ours, _ = _twins()
    compiled = {fn: mock.Mock(wraps=function) for fn, function in layer_norm._COMPILED.items()}
    with mock.patch.dict(layer_norm._COMPILED, compiled):
      _values_and_gradients(ours, _inputs(activations.FUSE_FROM_ELEMENTS // 96 + 1), True)
      self.assertEqual([m.call_count for m in compiled.values()], [1, 1])
      _values_and_gradients(ours, _inputs(16), True)
      self.assertEqual([m.call_count for m in compiled.values()], [1, 1])

  def test_inference_is_keras_own(self):
    """Inference (and every export) runs Keras' LayerNorm unchanged: the same values bit for
    bit."""
    ours, theirs = _twins()
    self.assertAllEqual(ours(_inputs(16), training=False), theirs(_inputs(16)))
    self.assertAllEqual(ours(_inputs(16)), theirs(_inputs(16)))

  def test_an_epsilon_keras_would_fuse_is_kept(self):
    """With an epsilon TensorFlow's fused kernel takes, the values are still those of the
    formula with that epsilon."""
    ours, theirs = _twins(epsilon=1e-3)
    x = _inputs(16) * 1e-2  # A variance near the epsilon, so that it shows.
    testing.assert_close_at_scale(self, ours(x, training=True), theirs(x), rtol=1e-5)

  def test_other_axes_are_keras_own(self):
    ours = layer_norm.LayerNormalization(axis=1, epsilon=_EPSILON)
    theirs = keras.layers.LayerNormalization(axis=1, epsilon=_EPSILON)
    x = _inputs(16)
    self.assertAllEqual(ours(x, training=True), theirs(x, training=True))

  def test_layer_contract(self):
    # The axis as Keras' LayerNorm keeps it once built (it turns -1 into [2] in `build`).
    testing.run_layer_test(
        self, layer_norm.LayerNormalization, dict(axis=[2], epsilon=_EPSILON, name="layer_norm"),
        _inputs(16), expected_output_shape=(2, 16, 48), expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=0)

  def test_compiles_inside_an_xla_step(self):
    """Inside a step compiled with XLA (--jit_compile, TPUs) its gradients are Keras'."""
    ours, theirs = _twins()
    x = _inputs(activations.FUSE_FROM_ELEMENTS // 96 + 1)
    compiled = tf.function(lambda: _values_and_gradients(ours, x, True), jit_compile=True)()
    testing.assert_close_at_scale(self, compiled, _values_and_gradients(theirs, x, True),
                                  rtol=1e-5)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_computes_in_float32_under_a_mixed_policy(self, name, epsilon):
    """As the encoder makes it (dtype float32) under a mixed policy: float32 outputs from
    16-bit inputs."""
    del epsilon
    with precision.policy_scope(name):
      ours = layer_norm.LayerNormalization(epsilon=_EPSILON, dtype="float32")
      output = ours(tf.cast(_inputs(16), name), training=True)
    self.assertEqual(output.dtype, tf.float32)
    self.assertAllClose(tf.math.reduce_std(output, axis=-1), tf.ones([2, 16]), atol=1e-3)


if __name__ == "__main__":
  tf.test.main()

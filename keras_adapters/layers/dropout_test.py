"""Tests for the encoder's dropout, whose masks take 16 random bits a position."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import dropout
from keras_adapters.layers import testing
from keras_adapters.utils import precision

# Enough positions that the dropped fraction is within 3e-4 (one standard deviation at 0.1)
# of the rate: the bounds below are five of them.
_SHAPE = [8, 12, 101, 103]


def _fraction_kept(mask):
  return float(tf.reduce_mean(tf.cast(mask, tf.float64)))


class KeepMaskTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.1, 0.3, 0.5)
  def test_positions_are_kept_at_the_rounded_rate(self, rate):
    """Each position is kept with probability 1 - round(rate * 2**16) / 2**16, the inverse
    of the scale; an odd number of positions (two per 32-bit number) is no problem."""
    mask = dropout.keep_mask(_SHAPE, rate)
    self.assertEqual(mask.shape, _SHAPE)
    self.assertEqual(mask.dtype, tf.bool)
    self.assertNear(_fraction_kept(mask), 1 / dropout.keep_scale(rate), 1.5e-3)

  def test_the_rate_is_kept_to_a_65536th(self):
    self.assertEqual(dropout.dropped_levels(0.1), 6554)
    self.assertAlmostEqual(dropout.keep_scale(0.1), 65536 / (65536 - 6554))
    self.assertEqual(dropout.dropped_levels(0.0), 0)

  def test_the_two_halves_of_a_random_number_are_independent(self):
    """Neighbouring positions, which share a 32-bit number, are both dropped with the
    probability rate², as two independent draws are; nor do they repeat one another."""
    mask = dropout.keep_mask([1 << 20], 0.5).numpy().reshape(-1, 2)
    self.assertNear(float(np.mean(~mask[:, 0] & ~mask[:, 1])), 0.25, 2.5e-3)
    self.assertNear(float(np.mean(mask[:, 0] == mask[:, 1])), 0.5, 2.5e-3)

  def test_masks_follow_the_global_seed(self):
    masks = []
    for seed in (3, 3, 4):
      tf.random.set_seed(seed)
      masks.append(dropout.keep_mask([64, 64], 0.3))
    self.assertAllEqual(masks[0], masks[1])
    self.assertNotAllEqual(masks[0], masks[2])

  def test_a_rate_of_one_is_refused(self):
    with self.assertRaisesRegex(ValueError, "drops every value: choose a rate below 1"):
      dropout.Dropout(1.0)

  def test_compiles_with_xla(self):
    """XLA (--jit_compile, TPUs) draws masks at the same rate."""
    mask = tf.function(lambda: dropout.keep_mask(_SHAPE, 0.1), jit_compile=True)()
    self.assertNear(_fraction_kept(mask), 1 / dropout.keep_scale(0.1), 1.5e-3)


class DropoutTest(tf.test.TestCase, parameterized.TestCase):

  def test_layer_contract(self):
    testing.run_layer_test(self, dropout.Dropout, dict(rate=0.3, name="dropout"),
                           tf.ones([3, 7, 16]), expected_output_shape=(3, 7, 16),
                           expected_num_trainable_weights=0,
                           expected_num_non_trainable_weights=0)

  def test_training_drops_and_scales_and_inference_is_the_identity(self):
    layer = dropout.Dropout(0.1)
    inputs = tf.random.normal(_SHAPE)
    self.assertAllEqual(layer(inputs, training=False), inputs)
    dropped = layer(inputs, training=True)
    kept = dropped != 0
    self.assertNear(_fraction_kept(kept), 1 / layer.keep_scale, 1.5e-3)
    self.assertAllClose(tf.boolean_mask(dropped, kept),
                        tf.boolean_mask(inputs, kept) * layer.keep_scale, rtol=1e-6)

  def test_keeps_the_expectation(self):
    """Scaled by the inverse of the rounded keep probability, the mean of many draws is the
    input (to the sampling error)."""
    layer = dropout.Dropout(0.1)
    inputs = tf.ones([1 << 22])
    self.assertNear(float(tf.reduce_mean(layer(inputs, training=True))), 1.0, 1e-3)

  def test_noise_shape_drops_whole_rows(self):
    layer = dropout.Dropout(0.5, noise_shape=[None, 1, None])
    dropped = layer(tf.ones([4, 5, 6]), training=True).numpy()
    self.assertAllEqual(dropped, np.broadcast_to(dropped[:, :1], dropped.shape))

  def test_fit_turns_it_on(self):
    """Called without `training`, it follows Keras' learning phase: on in `fit`, off in
    `predict`."""
    model = keras.Sequential([keras.layers.InputLayer([64]), dropout.Dropout(0.5)])
    model.compile(loss=lambda y, output: tf.reduce_mean(tf.cast(output == 0, tf.float32)))
    history = model.fit(tf.ones([32, 64]), tf.zeros([32]), verbose=0)
    self.assertNear(history.history["loss"][0], 0.5, 0.05)
    self.assertAllEqual(model.predict(tf.ones([2, 64]), verbose=0), tf.ones([2, 64]))

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision(self, name, epsilon):
    del epsilon
    with precision.policy_scope(name):
      layer = dropout.Dropout(0.1)
    dropped = layer(tf.ones([64, 64]), training=True)
    self.assertEqual(dropped.dtype, name)
    self.assertAllClose(tf.reduce_max(dropped), tf.cast(layer.keep_scale, name))


if __name__ == "__main__":
  tf.test.main()

"""Tests for the wide tower, a linear model over hashed word n-grams."""

import tensorflow as tf

from keras_adapters.baselines import wide_tower
from keras_adapters.layers import testing


class WideTowerTest(tf.test.TestCase):

  def test_layer_contract(self):
    """Weights made by build, config round trip, registered serialization, one row of logits
    per text (an empty one too), gradients for the n-gram weights and the bias."""
    testing.run_layer_test(
        self, wide_tower.WideTower,
        dict(num_classes=3, num_buckets=64, max_ngram=3, regularization=1e-3, name="wide"),
        tf.constant(["great flight", "lost my bag again", ""]), expected_output_shape=(3, 3),
        expected_num_trainable_weights=2, expected_num_non_trainable_weights=0)


if __name__ == "__main__":
  tf.test.main()

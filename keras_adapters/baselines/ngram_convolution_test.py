"""Tests for the convolution branch of the search space."""

import tensorflow as tf

from keras_adapters.baselines import ngram_convolution
from keras_adapters.layers import testing


class NgramConvolutionTest(tf.test.TestCase):

  def test_layer_contract(self):
    """Weights made by build, config round trip, registered serialization, `filters`
    features per n-gram length for each text (one without tokens too), gradients for the
    convolutions and the batch normalisation."""
    embeddings = tf.random.stateless_normal([3, 5, 8], seed=[0, 1])
    mask = tf.sequence_mask([5, 2, 0], 5)
    testing.run_layer_test(
        self, ngram_convolution.NgramConvolution,
        dict(filters=4, max_ngram=3, activation="relu6", batch_norm=True, dropout=0.1,
             embedding_dropout=0.2, regularization=1e-3, name="convolution"),
        [embeddings, mask], expected_output_shape=(3, 3 * 4),
        # Three convolutions' kernel and bias, the batch normalisation's scale and offset;
        # its moving mean and variance do not train.
        expected_num_trainable_weights=3 * 2 + 2, expected_num_non_trainable_weights=2)


if __name__ == "__main__":
  tf.test.main()

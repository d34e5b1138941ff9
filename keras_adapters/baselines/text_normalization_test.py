"""Tests for the text normalisation knobs of the search space."""

import tensorflow as tf

from keras_adapters.baselines import text_normalization
from keras_adapters.layers import testing


class TextNormalizationTest(tf.test.TestCase):

  def test_layer_contract(self):
    """Config round trip and registered serialization (rebuilt layers normalise alike), one
    string per text, no weights."""
    layer = testing.run_layer_test(
        self, text_normalization.TextNormalization,
        dict(lower_case=True, remove_non_alphanumeric=True, name="normalization"),
        tf.constant(["Great flight!! :)", "ÉTÉ 2024, ça va"]), expected_output_shape=(2,),
        expected_num_trainable_weights=0, expected_num_non_trainable_weights=0)
    self.assertAllEqual(layer(tf.constant(["Great flight!! :)", "ÉTÉ 2024, ça va"])),
                        [b"great flight     ", "été 2024  ça va".encode()])


if __name__ == "__main__":
  tf.test.main()

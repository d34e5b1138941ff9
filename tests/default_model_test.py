"""Integration tests on the embedded default base model, all-MiniLM-L6-v2."""

import tensorflow as tf
import tensorflow_hub as hub

import keras_adapters as ka

# Published usage example of all-MiniLM-L6-v2: "This is an example sentence", mean-pooled
# over the attention mask and L2-normalised, starts with these values.
_REFERENCE_SENTENCE = "This is an example sentence"
_REFERENCE_START = [0.0676569, 0.0634959, 0.0487131, 0.0793050, 0.0374481, 0.0026527]


def _sentence_embedding(outputs, inputs):
  mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, tf.newaxis]
  mean = tf.reduce_sum(outputs["sequence_output"] * mask, axis=1) / tf.reduce_sum(mask, axis=1)
  return tf.math.l2_normalize(mean, axis=-1)


class DefaultModelTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.preprocess = hub.KerasLayer(ka.default_preprocess_handle())
    cls.hub_encoder = hub.KerasLayer(ka.default_hub_handle())

  def test_reference_embedding_through_hub_format_savedmodels(self):
    """Preprocessing and encoder SavedModels reproduce the model's published embedding."""
    inputs = self.preprocess(tf.constant([_REFERENCE_SENTENCE]))
    self.assertAllEqual(inputs["input_word_ids"][0, :7], [101, 2023, 2003, 2019, 2742, 6251, 102])
    embedding = _sentence_embedding(self.hub_encoder(inputs), inputs)
    self.assertAllClose(embedding[0, :6], _REFERENCE_START, atol=1e-5)

  def test_adapted_bert_with_identity_adapters_matches_the_hub_layer(self):
    """With zero adapters every output equals the Hub layer's to 1e-5 at every real token.

    Padded positions are compared too, at 1e-4: their values are never used (no real token
    attends to them) and differ by float32 rounding of a differently ordered graph.
    """
    inputs = self.preprocess(tf.constant([_REFERENCE_SENTENCE, "Short.",
                                          "A second, somewhat longer sentence for the batch."]))
    expected = self.hub_encoder(inputs)
    actual = ka.AdaptedBert(ka.default_hub_handle(), adapter_init_stddev=0.0)(inputs)
    self.assertAllClose(expected["pooled_output"], actual["pooled_output"], atol=1e-5)
    real = tf.cast(inputs["input_mask"], tf.bool)
    for expected_seq, actual_seq in zip(
        [expected["sequence_output"]] + expected["encoder_outputs"],
        [actual["sequence_output"]] + actual["encoder_outputs"]):
      self.assertAllClose(tf.boolean_mask(expected_seq, real),
                          tf.boolean_mask(actual_seq, real), atol=1e-5, rtol=0)
      self.assertAllClose(expected_seq, actual_seq, atol=1e-4, rtol=0)

  def test_parameter_counts_of_the_default_model(self):
    """22.7M base parameters; 12 adapters of 2md+d+m = 49,536 at m=64, d=384."""
    model = ka.build_classifier(ka.AdaptedBert(ka.default_hub_handle(), adapter_size=64), 3)
    summary = ka.parameter_summary(model)
    self.assertEqual(summary.base, 22_713_216)
    self.assertEqual(summary.adapter_sizes, (2 * 64 * 384 + 384 + 64,) * 12)
    self.assertLess(summary.trainable / summary.base, 0.04)


if __name__ == "__main__":
  tf.test.main()

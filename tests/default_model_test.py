"""Integration tests on the embedded default base model, all-MiniLM-L6-v2."""

import hashlib

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

import keras_adapters as ka
from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.data import builtin_datasets
from keras_adapters.layers import testing

# Published usage example of all-MiniLM-L6-v2: "This is an example sentence", mean-pooled
# over the attention mask and L2-normalised, starts with these values.
_REFERENCE_SENTENCE = "This is an example sentence"
_REFERENCE_START = [0.0676569, 0.0634959, 0.0487131, 0.0793050, 0.0374481, 0.0026527]
# SHA-256 of the encoder inputs that the project's own preprocessing (before the Model
# Garden's exporter replaced it) gave for every airline and BBC news text, alone and paired
# with the text before it, packed to 128 tokens.
_PACKED_REAL_TEXTS_SHA256 = "55043a82dc98573a0cb9b41ac42bd8faa0b161efefd07d034771429ed175feb5"


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

  def test_the_default_preprocessing_passes_the_encoders_vocabulary_and_casing_check(self):
    """What every CLI checks before a run: the embedded pair is one tokenizer (its vocabulary
    holds the dotless "ı", which upper-cases to "I": no casing probe word)."""
    base = hub_encoder.read_hub_encoder(ka.default_hub_handle())
    self.assertTrue(base.tokenizer.lower_case)
    compatibility.check_preprocessor(
        compatibility.load_preprocessor(ka.default_preprocess_handle()), base.config,
        encoder_tokenizer=base.tokenizer)

  def test_real_texts_pack_to_the_same_ids_as_before(self):
    preprocess = self.preprocess.resolved_object
    digest = hashlib.sha256()
    for task in ("airline", "bbc_news"):
      _, examples = builtin_datasets.load_builtin_task(task)
      texts = tf.constant(list(examples.texts[0]))
      tokens = preprocess.tokenize(texts)
      previous = preprocess.tokenize(tf.roll(texts, 1, axis=0))
      for segments in ([tokens], [tokens, previous]):
        packed = preprocess.bert_pack_inputs(segments, tf.constant(128))
        for key in ka.INPUT_KEYS:
          digest.update(packed[key].numpy().astype(np.int32).tobytes())
    self.assertEqual(digest.hexdigest(), _PACKED_REAL_TEXTS_SHA256)

  def test_adapted_bert_with_identity_adapters_matches_the_hub_layer(self):
    """With zero adapters every output equals the Hub layer's to 1e-5 of its largest value
    at every real token.

    The Hub layer is the Model Garden's own export (einsum attention); the rebuilt encoder
    computes with 2-D matrix products, so float32 rounds differently, by amounts that grow
    with the values (up to 10) and differ between CPUs: the bounds are relative to them.
    Padded positions are compared too, at 3e-5 of it (measured: 1.3e-4 at values up to 10):
    their values are never used (no real token attends to them) and carry more of the
    rounding.
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
      testing.assert_close_at_scale(self, tf.boolean_mask(actual_seq, real),
                                    tf.boolean_mask(expected_seq, real), rtol=1e-5)
      testing.assert_close_at_scale(self, actual_seq, expected_seq, rtol=3e-5)

  def test_parameter_counts_of_the_default_model(self):
    """22.7M base parameters; 12 adapters of 2md+d+m = 49,536 at m=64, d=384."""
    model = ka.build_classifier(ka.AdaptedBert(ka.default_hub_handle(), adapter_size=64), 3)
    summary = ka.parameter_summary(model)
    self.assertEqual(summary.base, 22_713_216)
    self.assertEqual(summary.adapter_sizes, (2 * 64 * 384 + 384 + 64,) * 12)
    self.assertLess(summary.trainable / summary.base, 0.04)


if __name__ == "__main__":
  tf.test.main()

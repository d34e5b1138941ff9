"""Tests of `PreprocessingTokenizer`: the preprocessing SavedModel's tokenizer for squad_lib."""

import os

import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.data import squad_tokenizer


class PreprocessingTokenizerTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.uncased = squad_tokenizer.PreprocessingTokenizer(testing.tiny_preprocess_handle())

  def test_reads_vocab_asset_and_lower_casing(self):
    self.assertEqual(os.path.basename(self.uncased.vocab_file), "vocab.txt")
    self.assertEqual(self.uncased.vocab[:4], ["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    self.assertTrue(self.uncased.do_lower_case)

  def test_tokenizes_like_the_savedmodel(self):
    self.assertEqual(self.uncased.tokenize("w1 W2, w3"), ["w1", "w2", "[UNK]", "w3"])
    self.assertEqual(self.uncased.convert_tokens_to_ids(["[CLS]", "w1", "[SEP]"]), [2, 5, 3])
    texts = ["w10 w11", "W12", ""]
    self.uncased.prepare(texts)
    self.assertEqual([self.uncased.convert_tokens_to_ids(self.uncased.tokenize(text))
                      for text in texts], self.uncased.token_ids(texts))

  def test_cased_model_is_recognised(self):
    cased = squad_tokenizer.PreprocessingTokenizer(
        testing.tiny_preprocess_handle(lower_case=False))
    self.assertFalse(cased.do_lower_case)
    self.assertEqual(cased.tokenize("w1 W2"), ["w1", "[UNK]"])
    # The features depend on the lower-casing: a cased model's features are cached apart.
    self.assertNotEqual(cased.fingerprint, self.uncased.fingerprint)

  def test_encoder_savedmodel_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"is not a TF Hub BERT preprocessing model"):
      squad_tokenizer.PreprocessingTokenizer(testing.tiny_hub_handle())

  def test_savedmodel_without_a_vocab_asset(self):
    with self.assertRaisesRegex(ValueError, r"has no single wordpiece vocab among its assets "
                                r"\(none\)"):
      squad_tokenizer.find_vocab_asset(self.create_tempdir().full_path)


if __name__ == "__main__":
  tf.test.main()

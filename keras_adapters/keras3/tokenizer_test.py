"""`tokenizer_from_tf_hub` and `preprocessor_from_tf_hub` against the embedded default's TF
Hub preprocessing model (the Model Garden's `export_preprocessing`)."""

import keras
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import tf_hub

_TEXTS = ["Hello, world!", "Café naïve résumé — ÉCOLE über Ångström",
          "qwertzuiop xylophonistically zzzq!!", "Tokyo 東京 and an emoji 🙂, ok?",
          "  tabs\tand\nnewlines  ", "Don't stop-believing (yes).", " ".join(["long"] * 300)]


class TokenizerTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.hub_preprocessor = tf.saved_model.load(tf_hub.local_folder(None, "preprocess"))

  def test_the_preprocessor_packs_the_same_ids_as_the_tf_hub_model(self):
    """Accents, CJK, unknown words, punctuation, and a text longer than the sequence."""
    preprocessor = kak.preprocessor_from_tf_hub()
    self.assertEqual(preprocessor.sequence_length, 128)
    expected = self.hub_preprocessor(tf.constant(_TEXTS))
    actual = preprocessor(tf.constant(_TEXTS))
    for hub_key, key in (("input_word_ids", "token_ids"), ("input_mask", "padding_mask"),
                         ("input_type_ids", "segment_ids")):
      self.assertAllEqual(expected[hub_key], keras.ops.convert_to_numpy(actual[key]), hub_key)
    # The long text fills the sequence; the emoji is an unknown word ([UNK], id 100).
    self.assertTrue(np.all(expected["input_mask"][-1] == 1))
    self.assertIn(100, expected["input_word_ids"][3].numpy())

  def test_the_tokenizer_splits_as_the_tf_hub_model(self):
    tokenizer = kak.tokenizer_from_tf_hub()
    self.assertTrue(tokenizer.lowercase)
    expected = self.hub_preprocessor.tokenize(tf.constant(_TEXTS[:-1]))
    for row, text in enumerate(_TEXTS[:-1]):
      self.assertAllEqual(expected[row].flat_values,
                          keras.ops.convert_to_numpy(tokenizer(text)), text)


if __name__ == "__main__":
  tf.test.main()

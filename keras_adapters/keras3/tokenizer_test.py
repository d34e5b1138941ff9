"""`tokenizer_from_tf_hub` and `preprocessor_from_tf_hub` against the embedded default's TF
Hub preprocessing model (the Model Garden's `export_preprocessing`)."""

import os
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.hub import proofs
from keras_adapters.keras3 import tf_hub
from keras_adapters.keras3 import tokenizer as tokenizer_lib

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

  def test_a_model_read_again_is_not_restored(self):
    """The second read in a process is the kept one; one in a new process (the kept reads
    forgotten) takes the lowercasing and sequence length the first found (`proofs`)."""
    self.enter_context(mock.patch.dict(os.environ,
                                       {proofs.SETTING: self.create_tempdir().full_path}))
    tokenizer_lib._models.clear()  # pylint: disable=protected-access
    first = kak.preprocessor_from_tf_hub()
    for kept_in in ("process", "proofs"):
      with self.subTest(kept_in=kept_in):
        if kept_in == "proofs":
          tokenizer_lib._models.clear()  # pylint: disable=protected-access
        with mock.patch.object(tf.saved_model, "load", side_effect=AssertionError("restored")):
          again = kak.preprocessor_from_tf_hub()
        self.assertEqual(again.sequence_length, first.sequence_length)
        self.assertEqual(again.tokenizer.lowercase, first.tokenizer.lowercase)
        self.assertAllEqual(keras.ops.convert_to_numpy(again(tf.constant(_TEXTS))["token_ids"]),
                            keras.ops.convert_to_numpy(first(tf.constant(_TEXTS))["token_ids"]))


if __name__ == "__main__":
  tf.test.main()

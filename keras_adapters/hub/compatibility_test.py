"""Tests for the up-front checks of a sequence length and a preprocessing model against a base
encoder's configuration."""

import functools
import os
import types

import tensorflow as tf

from official.nlp.tools import export_tfhub_lib

from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.utils import errors

_CONFIG = dict(max_sequence_length=32, vocab_size=64)


def _preprocessor(vocab_size):
  """An object with the preprocessing interface whose tokenizer reports `vocab_size`."""
  tokenize = lambda texts: texts
  tokenize.get_special_tokens_dict = lambda: dict(vocab_size=tf.constant(vocab_size))
  return types.SimpleNamespace(tokenize=tokenize, bert_pack_inputs=lambda *args: None)


class CompatibilityTest(tf.test.TestCase):

  def test_sequence_length(self):
    compatibility.check_seq_length(32, _CONFIG)
    compatibility.check_seq_length(2, _CONFIG)
    with self.assertRaisesRegex(ValueError,
                                "max_seq_length=33 is more than the base encoder's 32 position "
                                "embeddings: give max_seq_length=32 or less."):
      compatibility.check_seq_length(33, _CONFIG)
    for bad in (1, 16.0, True, "64", None):
      with self.assertRaisesRegex(ValueError, f"seq_length={bad!r}: give a whole number of "
                                  r"tokens of at least 2 \(\[CLS\] and \[SEP\]\)"):
        compatibility.check_seq_length(bad, _CONFIG, argument="seq_length")

  def test_preprocessor_interface_and_vocabulary(self):
    compatibility.check_preprocessor(_preprocessor(64), _CONFIG)
    compatibility.check_preprocessor(_preprocessor(100), None)  # No encoder to check against.
    with self.assertRaisesRegex(ValueError, "The preprocessor makes token ids up to 99, but the "
                                "base encoder has 64 token embeddings"):
      compatibility.check_preprocessor(_preprocessor(100), _CONFIG)
    with self.assertRaisesRegex(ValueError, "preprocess_handle='enc' is not a TF Hub BERT "
                                "preprocessing model: it has no bert_pack_inputs"):
      compatibility.check_preprocessor(types.SimpleNamespace(tokenize=None), handle="enc")

  def test_load_preprocessor(self):
    loaded = compatibility.load_preprocessor(testing.tiny_preprocess_handle())
    compatibility.check_preprocessor(loaded, testing.TINY_CONFIG)
    handle = testing.tiny_hub_handle()
    with self.assertRaisesRegex(ValueError, f"preprocess_handle='{handle}' is not a TF Hub BERT "
                                "preprocessing model: it has no tokenize or bert_pack_inputs"):
      compatibility.load_preprocessor(handle)
    with self.assertRaisesRegex(FileNotFoundError,
                                "preprocess_handle='/nowhere' does not exist"):
      compatibility.load_preprocessor("/nowhere")
    with self.assertRaisesRegex(ValueError, "vocab='.*' cannot be loaded as a SavedModel"):
      compatibility.load_preprocessor(self.create_tempdir().full_path, argument="vocab")

  def test_a_preprocessor_is_loaded_once_until_its_savedmodel_changes(self):
    handle = testing.tiny_preprocess_handle()
    loaded = compatibility.load_preprocessor(handle)
    self.assertIs(compatibility.load_preprocessor(handle), loaded)
    # Rewritten in place: loaded again.
    saved_model_pb = os.path.join(handle, "saved_model.pb")
    os.utime(saved_model_pb, (0, os.path.getmtime(saved_model_pb) + 1))
    reloaded = compatibility.load_preprocessor(handle)
    self.assertIsNot(reloaded, loaded)
    compatibility.clear_cache()
    self.assertIsNot(compatibility.load_preprocessor(handle), reloaded)
    # Inside a strategy's scope, a load of its own.
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
      self.assertIsNot(compatibility.load_preprocessor(handle),
                       compatibility.load_preprocessor(handle))

  def test_preprocessor_must_share_the_encoders_vocabulary_and_casing(self):
    """Genuine preprocessing exports: the encoder's own passes; another casing or another
    vocabulary is refused naming it, not trained into a silently weaker model."""
    base = hub_encoder.read_hub_encoder(testing.tiny_hub_handle())
    self.assertTrue(base.tokenizer.lower_case)
    compatibility.check_preprocessor(testing.tiny_preprocessor(), base.config,
                                     encoder_tokenizer=base.tokenizer)
    cased = compatibility.load_preprocessor(testing.tiny_preprocess_handle(lower_case=False))
    with self.assertRaisesRegex(ValueError, r"keeps case \(cased\) but the encoder was trained "
                                r"uncased \(do_lower_case=True\).*do_lower_case=True"):
      compatibility.check_preprocessor(cased, base.config, encoder_tokenizer=base.tokenizer)
    # The encoder's wordpieces with the same ids, and 36 more: only the vocabulary's digest
    # tells it from the encoder's own.
    other = compatibility.load_preprocessor(testing.tiny_preprocess_handle(vocab_size=100))
    with self.assertRaisesRegex(ValueError, r"tokenizes with another vocabulary.*than the "
                                r"encoder's own wordpiece vocabulary"):
      compatibility.check_preprocessor(other, base.config, encoder_tokenizer=base.tokenizer)

  def test_sentencepiece_preprocessor_of_a_sentencepiece_encoder(self):
    """The Model Garden's SentencePiece variants pair up; one of another model is refused."""
    encoder, preprocess = testing.tiny_sentencepiece_handles()
    base = hub_encoder.read_hub_encoder(encoder)
    self.assertEqual(base.tokenizer.kind, "sentencepiece")
    compatibility.check_preprocessor(compatibility.load_preprocessor(preprocess), base.config,
                                     encoder_tokenizer=base.tokenizer)
    root = self.create_tempdir().full_path
    export_tfhub_lib.export_preprocessing(
        os.path.join(root, "other"), do_lower_case=True, tokenize_with_offsets=False,
        sp_model_file=testing.save_tiny_sentencepiece(root, testing.TINY_WORDS[39::-1]),
        default_seq_length=16, experimental_disable_assert=True)
    with self.assertRaisesRegex(ValueError, "another vocabulary.*own sentencepiece"):
      compatibility.check_preprocessor(
          compatibility.load_preprocessor(os.path.join(root, "other")), base.config,
          encoder_tokenizer=base.tokenizer)

  def test_unknown_tokens_where_the_encoder_records_no_tokenizer(self):
    check = functools.partial(compatibility.check_unknown_tokens, testing.tiny_preprocessor(),
                              encoder_config=_CONFIG, encoder_tokenizer=None,
                              hub_handle="old_encoder", preprocess_handle="other_preprocess")
    known = " ".join(testing.TINY_WORDS[:19])
    with self.assertNoLogs(level="WARNING"):
      check([known] * 10)
    # 1 unknown word in 20: a warning; 2 in 6: an error naming both handles and the rate.
    with self.assertLogs(level="WARNING") as logs:
      check([known + " unknown"] * 10)
    self.assertRegex(logs.output[0], r"5% of the tokens of the first training texts are "
                     r"\[UNK\] with hub_handle='old_encoder' and "
                     r"preprocess_handle='other_preprocess': check that")
    with self.assertRaisesRegex(errors.UsageError,
                                r"^33% of the tokens .* are \[UNK\] with hub_handle="
                                r"'old_encoder' and preprocess_handle='other_preprocess': the "
                                "encoder would read them as blanks"):
      check(["w1 w2 one two w3 w4"] * 10)
    # Only the first texts are read.
    check([known] * compatibility.UNKNOWN_RATE_TEXTS + ["unknown words"] * 1000)

  def test_unknown_tokens_are_not_counted_where_the_encoder_records_its_tokenizer(self):
    base = hub_encoder.read_hub_encoder(testing.tiny_hub_handle())
    compatibility.check_unknown_tokens(
        testing.tiny_preprocessor(), ["unknown words"], base.config, base.tokenizer,
        hub_handle="encoder", preprocess_handle="preprocess")

  def test_special_ids_need_embeddings_where_the_encoder_records_no_tokenizer(self):
    # The tiny vocab: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3.
    with self.assertRaisesRegex(
        errors.UsageError,
        r"The \[CLS\] id 2, \[SEP\] id 3 of preprocess_handle='p' have no embedding in "
        r"hub_handle='e', whose vocabulary has 2 tokens: the preprocessing model is not the "
        "encoder's."):
      compatibility.check_unknown_tokens(
          testing.tiny_preprocessor(), [], dict(vocab_size=2), None, hub_handle="e",
          preprocess_handle="p")


if __name__ == "__main__":
  tf.test.main()

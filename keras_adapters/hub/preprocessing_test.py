"""Tests for the TF Hub-format BERT preprocessing model built with the Model Garden."""

import os
import shutil
import tempfile
from unittest import mock

import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from official.nlp.tools import export_tfhub_lib

from keras_adapters.hub import preprocessing

# Special tokens sit at unusual ids so a hard-coded BERT id (e.g. padding with 0) shows.
_VOCAB = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "the", "quick", "brown", "fox", "jump", "##s",
          "over", "lazy", "dog", "."]
_UNK, _PAD, _CLS, _SEP = 0, 1, 2, 3
_THE, _QUICK, _BROWN, _FOX, _JUMP, _S, _LAZY, _DOG, _DOT = 4, 5, 6, 7, 8, 9, 11, 12, 13


def _write_vocab(directory, tokens=tuple(_VOCAB)):
  path = os.path.join(directory, "vocab.txt")
  with open(path, "w") as f:
    f.write("\n".join(tokens) + "\n")
  return path


def _words(*lines):
  return tf.constant(list(lines))


# Where `setUpModule` builds the export the tests share, and its TF Hub Keras layer.
_ROOT = _LAYER = None


def setUpModule():
  """Builds the uncased export of `_VOCAB` once for every test here: an export takes seconds,
  and so does loading it (`_ROOT`/models/preprocess, loaded by TF Hub's Keras layer)."""
  global _ROOT, _LAYER
  _ROOT = tempfile.mkdtemp()
  vocab = _write_vocab(tempfile.mkdtemp(dir=_ROOT))
  export_dir = preprocessing.build_preprocessing_savedmodel(
      vocab, os.path.join(_ROOT, "models", "preprocess"), default_seq_length=10)
  # The export must carry its own vocab.
  shutil.rmtree(os.path.dirname(vocab))
  _LAYER = hub.KerasLayer(export_dir)


def tearDownModule():
  shutil.rmtree(_ROOT)


class PreprocessingTest(tf.test.TestCase):
  """Tokenization and packing of a loaded export against hand-written ids."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.preprocessor = _LAYER.resolved_object

  def test_call_lowercases_packs_and_pads_with_the_vocab_pad_id(self):
    outputs = self.preprocessor(_words("The quick FOX jumps.", "the zebra"))
    self.assertAllEqual(outputs["input_word_ids"], [
        [_CLS, _THE, _QUICK, _FOX, _JUMP, _S, _DOT, _SEP, _PAD, _PAD],
        [_CLS, _THE, _UNK, _SEP, _PAD, _PAD, _PAD, _PAD, _PAD, _PAD],
    ])
    self.assertAllEqual(outputs["input_mask"], [[1] * 8 + [0] * 2, [1] * 4 + [0] * 6])
    self.assertAllEqual(outputs["input_type_ids"], tf.zeros([2, 10], tf.int32))
    for value in outputs.values():
      self.assertEqual(value.dtype, tf.int32)

  def test_tokenize_keeps_words_and_wordpieces_apart(self):
    tokens = self.preprocessor.tokenize(_words("Quick foxes jumps", ""))
    self.assertIsInstance(tokens, tf.RaggedTensor)
    self.assertEqual(tokens.dtype, tf.int32)
    self.assertEqual(tokens.ragged_rank, 2)
    self.assertEqual(tokens.to_list(), [[[_QUICK], [_UNK], [_JUMP, _S]], []])

  def test_cased_tokenizer_keeps_case(self):
    cased = tf.saved_model.load(preprocessing.build_preprocessing_savedmodel(
        _write_vocab(self.get_temp_dir()), os.path.join(self.get_temp_dir(), "cased"),
        lower_case=False))
    self.assertEqual(cased.tokenize(_words("The the")).to_list(), [[[_UNK], [_THE]]])

  def test_two_segments_layout_and_type_ids(self):
    tokenize = self.preprocessor.tokenize
    outputs = self.preprocessor.bert_pack_inputs(
        [tokenize(_words("the quick fox")), tokenize(_words("lazy dog"))], tf.constant(10))
    self.assertAllEqual(outputs["input_word_ids"],
                        [[_CLS, _THE, _QUICK, _FOX, _SEP, _LAZY, _DOG, _SEP, _PAD, _PAD]])
    self.assertAllEqual(outputs["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
    self.assertAllEqual(outputs["input_mask"], [[1] * 8 + [0] * 2])

  def test_truncation_is_round_robin_between_segments(self):
    tokenize = self.preprocessor.tokenize
    # 6 + 4 tokens into 8 - 3 = 5 slots: the segments take turns, 3 and 2.
    outputs = self.preprocessor.bert_pack_inputs(
        [tokenize(_words("the quick brown fox jumps")), tokenize(_words("the lazy dog."))],
        tf.constant(8))
    self.assertAllEqual(outputs["input_word_ids"],
                        [[_CLS, _THE, _QUICK, _BROWN, _SEP, _THE, _LAZY, _SEP]])
    self.assertAllEqual(outputs["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1, 1]])
    self.assertAllEqual(outputs["input_mask"], [[1] * 8])

  def test_single_segment_is_truncated_to_fit(self):
    outputs = self.preprocessor.bert_pack_inputs(
        [self.preprocessor.tokenize(_words("the quick brown fox"))], tf.constant(4))
    self.assertAllEqual(outputs["input_word_ids"], [[_CLS, _THE, _QUICK, _SEP]])

  def test_flat_segments_pack_like_tokenized_ones(self):
    flat = tf.ragged.constant([[_FOX], [_DOG, _DOT]], tf.int32)
    outputs = self.preprocessor.bert_pack_inputs([flat, flat])
    self.assertAllEqual(outputs["input_word_ids"],
                        [[_CLS, _FOX, _SEP, _FOX, _SEP] + [_PAD] * 5,
                         [_CLS, _DOG, _DOT, _SEP, _DOG, _DOT, _SEP] + [_PAD] * 3])
    self.assertAllEqual(outputs["input_type_ids"][1], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0])

  def test_offsets_locate_each_wordpiece_in_the_text(self):
    tokens, starts, limits = self.preprocessor.tokenize_with_offsets(_words("The fox jumps"))
    self.assertEqual(tokens.to_list(), [[[_THE], [_FOX], [_JUMP, _S]]])
    self.assertEqual(starts.to_list(), [[[0], [4], [8, 12]]])
    self.assertEqual(limits.to_list(), [[[3], [7], [12, 13]]])

  def test_special_token_ids_come_from_the_vocab(self):
    special = self.preprocessor.tokenize.get_special_tokens_dict()
    self.assertEqual(int(special["vocab_size"]), len(_VOCAB))
    self.assertEqual({key: int(special[key]) for key in (
        "start_of_sequence_id", "end_of_segment_id", "padding_id")},
                     dict(start_of_sequence_id=_CLS, end_of_segment_id=_SEP, padding_id=_PAD))


class ArgumentErrorsTest(tf.test.TestCase):

  def _export_dir(self):
    return os.path.join(self.get_temp_dir(), "never_written")

  def test_missing_vocab_file(self):
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      preprocessing.build_preprocessing_savedmodel(
          os.path.join(self.get_temp_dir(), "nope.txt"), self._export_dir())

  def test_vocab_without_special_token(self):
    vocab = _write_vocab(self.get_temp_dir(), [t for t in _VOCAB if t != "[SEP]"])
    with self.assertRaisesRegex(ValueError, r"lacks the special tokens \['\[SEP\]'\]"):
      preprocessing.build_preprocessing_savedmodel(vocab, self._export_dir())

  def test_default_seq_length_too_short(self):
    with self.assertRaisesRegex(ValueError, "at least 3"):
      preprocessing.build_preprocessing_savedmodel(
          _write_vocab(self.get_temp_dir()), self._export_dir(), default_seq_length=2)

  def tearDown(self):
    self.assertFalse(os.path.exists(self._export_dir()))
    super().tearDown()


class SavedModelTest(tf.test.TestCase):
  """The shared export (`setUpModule`) as a SavedModel folder and through TF Hub's APIs."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.layer = _LAYER
    cls.export_dir = os.path.join(_ROOT, "models", "preprocess")
    cls.loaded = cls.layer.resolved_object

  def test_export_is_renamed_into_place_without_leftovers(self):
    self.assertEqual(os.listdir(os.path.dirname(self.export_dir)), ["preprocess"])
    self.assertTrue(os.path.exists(os.path.join(self.export_dir, "assets", "vocab.txt")))

  def test_loaded_call_packs_to_default_seq_length(self):
    outputs = self.loaded(_words("The lazy dog."))
    self.assertAllEqual(outputs["input_word_ids"],
                        [[_CLS, _THE, _LAZY, _DOG, _DOT, _SEP, _PAD, _PAD, _PAD, _PAD]])
    self.assertAllEqual(outputs["input_mask"], [[1] * 6 + [0] * 4])

  def test_hub_keras_layer_on_the_export_dir(self):
    text_input = keras.layers.Input(shape=(), dtype=tf.string)
    model = keras.Model(text_input, self.layer(text_input))
    self.assertEqual(model.output["input_word_ids"].shape.as_list(), [None, 10])
    outputs = model(_words("the fox", "dog"))
    self.assertEqual(outputs["input_word_ids"].shape, [2, 10])
    self.assertAllEqual(outputs["input_word_ids"][1, :4], [_CLS, _DOG, _SEP, _PAD])

  def test_tf_hub_two_segment_recipe_with_any_seq_length(self):
    # The usage documented for TF Hub's BERT preprocessors, as a Keras model.
    tokenize = hub.KerasLayer(self.loaded.tokenize)
    bert_pack_inputs = hub.KerasLayer(self.loaded.bert_pack_inputs,
                                      arguments=dict(seq_length=12))
    text_inputs = [keras.layers.Input(shape=(), dtype=tf.string) for _ in range(2)]
    model = keras.Model(text_inputs, bert_pack_inputs([tokenize(t) for t in text_inputs]))
    outputs = model([_words("the quick fox"), _words("lazy cats")])
    self.assertAllEqual(
        outputs["input_word_ids"],
        [[_CLS, _THE, _QUICK, _FOX, _SEP, _LAZY, _UNK, _SEP, _PAD, _PAD, _PAD, _PAD]])
    self.assertAllEqual(outputs["input_type_ids"], [[0] * 5 + [1] * 3 + [0] * 4])

  def test_loaded_bert_pack_inputs_layouts(self):
    tokens = self.loaded.tokenize(_words("the quick brown fox jumps"))
    self.assertAllEqual(self.loaded.bert_pack_inputs([tokens])["input_word_ids"],
                        [[_CLS, _THE, _QUICK, _BROWN, _FOX, _JUMP, _S, _SEP, _PAD, _PAD]])
    flat = tokens.merge_dims(1, 2)
    outputs = self.loaded.bert_pack_inputs([flat, flat], tf.constant(7))
    self.assertAllEqual(outputs["input_word_ids"],
                        [[_CLS, _THE, _QUICK, _SEP, _THE, _QUICK, _SEP]])

  def test_existing_export_dir_is_refused(self):
    vocab = _write_vocab(self.get_temp_dir())
    with self.assertRaisesRegex(FileExistsError, "already exists"):
      preprocessing.build_preprocessing_savedmodel(vocab, self.export_dir)

  def test_failed_save_leaves_nothing_behind(self):
    vocab = _write_vocab(self.get_temp_dir())
    parent = os.path.join(self.get_temp_dir(), "failed")

    def save_half_then_fail(export_dir, **unused_kwargs):
      tf.io.gfile.makedirs(os.path.join(export_dir, "variables"))
      raise OSError("disk full")

    with mock.patch.object(export_tfhub_lib, "export_preprocessing",
                           side_effect=save_half_then_fail):
      with self.assertRaisesRegex(OSError, "disk full"):
        preprocessing.build_preprocessing_savedmodel(vocab, os.path.join(parent, "model"))
    self.assertEqual(os.listdir(parent), [])


if __name__ == "__main__":
  tf.test.main()

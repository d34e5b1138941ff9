"""Tests of the SQuAD windows (Model Garden `squad_lib`), their cache, batches and answers."""

import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.data import squad_tokenizer

# A 40-word context of the tiny vocab's words; questions are 2 words.
_WORDS = [f"w{i}" for i in range(10, 50)]
_CONTEXT = " ".join(_WORDS)
# 24 tokens per window: 2 question tokens, [CLS], 2 [SEP], so 19 context tokens, 8 apart.
_SETTINGS = squad_features.WindowSettings(max_seq_length=24, doc_stride=8, max_query_length=4)
_DOC_TOKENS = _SETTINGS.max_seq_length - 2 - 3
# An answer this long fits in some window wherever it starts.
_FITS = _DOC_TOKENS - _SETTINGS.doc_stride + 1


def _char_start(word_index):
  return len(" ".join(_WORDS[:word_index])) + (1 if word_index else 0)


def _write(path, qas, context=_CONTEXT):
  """A one-paragraph SQuAD file; `qas` are (id, question, first word, number of words)."""
  return _write_paragraphs(path, [(context, qas)])


def _write_paragraphs(path, paragraphs):
  """A SQuAD file of (context, qas) paragraphs, answers given as in `_write`."""
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": qid, "question": question, "answers": [
            {"text": " ".join(_WORDS[first:first + length]), "answer_start": _char_start(first)}]}
        for qid, question, first, length in qas]} for context, qas in paragraphs]}]}, f)
  return path


class SquadFeaturesTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = squad_tokenizer.PreprocessingTokenizer(testing.tiny_preprocess_handle())

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.cache_dir = os.path.join(self.root, "cache")

  def load(self, qas, training, settings=_SETTINGS):
    data = squad.read_squad_file(_write(os.path.join(self.root, "data.json"), qas),
                                 training=training)
    return data, squad_features.load_features(data, self.tokenizer, settings,
                                              training=training, cache_dir=self.cache_dir)

  def test_every_answer_is_in_a_window_where_it_fits(self):
    # Every start position and every length up to the one that always fits.
    qas = [(f"q{first}_{length}", "w1 w2", first, length)
           for length in (1, 3, _FITS) for first in range(len(_WORDS) - length + 1)]
    _, features = self.load(qas, training=True)
    ids = features.input_ids.to_list()
    found = {}
    for window, qid in enumerate(features.question_ids):
      start, end = features.start_positions[window], features.end_positions[window]
      if start:
        found[qid] = [self.tokenizer.vocab[i] for i in ids[window][start:end + 1]]
    for qid, _, first, length in qas:
      self.assertEqual(found.get(qid), _WORDS[first:first + length], qid)

  def test_windows_are_squad_lib_windows(self):
    _, features = self.load([("q", "w1 w2", 0, 1)], training=False)
    # Starts 0, 8, 16, 24: the window from 24 reaches the 40th token.
    self.assertLen(features, 4)
    self.assertAllEqual(features.input_ids.row_lengths(), [24, 24, 24, 21])
    ids = features.input_ids[0].numpy()
    self.assertEqual([self.tokenizer.vocab[i] for i in ids[:4]], ["[CLS]", "w1", "w2", "[SEP]"])
    self.assertAllEqual(features.segment_ids[0], [0] * 4 + [1] * 20)
    self.assertAllEqual(features.start_positions, [0, 0, 0, 0])
    # Every context word is mapped, and has exactly one window of maximum context.
    words, counts = np.unique(np.concatenate([
        to_orig[max_context == 1] for to_orig, max_context in zip(
            features.token_to_orig.numpy(), features.token_is_max_context.numpy())]),
                              return_counts=True)
    self.assertAllEqual(words, np.arange(len(_WORDS)))
    self.assertAllEqual(counts, np.ones(len(_WORDS)))

  def test_built_once_then_read_from_the_cache(self):
    qas = [("q", "w1 w2", 5, 2)]
    _, built = self.load(qas, training=True)
    with mock.patch.object(squad_features, "_build", side_effect=AssertionError("rebuilt")):
      _, cached = self.load(qas, training=True)
    self.assertAllEqual(cached.input_ids, built.input_ids)
    self.assertEqual(cached.example_ids, ("q",))
    self.assertGreater(cached.build_seconds, 0)
    # Other settings or evaluation windows are other entries.
    self.load(qas, training=False)
    self.load(qas, training=True, settings=squad_features.WindowSettings(24, 4, 4))
    self.assertLen(os.listdir(self.cache_dir), 3)

  def test_select_keeps_the_windows_of_the_questions(self):
    _, features = self.load([("a", "w1", 0, 1), ("b", "w2", 30, 2), ("c", "w3", 2, 1)],
                            training=False)
    selected = features.select(["c", "a"])
    self.assertEqual(sorted(set(selected.question_ids)), ["a", "c"])
    self.assertLen(selected, 2 * len(features) // 3)
    self.assertIs(features.select(None), features)

  def test_settings_are_checked(self):
    with self.assertRaisesRegex(ValueError, r"max_seq_length=10 leaves no room .* at least 12"):
      squad_features.WindowSettings(max_seq_length=10, doc_stride=4, max_query_length=8)
    with self.assertRaisesRegex(ValueError, r"doc_stride must be a positive integer"):
      squad_features.WindowSettings(doc_stride=0)


class TrainingDatasetTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tokenizer = squad_tokenizer.PreprocessingTokenizer(testing.tiny_preprocess_handle())
    root = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, root)
    # Questions of several lengths over contexts of several lengths: windows of many lengths.
    path = _write_paragraphs(os.path.join(root, "train.json"), [
        (" ".join(_WORDS[:length]),
         [(f"q{length}_{k}", " ".join(["w1"] * (k + 1)), k % length, 1) for k in range(4)])
        for length in (3, 9, 17, 30, 40)])
    cls.features = squad_features.load_features(
        squad.read_squad_file(path, training=True), tokenizer, _SETTINGS, training=True,
        cache_dir=os.path.join(root, "cache"))

  def epoch(self, seed, static_shapes=False):
    return list(squad_features.training_dataset(
        self.features, batch_size=4, seed=seed, max_seq_length=_SETTINGS.max_seq_length,
        static_shapes=static_shapes))

  def test_one_epoch_holds_every_window_once_in_length_buckets(self):
    batches = self.epoch(seed=0)
    self.assertLen(batches, squad_features.num_training_batches(
        self.features, 4, _SETTINGS.max_seq_length))
    rows = []
    for inputs, labels in batches:
      mask = inputs["input_mask"].numpy()
      lengths = mask.sum(axis=1)
      # Padded to the batch's longest window, all from one bucket.
      self.assertEqual(inputs["input_word_ids"].shape[1], lengths.max())
      self.assertLen(set(np.searchsorted(squad_features.bucket_boundaries(24), lengths,
                                         side="right")), 1)
      for ids, length, label in zip(inputs["input_word_ids"].numpy(), lengths, labels.numpy()):
        rows.append((tuple(ids[:length]), tuple(label)))
    expected = [(tuple(ids), (start, end)) for ids, start, end in zip(
        self.features.input_ids.to_list(), self.features.start_positions,
        self.features.end_positions)]
    self.assertCountEqual(rows, expected)

  def test_order_is_a_function_of_the_seed(self):
    first = [labels.numpy().tolist() for _, labels in self.epoch(seed=3)]
    self.assertEqual(first, [labels.numpy().tolist() for _, labels in self.epoch(seed=3)])
    self.assertNotEqual(first, [labels.numpy().tolist() for _, labels in self.epoch(seed=4)])

  def test_static_shapes_for_tpus(self):
    batches = self.epoch(seed=0, static_shapes=True)
    self.assertLen(batches, len(self.features) // 4)
    self.assertLen(batches, squad_features.num_training_batches(
        self.features, 4, _SETTINGS.max_seq_length, static_shapes=True))
    for inputs, labels in batches:
      self.assertEqual(inputs["input_word_ids"].shape, (4, _SETTINGS.max_seq_length))
      self.assertEqual(labels.shape, (4, 2))


  def test_static_shape_prediction_gives_every_window_once(self):
    shapes = []

    def model(inputs, training):
      """Start logits: the word ids; end logits: the position; both read back below."""
      del training
      ids = inputs["input_word_ids"]
      shapes.append(ids.shape.as_list())
      positions = tf.broadcast_to(tf.range(tf.shape(ids)[1]), tf.shape(ids))
      return dict(start_logits=tf.cast(ids, tf.float32),
                  end_logits=tf.cast(positions, tf.float32))

    expected = squad_features.predict_logits(model, self.features, batch_size=3)
    shapes.clear()
    static = squad_features.predict_logits(model, self.features, batch_size=3,
                                           max_seq_length=_SETTINGS.max_seq_length)
    self.assertEqual(shapes, [[3, _SETTINGS.max_seq_length]])  # One trace for every batch.
    self.assertGreater(len(self.features) % 3, 0)  # So the last batch holds padding rows.
    for kind in (0, 1):
      self.assertEqual(len(static[kind]), len(self.features))
      for got, want in zip(static[kind], expected[kind]):
        self.assertAllEqual(got, want)


class AnswersTest(tf.test.TestCase):

  def test_logits_across_windows_become_the_answer_text(self):
    tokenizer = squad_tokenizer.PreprocessingTokenizer(testing.tiny_preprocess_handle())
    root = self.create_tempdir().full_path
    # Answers at the start, in the overlap of two windows, and at the end of the context.
    qas = [("start", "w1", 0, 2), ("overlap", "w2", 20, 3), ("end", "w3 w4", 37, 3)]
    data = squad.read_squad_file(_write(os.path.join(root, "dev.json"), qas), training=False)
    features = squad_features.load_features(data, tokenizer, _SETTINGS, training=False,
                                            cache_dir=os.path.join(root, "cache"))
    answer_ids = {qid: (tokenizer.vocab.index(_WORDS[first]),
                        tokenizer.vocab.index(_WORDS[first + length - 1]))
                  for qid, _, first, length in qas}

    def model(inputs, training):
      """Logit 10 on the answer's first (start) and last (end) word; -1 elsewhere."""
      del training
      ids = inputs["input_word_ids"]
      # The question's first token tells the questions apart: w1, w2, w3.
      first, last = [tf.gather(tf.constant([answer_ids[qid][i] for qid in ("start", "overlap",
                                                                          "end")]),
                               ids[:, 1] - tokenizer.vocab.index("w1"))
                     for i in (0, 1)]
      return dict(start_logits=tf.where(ids == first[:, None], 10.0, -1.0),
                  end_logits=tf.where(ids == last[:, None], 10.0, -1.0))

    start_logits, end_logits = squad_features.predict_logits(model, features, batch_size=3)
    self.assertEqual([len(logits) for logits in start_logits],
                     features.input_ids.row_lengths().numpy().tolist())
    predictions, nbest = squad_features.postprocess(
        squad_features.read_examples(data, training=False), features, start_logits,
        end_logits, vocab=tokenizer.vocab, do_lower_case=True)
    self.assertEqual(predictions, {qid: " ".join(_WORDS[first:first + length])
                                   for qid, _, first, length in qas})
    self.assertEqual(nbest["overlap"][0]["text"], predictions["overlap"])
    self.assertAlmostEqual(nbest["overlap"][0]["start_logit"], 10.0)
    self.assertLessEqual(len(nbest["overlap"]), 20)
    self.assertAlmostEqual(sum(entry["probability"] for entry in nbest["end"]), 1.0)
    # A subset of the questions gets answers for those only.
    subset, _ = squad_features.postprocess(
        [example for example in squad_features.read_examples(data, training=False)
         if example.qas_id == "end"], features, start_logits, end_logits,
        vocab=tokenizer.vocab, do_lower_case=True)
    self.assertEqual(subset, {"end": predictions["end"]})


if __name__ == "__main__":
  tf.test.main()

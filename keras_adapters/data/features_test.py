"""Tests for turning text examples into batched BERT inputs."""

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from keras_adapters.hub import preprocessing
from keras_adapters.data import features
from keras_adapters.data.examples import TextExamples

# [PAD] is not 0 so that padding with the wrong id shows.
_VOCAB = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "a", "b", "c"]
_PAD, _CLS, _SEP, _A, _B, _C = 1, 2, 3, 4, 5, 6
# Words per sentence; packed lengths are these plus [CLS] and [SEP].
_WORD_COUNTS = (1, 2, 3, 4, 5, 6, 7, 9, 12, 20)


def _examples(word_counts=_WORD_COUNTS, labels=True):
  """Sentences of `a`s; label i marks example i so batches show the order."""
  texts = [" ".join(["a"] * n) for n in word_counts]
  return TextExamples(
      ids=[str(i) for i in range(len(texts))], texts=(texts,),
      labels=np.arange(len(texts), dtype=np.int32) if labels else None)


def _batches(dataset):
  return [tf.nest.map_structure(lambda t: t.numpy(), batch) for batch in dataset]


def _labels(dataset):
  return [labels.tolist() for _, labels in _batches(dataset)]


class MakeDatasetTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.vocab_dir = tempfile.mkdtemp()
    vocab = os.path.join(cls.vocab_dir, "vocab.txt")
    with open(vocab, "w") as f:
      f.write("\n".join(_VOCAB) + "\n")
    # Built and loaded once: an export takes seconds.
    cls.preprocessor = tf.saved_model.load(preprocessing.build_preprocessing_savedmodel(
        vocab, os.path.join(cls.vocab_dir, "preprocess")))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.vocab_dir)
    super().tearDownClass()

  def make(self, examples=None, **kwargs):
    return features.make_dataset(examples or _examples(), self.preprocessor, **kwargs)

  def test_dynamic_padding_pads_each_batch_to_a_multiple_of_8(self):
    batches = _batches(self.make(max_seq_length=20, batch_size=4))
    # Longest packed lengths 6, 11 and 22 (trimmed to 20): widths 8, 16 and 20 (the cap).
    self.assertEqual([inputs["input_word_ids"].shape for inputs, _ in batches],
                     [(4, 8), (4, 16), (2, 20)])
    self.assertEqual([labels.tolist() for _, labels in batches],
                     [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]])
    inputs = batches[0][0]
    self.assertAllEqual(inputs["input_word_ids"][0], [_CLS, _A, _SEP] + [_PAD] * 5)
    self.assertAllEqual(inputs["input_mask"].sum(axis=1), [3, 4, 5, 6])
    self.assertAllEqual(inputs["input_type_ids"], np.zeros([4, 8]))
    self.assertAllEqual(batches[2][0]["input_mask"].sum(axis=1), [14, 20])
    for value in inputs.values():
      self.assertEqual(value.dtype, np.int32)

  def test_fixed_padding_gives_max_seq_length(self):
    dataset = self.make(max_seq_length=20, batch_size=4, dynamic_padding=False)
    inputs_spec, labels_spec = dataset.element_spec
    self.assertEqual(inputs_spec["input_word_ids"].shape.as_list(), [None, 20])
    self.assertEqual(labels_spec.dtype, tf.int32)
    self.assertEqual([inputs["input_mask"].shape for inputs, _ in _batches(dataset)],
                     [(4, 20), (4, 20), (2, 20)])

  def test_pad_last_batch_gives_one_shape_and_every_example_once(self):
    for dynamic_padding in (False, True):
      with self.subTest(dynamic_padding=dynamic_padding):
        dataset = self.make(max_seq_length=20, batch_size=4, dynamic_padding=dynamic_padding,
                            pad_last_batch=True)
        batches = _batches(dataset)
        self.assertEqual({inputs["input_mask"].shape[0] for inputs, _ in batches}, {4})
        if not dynamic_padding:
          self.assertEqual(dataset.element_spec[0]["input_mask"].shape.as_list(), [4, 20])
        # Labels mark the examples: each of the 10 comes once, in order, then 2 padding rows.
        self.assertEqual(np.concatenate([labels for _, labels in batches]).tolist(),
                         list(range(10)) + [0, 0])
        last = batches[-1][0]
        self.assertAllEqual(last["input_mask"][2:], np.zeros_like(last["input_mask"][2:]))
        self.assertAllEqual(last["input_word_ids"][2:],
                            np.full_like(last["input_word_ids"][2:], _PAD))
    unlabelled = _batches(self.make(_examples(labels=False), batch_size=4, pad_last_batch=True))
    self.assertEqual([inputs["input_mask"].shape[0] for inputs in unlabelled], [4, 4, 4])

  def test_pairs_get_type_ids_one_on_the_second_segment(self):
    pairs = TextExamples(ids=["0", "1"], texts=(["a b", "c"], ["c", "a b c"]),
                         labels=np.array([0.5, 1.0], np.float32))
    inputs, labels = _batches(self.make(pairs))[0]
    self.assertAllEqual(inputs["input_word_ids"], [
        [_CLS, _A, _B, _SEP, _C, _SEP, _PAD, _PAD],
        [_CLS, _C, _SEP, _A, _B, _C, _SEP, _PAD],
    ])
    self.assertAllEqual(inputs["input_type_ids"], [[0, 0, 0, 0, 1, 1, 0, 0],
                                                   [0, 0, 0, 1, 1, 1, 1, 0]])
    self.assertAllClose(labels, [0.5, 1.0])

  def test_unlabelled_examples_give_inputs_only(self):
    dataset = self.make(_examples(labels=False), batch_size=8)
    self.assertCountEqual(dataset.element_spec.keys(),
                          ["input_word_ids", "input_mask", "input_type_ids"])

  def test_same_seed_gives_the_same_batches_and_each_epoch_a_new_order(self):
    def two_epochs(seed):
      dataset = self.make(batch_size=4, shuffle=True, seed=seed, repeat=True)
      return _labels(dataset.take(6))

    first = two_epochs(seed=3)
    self.assertEqual(first, two_epochs(seed=3))
    self.assertNotEqual(first, two_epochs(seed=4))
    epochs = [sum(first[:3], []), sum(first[3:], [])]
    self.assertNotEqual(epochs[0], epochs[1])
    for order in epochs:
      self.assertCountEqual(order, range(10))

  def test_initial_epoch_reproduces_that_epoch_of_a_longer_run(self):
    run = _labels(self.make(batch_size=4, shuffle=True, seed=3, repeat=True).take(9))
    resumed = self.make(batch_size=4, shuffle=True, seed=3, initial_epoch=2)
    self.assertEqual(_labels(resumed), run[6:])
    self.assertEqual(sum(run[6:], []),
                     features.shuffled_order(10, seed=3, epoch=2).numpy().tolist())

  def test_without_shuffle_every_epoch_keeps_example_order(self):
    self.assertEqual(_labels(self.make(batch_size=6, repeat=True).take(4)),
                     [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]] * 2)

  def test_bucket_by_length_groups_similar_lengths_deterministically(self):
    word_counts = np.random.default_rng(0).integers(1, 30, size=70)
    examples = _examples(word_counts)

    def epoch(bucket_by_length):
      return _batches(self.make(examples, batch_size=4, shuffle=True, seed=1,
                                bucket_by_length=bucket_by_length))

    bucketed = epoch(bucket_by_length=True)
    self.assertCountEqual(np.concatenate([labels for _, labels in bucketed]), range(70))
    self.assertLen(bucketed[-1][1], 70 % 4)
    for (inputs, labels), (inputs_again, labels_again) in zip(bucketed, epoch(True)):
      self.assertAllEqual(labels, labels_again)
      self.assertAllEqual(inputs["input_word_ids"], inputs_again["input_word_ids"])

    def padded_size(batches):
      return sum(inputs["input_mask"].size for inputs, _ in batches)

    self.assertLess(padded_size(bucketed), padded_size(epoch(bucket_by_length=False)))

  def test_drop_remainder_and_cardinality(self):
    self.assertEqual(self.make(batch_size=4).cardinality(), 3)
    dataset = self.make(batch_size=4, drop_remainder=True)
    self.assertEqual(dataset.cardinality(), 2)
    self.assertEqual([len(labels) for labels in _labels(dataset)], [4, 4])
    self.assertEqual(features.num_batches(10, 4, drop_remainder=False), 3)
    repeated = self.make(batch_size=4, repeat=True)
    self.assertEqual(repeated.cardinality(), tf.data.INFINITE_CARDINALITY)

  def test_splits_batches_across_replicas(self):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    dataset = self.make(batch_size=4, shuffle=True, seed=0)
    inputs, labels = next(iter(strategy.experimental_distribute_dataset(dataset)))
    local_labels = strategy.experimental_local_results(labels)
    self.assertEqual([len(l) for l in local_labels], [2, 2])
    widths = {x.shape[1] for x in strategy.experimental_local_results(inputs["input_mask"])}
    self.assertLen(widths, 1)
    self.assertEqual(widths.pop() % 8, 0)

  def test_bad_arguments_are_rejected(self):
    with self.assertRaisesRegex(TypeError, "TextExamples"):
      features.make_dataset({"texts": ["a"]}, self.preprocessor)
    with self.assertRaisesRegex(TypeError, "tokenize"):
      features.make_dataset(_examples(), object())
    with self.assertRaisesRegex(ValueError, "at least 3"):
      self.make(max_seq_length=2)
    with self.assertRaisesRegex(ValueError, "shuffle=True"):
      self.make(bucket_by_length=True)
    with self.assertRaisesRegex(ValueError, "not both"):
      self.make(batch_size=4, drop_remainder=True, pad_last_batch=True)
    with self.assertRaisesRegex(ValueError, "drops all 10 examples"):
      self.make(batch_size=16, drop_remainder=True)
    three_fields = TextExamples(ids=["0"], texts=(["a"], ["b"], ["c"]))
    with self.assertRaisesRegex(ValueError, "3 text fields"):
      self.make(three_fields)


if __name__ == "__main__":
  tf.test.main()

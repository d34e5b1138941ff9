"""Tests for adapter-only artifacts."""

import json
import os

import numpy as np
import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier


class AdapterArtifactTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = os.path.join(tf.compat.v1.test.get_temp_dir(), "adapter_artifact_test")
    cls.handle = testing.save_tiny_hub_encoder(os.path.join(root, "encoder"))
    cls.other_handle = testing.save_tiny_hub_encoder(os.path.join(root, "other"), seed=7)

  def _model(self, handle=None, adapter_size=4, num_classes=3):
    return classifier.build_classifier(
        adapted_bert.AdaptedBert(handle or self.handle, adapter_size=adapter_size),
        num_classes)

  def _inputs(self):
    ids = tf.constant([[2, 9, 10, 3], [2, 11, 3, 0]])
    return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
                input_type_ids=tf.zeros_like(ids))

  def _trained(self):
    model = self._model()
    for variable in model.trainable_variables:  # stands in for training: every value moves
      variable.assign_add(tf.random.normal(variable.shape, stddev=0.1, seed=3))
    return model

  def test_round_trip_restores_outputs_exactly(self):
    """Loading into a fresh model of the same layout reproduces the outputs bit for bit."""
    model = self._trained()
    path = adapter_artifact.save_adapters(model, self.create_tempdir().full_path + "/a",
                                          metadata={"task": "demo"})
    fresh = self._model()
    self.assertNotAllEqual(fresh(self._inputs()), model(self._inputs()))
    adapter_artifact.load_adapters(fresh, path)
    self.assertAllEqual(fresh(self._inputs()), model(self._inputs()))
    self.assertEqual(adapter_artifact.read_adapter_config(path)["metadata"], {"task": "demo"})

  def test_artifact_holds_only_the_trained_part(self):
    """The artifact stores adapters, LayerNorms and head: no frozen base weights."""
    model = self._trained()
    path = adapter_artifact.save_adapters(model, self.create_tempdir().full_path + "/a")
    names = adapter_artifact.read_adapter_config(path)["tensors"]
    self.assertLen(names, len(model.trainable_variables))
    self.assertFalse([n for n in names if "self_attention/query" in n or "word_embeddings" in n])
    self.assertIn("transformer/layer_1/feedforward_adapter/up_project/kernel", names)
    self.assertIn("embeddings/layer_norm/gamma", names)
    stored = sum(int(np.prod(shape)) for shape in names.values())
    self.assertEqual(stored, sum(int(np.prod(v.shape)) for v in model.trainable_variables))

  def test_other_base_is_refused(self):
    """Re-attaching to an encoder with other weights fails, naming both bases."""
    path = adapter_artifact.save_adapters(self._trained(),
                                          self.create_tempdir().full_path + "/a")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "another base model"):
      adapter_artifact.load_adapters(self._model(self.other_handle), path)

  def test_other_layout_is_refused(self):
    """A model with another adapter size or head cannot take the artifact."""
    path = adapter_artifact.save_adapters(self._trained(),
                                          self.create_tempdir().full_path + "/a")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "shape"):
      adapter_artifact.load_adapters(self._model(adapter_size=8), path)
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "shape"):
      adapter_artifact.load_adapters(self._model(num_classes=2), path)

  def test_corrupt_artifacts_are_clear_errors(self):
    """Missing folder, broken JSON and truncated tensors each give a clear error."""
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "missing"):
      adapter_artifact.load_adapters(self._model(), self.create_tempdir().full_path)
    path = adapter_artifact.save_adapters(self._trained(),
                                          self.create_tempdir().full_path + "/a")
    weights = os.path.join(path, adapter_artifact.WEIGHTS_FILE)
    with open(weights, "rb") as f:
      data = f.read()
    with open(weights, "wb") as f:
      f.write(data[:len(data) // 2])
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "corrupt"):
      adapter_artifact.load_adapters(self._model(), path)
    with open(os.path.join(path, adapter_artifact.CONFIG_FILE), "w", encoding="utf-8") as f:
      f.write("{not json")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "corrupt"):
      adapter_artifact.load_adapters(self._model(), path)

  def test_config_is_plain_json(self):
    """The config records the AdaptedBert arguments and the base fingerprint."""
    path = adapter_artifact.save_adapters(self._trained(),
                                          self.create_tempdir().full_path + "/a")
    with open(os.path.join(path, adapter_artifact.CONFIG_FILE), encoding="utf-8") as f:
      config = json.load(f)
    self.assertEqual(config["adapted_bert"]["adapter_size"], 4)
    self.assertLen(config["base_fingerprint"], 64)


if __name__ == "__main__":
  tf.test.main()

"""Tests for the adapter artifact format (saving models to it: models/saving_test.py)."""

import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.hub import adapter_artifact

_TENSORS = {"embeddings/layer_norm/gamma": np.ones([4], np.float32),
            "head/0/kernel": np.arange(8, dtype=np.float32).reshape(4, 2)}
_HEAD = dict(kind="classifier", num_classes=2, pooling="mean", dropout_rate=0.1,
             label_names=["no", "yes"])


class AdapterArtifactFormatTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, directory=None, **config):
    directory = directory or os.path.join(self.create_tempdir().full_path, "artifact")
    return adapter_artifact.write_artifact(directory, dict(dict(head=_HEAD), **config), _TENSORS)

  def test_round_trip(self):
    """The config comes back with the format version and tensor shapes, the tensors exactly."""
    path = self._write(metadata={"task": "demo"})
    config = adapter_artifact.read_adapter_config(path)
    self.assertEqual(config["format_version"], adapter_artifact.FORMAT_VERSION)
    self.assertEqual(config["tensors"], {"embeddings/layer_norm/gamma": [4],
                                         "head/0/kernel": [4, 2]})
    self.assertEqual(config["metadata"], {"task": "demo"})
    tensors = adapter_artifact.read_tensors(path)
    self.assertEqual(set(tensors), set(_TENSORS))
    for key, value in _TENSORS.items():
      self.assertAllEqual(tensors[key], value)

  def test_non_empty_folder_that_is_no_artifact_is_never_deleted(self):
    """A folder with other files is refused (and kept) unless overwrite=True."""
    folder = self.create_tempdir().full_path
    user_file = os.path.join(folder, "thesis.tex")
    with open(user_file, "w", encoding="utf-8") as f:
      f.write("years of work")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "holds other files, not an adapter artifact.*"
                                "overwrite=True"):
      self._write(folder)
    self.assertTrue(os.path.isfile(user_file))
    adapter_artifact.write_artifact(folder, {}, _TENSORS, overwrite=True)
    self.assertTrue(os.path.isfile(user_file))  # Only the artifact's own files are written.
    self.assertEqual(adapter_artifact.read_adapter_config(folder)["format_version"], 2)

  def test_an_artifact_and_an_empty_folder_are_replaced(self):
    """Saving again over an artifact, or into an empty folder, needs no overwrite."""
    folder = self.create_tempdir().full_path
    self._write(folder, metadata={"run": 1})
    self._write(folder, metadata={"run": 2})
    self.assertEqual(adapter_artifact.read_adapter_config(folder)["metadata"], {"run": 2})

  @parameterized.named_parameters(("missing", None, "missing"),
                                  ("not_json", "{not json", "corrupt"),
                                  ("future", json.dumps({"format_version": 9}), "reads \\[1, 2\\]"))
  def test_bad_configs_are_clear_errors(self, content, message):
    """A missing, corrupt or unknown-version config is an AdapterArtifactError saying so."""
    folder = self.create_tempdir().full_path
    if content is not None:
      with open(os.path.join(folder, adapter_artifact.CONFIG_FILE), "w",
                encoding="utf-8") as f:
        f.write(content)
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, message):
      adapter_artifact.read_adapter_config(folder)

  def test_truncated_tensors_are_a_clear_error(self):
    path = self._write()
    weights = os.path.join(path, adapter_artifact.WEIGHTS_FILE)
    with open(weights, "rb") as f:
      data = f.read()
    with open(weights, "wb") as f:
      f.write(data[:len(data) // 2])
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "corrupt"):
      adapter_artifact.read_tensors(path)

  def test_swapped_weights_file_is_refused_naming_both_files(self):
    """A weights file of another artifact with the same layout does not match the checksum
    the config records: refused, naming the weights file and the config."""
    path = self._write()
    other = adapter_artifact.write_artifact(
        os.path.join(self.create_tempdir().full_path, "other"), dict(head=_HEAD),
        {key: value + 1 for key, value in _TENSORS.items()})
    self.assertStartsWith(adapter_artifact.read_adapter_config(path)["checksums"][
        adapter_artifact.WEIGHTS_FILE], "sha256:")
    weights = os.path.join(path, adapter_artifact.WEIGHTS_FILE)
    os.replace(os.path.join(other, adapter_artifact.WEIGHTS_FILE), weights)
    with self.assertRaisesRegex(
        adapter_artifact.AdapterArtifactError,
        f"{weights}.*is not the weights file "
        f"{os.path.join(path, adapter_artifact.CONFIG_FILE)} was saved with.*swapped"):
      adapter_artifact.read_tensors(path)

  def test_artifact_without_checksum_loads_with_a_warning(self):
    """Artifacts saved before checksums still load; a warning says how to record one."""
    path = self._write()
    config_path = os.path.join(path, adapter_artifact.CONFIG_FILE)
    with open(config_path, encoding="utf-8") as f:
      config = json.load(f)
    del config["checksums"]
    with open(config_path, "w", encoding="utf-8") as f:
      json.dump(config, f)
    with self.assertLogs(level="WARNING") as logs:
      tensors = adapter_artifact.read_tensors(path)
    self.assertAllEqual(tensors["head/0/kernel"], _TENSORS["head/0/kernel"])
    self.assertIn("no checksum", "\n".join(logs.output))

  def test_format_1_and_headless_artifacts_cannot_describe_their_task(self):
    """Format 1 says how to migrate; an artifact without head says to use load_adapters."""
    v1 = dict(format_version=1, base_fingerprint="f" * 64, adapted_bert={"handle": "/base"})
    self.assertEqual(adapter_artifact.base_fingerprint(v1), "f" * 64)
    self.assertEqual(adapter_artifact.base_handle(v1), "/base")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                r"format_version 1.*load_adapters.*save_adapters"):
      adapter_artifact.require_task_description(v1, "/a", "load_task_model")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "does not describe its head.*load_adapters"):
      adapter_artifact.require_task_description(
          dict(format_version=2, head=None), "/a", "load_task_model")

  def test_changed_base_weights_are_whatever_is_not_adapter_set_or_head(self):
    keys = ["head/0/kernel", "embeddings/layer_norm/gamma",
            "transformer/layer_3/feedforward_adapter/up_project/bias",
            "transformer/layer_3/output_layer_norm/beta",
            "transformer/layer_3/self_attention/query/kernel", "pooler_transform/bias"]
    self.assertEqual(adapter_artifact.changed_base_weights(dict(tensors=keys)),
                     ["pooler_transform/bias", "transformer/layer_3/self_attention/query/kernel"])

  def test_preprocessing_config(self):
    """PreprocessingConfig round-trips through its dict; a handle can replace the recorded."""
    preprocessing = adapter_artifact.PreprocessingConfig("/p", ["a", "b"], 64)
    self.assertEqual(preprocessing.text_fields, ("a", "b"))
    self.assertEqual(adapter_artifact.PreprocessingConfig.from_dict(
        json.loads(json.dumps(preprocessing.to_dict()))), preprocessing)
    config = dict(preprocessing=preprocessing.to_dict())
    self.assertEqual(adapter_artifact.preprocessing_config(config, "/a", "/q").handle, "/q")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "no preprocessing"):
      adapter_artifact.preprocessing_config(dict(preprocessing=None), "/a")
    for fields in ((), ("a", "b", "c"), "text"):
      with self.assertRaisesRegex(ValueError, "one or two"):
        adapter_artifact.PreprocessingConfig("/p", fields)
    with self.assertRaisesRegex(ValueError, "seq_length"):
      adapter_artifact.PreprocessingConfig("/p", seq_length=1)

  def test_label_names_of_a_head(self):
    """Recorded names; class ids when none were recorded; None for a regression head."""
    self.assertEqual(adapter_artifact.label_names(_HEAD), ("no", "yes"))
    self.assertEqual(adapter_artifact.label_names(dict(num_classes=3)), ("0", "1", "2"))
    self.assertIsNone(adapter_artifact.label_names(dict(num_classes=1, label_names=None)))


if __name__ == "__main__":
  tf.test.main()

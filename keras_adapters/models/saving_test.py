"""Tests for saving task models as adapter artifacts and rebuilding them."""

import json
import os
import shutil

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.utils import precision

_LABELS = ("neg", "neu", "pos")


def _bert(model):
  (bert,) = [layer for layer in model.layers if isinstance(layer, adapted_bert.AdaptedBert)]
  return bert


class SavingTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.other_handle = testing.tiny_hub_handle(seed=7)
    cls.preprocessing = adapter_artifact.PreprocessingConfig(
        testing.tiny_preprocess_handle(), ("text",), 12)

  def _model(self, handle=None, adapter_size=4, num_classes=3, **kwargs):
    return classifier.build_classifier(
        adapted_bert.AdaptedBert(handle or self.handle, adapter_size=adapter_size, **kwargs),
        num_classes, pooling="mean")

  def _inputs(self):
    ids = tf.constant([[2, 9, 10, 3], [2, 11, 3, 0]])
    return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
                input_type_ids=tf.zeros_like(ids))

  def _trained(self, model=None):
    model = model or self._model()
    for variable in model.trainable_variables:  # stands in for training: every value moves
      variable.assign_add(tf.random.normal(variable.shape, stddev=0.1, seed=3))
    return model

  def _path(self):
    return os.path.join(self.create_tempdir().full_path, "adapters")

  def _save(self, model, path=None, **kwargs):
    return saving.save_adapters(model, path or self._path(), label_names=_LABELS,
                                preprocessing=self.preprocessing, **kwargs)

  def test_round_trip_restores_outputs_exactly(self):
    """Loading into a fresh model of the same layout reproduces the outputs bit for bit."""
    model = self._trained()
    path = saving.save_adapters(model, self._path(), metadata={"task": "demo"})
    fresh = self._model()
    self.assertNotAllEqual(fresh(self._inputs()), model(self._inputs()))
    saving.load_adapters(fresh, path)
    self.assertAllEqual(fresh(self._inputs()), model(self._inputs()))
    self.assertEqual(adapter_artifact.read_adapter_config(path)["metadata"], {"task": "demo"})

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_artifact_loads_anywhere(self, name, epsilon):
    """A model trained under a mixed policy saves float32 tensors: they load exactly into a
    float32 model (near in output) and, under the policy, rebuild the same model (exported
    from the artifact, it serves float32: `serving/task_export_test`)."""
    with precision.policy_scope(name):
      model = self._trained()
    path = self._save(model)
    self.assertEqual({value.dtype for value in adapter_artifact.read_tensors(path).values()},
                     {np.dtype(np.float32)})
    float32_model = self._model()
    saving.load_adapters(float32_model, path)
    for mixed_variable, variable in zip(model.variables, float32_model.variables):
      self.assertAllEqual(mixed_variable, variable)
    logits = model(self._inputs())
    self.assertEqual(logits.dtype, tf.float32)
    # Measured up to 0.8 epsilons.
    self.assertLess(layers_testing.mixed_precision_gap(
        logits, float32_model(self._inputs()), epsilon), 3)
    with precision.policy_scope(name):
      self.assertAllEqual(saving.load_task_model(path)(self._inputs()), logits)

  def test_artifact_holds_only_the_trained_part(self):
    """The artifact stores adapters, LayerNorms and head: no frozen base weights."""
    model = self._trained()
    names = adapter_artifact.read_adapter_config(self._save(model))["tensors"]
    self.assertLen(names, len(model.trainable_variables))
    self.assertFalse([n for n in names if "self_attention/query" in n or "word_embeddings" in n])
    self.assertIn("transformer/layer_1/feedforward_adapter/up_project/kernel", names)
    self.assertIn("embeddings/layer_norm/gamma", names)
    stored = sum(int(np.prod(shape)) for shape in names.values())
    self.assertEqual(stored, sum(int(np.prod(v.shape)) for v in model.trainable_variables))

  def test_config_describes_base_adapters_head_and_preprocessing(self):
    """Format 2 records what load_task_model needs, as plain JSON."""
    path = self._save(self._trained(), metadata={"task": "demo"})
    with open(os.path.join(path, adapter_artifact.CONFIG_FILE), encoding="utf-8") as f:
      config = json.load(f)
    self.assertEqual(config["format_version"], 2)
    self.assertEqual(config["base"]["handle"], self.handle)
    self.assertLen(config["base"]["fingerprint"], 64)
    self.assertEqual(config["base"]["activation"], "gelu")
    self.assertEqual(config["adapter_name"], "default")
    self.assertEqual(config["adapter_config"],
                     adapter_config.AdapterConfig(adapter_size=4).to_dict())
    self.assertEqual(config["head"], dict(kind="classifier", num_classes=3, pooling="mean",
                                          dropout_rate=0.1, label_names=list(_LABELS)))
    self.assertEqual(config["preprocessing"], self.preprocessing.to_dict())

  def test_label_names_must_fit_the_head(self):
    with self.assertRaisesRegex(ValueError, "label_names.*3 logits"):
      saving.save_adapters(self._model(), self._path(), label_names=["a", "b"])

  def test_load_task_model_rebuilds_the_task(self):
    """From the artifact alone: the same outputs, head description and preprocessing."""
    model = self._trained(self._model(adapter_size=3, adapter_config=adapter_config.AdapterConfig(
        adapter_size=3, activation="tanh", leave_out=(0,))))
    path = self._save(model)
    rebuilt = saving.load_task_model(path)
    self.assertAllClose(rebuilt(self._inputs()), model(self._inputs()), atol=1e-6)
    self.assertEqual(rebuilt.head_config, classifier.HeadConfig(3, "mean", 0.1, _LABELS))
    self.assertEqual(rebuilt.preprocessing_config, self.preprocessing)
    bert = _bert(rebuilt)
    self.assertEqual(bert.adapter_config.leave_out, (0,))
    self.assertLen(bert.encoder.adapters, 2)

  def test_freeze_below_adapters_round_trips_with_the_trained_part(self):
    """AdapterDrop's training: the artifact keeps the config's field (and, as for any set,
    every LayerNorm, the frozen ones at the base's values); the rebuilt task computes the same
    outputs and trains the same variables."""
    config = adapter_config.AdapterConfig(adapter_size=3, leave_out=(0,),
                                          freeze_below_adapters=True)
    model = self._trained(self._model(adapter_size=3, adapter_config=config))
    path = self._save(model)
    self.assertIn("transformer/layer_0/output_layer_norm/gamma",
                  adapter_artifact.read_adapter_config(path)["tensors"])
    rebuilt = saving.load_task_model(path)
    self.assertEqual(_bert(rebuilt).adapter_config, config)
    self.assertAllClose(rebuilt(self._inputs()), model(self._inputs()), atol=1e-6)
    self.assertLen(rebuilt.trainable_variables, len(model.trainable_variables))

  def test_load_task_model_takes_a_moved_base_and_checks_it(self):
    """A base that moved is passed as base_handle; another base is refused."""
    path = self._save(self._trained())
    moved = os.path.join(self.create_tempdir().full_path, "encoder")
    shutil.copytree(self.handle, moved)
    config_path = os.path.join(path, adapter_artifact.CONFIG_FILE)
    with open(config_path, encoding="utf-8") as f:
      config = json.load(f)
    config["base"]["handle"] = os.path.join(moved, "gone")
    with open(config_path, "w", encoding="utf-8") as f:
      json.dump(config, f)
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "base_handle="):
      saving.load_task_model(path)
    self.assertEqual(saving.load_task_model(path, base_handle=moved).output_shape, (None, 3))
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "another base model"):
      saving.load_task_model(path, base_handle=self.other_handle)

  def test_format_1_artifacts_still_load_into_a_built_model(self):
    """A format-1 artifact loads with load_adapters; load_task_model says how to migrate."""
    model = self._trained()
    path = saving.save_adapters(model, self._path())
    config_path = os.path.join(path, adapter_artifact.CONFIG_FILE)
    with open(config_path, encoding="utf-8") as f:
      config = json.load(f)
    # What format 1 wrote: the AdaptedBert config and the fingerprint, nothing else.
    v1 = dict(format_version=1, adapted_bert=dict(handle=self.handle, adapter_size=4),
              base_fingerprint=config["base"]["fingerprint"], tensors=config["tensors"],
              metadata={})
    with open(config_path, "w", encoding="utf-8") as f:
      json.dump(v1, f)
    fresh = self._model()
    saving.load_adapters(fresh, path)
    self.assertAllEqual(fresh(self._inputs()), model(self._inputs()))
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "format_version 1"):
      saving.load_task_model(path)

  def test_other_base_is_refused(self):
    """Re-attaching to an encoder with other weights fails, naming both bases."""
    path = saving.save_adapters(self._trained(), self._path())
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "another base model"):
      saving.load_adapters(self._model(self.other_handle), path)

  def test_every_reader_refuses_a_weights_file_swapped_with_another_task(self):
    """Two artifacts of one layout with their weights files swapped: load_adapters and
    load_task_model refuse, naming both files (export_task_from_artifact too:
    `serving/task_export_test`)."""
    path = self._save(self._trained())
    other = self._save(self._trained(self._model()))
    weights = os.path.join(path, adapter_artifact.WEIGHTS_FILE)
    shutil.copyfile(os.path.join(other, adapter_artifact.WEIGHTS_FILE), weights)
    message = (f"{weights}.*is not the weights file "
               f"{os.path.join(path, adapter_artifact.CONFIG_FILE)} was saved with")
    for read in (lambda: saving.load_adapters(self._model(), path),
                 lambda: saving.load_task_model(path)):
      with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, message):
        read()

  def test_other_layout_is_refused(self):
    """A model with another adapter size or head cannot take the artifact."""
    path = saving.save_adapters(self._trained(), self._path())
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "shape"):
      saving.load_adapters(self._model(adapter_size=8), path)
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "shape"):
      saving.load_adapters(self._model(num_classes=2), path)

  def test_saving_into_a_folder_of_other_files_is_refused(self):
    """save_adapters never deletes a folder that is not an artifact, unless overwrite=True."""
    folder = self.create_tempdir().full_path
    with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as f:
      f.write("mine")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, "overwrite=True"):
      saving.save_adapters(self._trained(), folder)
    self.assertEqual(os.listdir(folder), ["notes.txt"])
    saving.save_adapters(self._trained(), folder, overwrite=True)
    self.assertCountEqual(os.listdir(folder), ["notes.txt", adapter_artifact.CONFIG_FILE,
                                               adapter_artifact.WEIGHTS_FILE])

  def test_each_model_saves_its_own_adapter_set(self):
    """Two tasks on one base: each model's artifact holds its own set, whichever is active."""
    model_a = self._trained()
    bert = _bert(model_a)
    bert.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2))
    bert.train_adapter("b")
    model_b = self._trained(classifier.build_classifier(bert, 2))
    path_b = saving.save_adapters(model_b, self._path(), label_names=["x", "y"])
    bert.set_adapter("default")
    path_a = self._save(model_a)
    self.assertEqual(adapter_artifact.read_adapter_config(path_b)["adapter_name"], "b")
    for path, model in ((path_a, model_a), (path_b, model_b)):
      self.assertAllClose(saving.load_task_model(path)(self._inputs()), model(self._inputs()),
                          atol=1e-6)

  def test_top_k_artifact_holds_the_trained_base_layers(self):
    """With tuning top_k the artifact holds what trained in the encoder, and rebuilds."""
    model = self._trained(self._model(adapter_size=None, tuning="top_k", top_k=1))
    path = self._save(model)
    names = adapter_artifact.read_adapter_config(path)["tensors"]
    self.assertIn("transformer/layer_1/self_attention/query/kernel", names)
    self.assertNotIn("transformer/layer_0/self_attention/query/kernel", names)
    self.assertAllClose(saving.load_task_model(path)(self._inputs()), model(self._inputs()),
                        atol=1e-6)


if __name__ == "__main__":
  tf.test.main()

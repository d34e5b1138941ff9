"""Reruns into an existing run folder: the same run is resumed or returned, anything else is
refused with the settings that differ; a comparison never reuses runs of other settings.

One tiny run (the tiny random encoder, 18 training examples, 3 steps) is trained in
`setUpClass`; each test copies its folder and reruns into the copy.
"""

import dataclasses
import json
import os
import shutil
from unittest import mock

import tensorflow as tf

from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import errors

_NOT_TRAINED = mock.patch.object(trainer_lib.Trainer, "_train_loop",
                                 side_effect=AssertionError("trained again"))


class RerunTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "rerun_settings_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    cls.spec, cls.splits = testing.colour_task()
    cls.config = testing.run_config()
    cls.run_dir = os.path.join(cls.root, "run")
    cls.results = classification.run_task(cls.spec, cls.splits, cls.config, cls.run_dir,
                                       progress_bar=False)

  def _copy(self):
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self.run_dir, model_dir)
    return model_dir

  def _rerun(self, model_dir, spec=None, splits=None, config=None, **kwargs):
    return classification.run_task(spec or self.spec, splits or self.splits,
                                config or self.config, model_dir, progress_bar=False, **kwargs)

  def test_the_run_records_what_defines_it(self):
    with open(os.path.join(self.run_dir, run_records.RUN_FILE), encoding="utf-8") as f:
      record = json.load(f)
    self.assertEqual((record["task"], record["label_names"], record["train_examples"]),
                     ("colours", list(testing.LABEL_NAMES), 18))
    self.assertEqual(record["train_fingerprint"],
                     classification.data_fingerprint(self.splits["train"]))
    self.assertRegex(record["base_fingerprint"], "^[0-9a-f]{64}$")
    # Every field that changes what is learnt, none of those that only say how it runs.
    self.assertEqual(set(record["config"]),
                     set(config_definitions.SETTINGS) - set(config_definitions.EXECUTION_SETTINGS))

  def test_same_settings_return_the_run_without_training(self):
    model_dir = self._copy()
    # The checkpoint interval only says how the run executes: it may change.
    with _NOT_TRAINED:
      results = self._rerun(model_dir, config=self.config.replace(
          checkpoint_every_steps=1))
    self.assertEqual(results, json.loads(json.dumps(self.results)))

  def test_other_settings_are_refused_naming_them(self):
    model_dir = self._copy()
    other_task = dataclasses.replace(self.spec, name="topics")
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                f"{model_dir} holds a run with other settings: "
                                r"task 'colours' there, 'topics' now\. Use a new "
                                "model_dir=<folder> for the new settings"):
      self._rerun(model_dir, spec=other_task)
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                r"learning_rate=0\.01 there, learning_rate=0\.001 now; "
                                r"epochs=1\.0 there, epochs=3\.0 now\."):
      self._rerun(model_dir, config=self.config.replace(epochs=3.0,
                                                         learning_rate=1e-3))
    texts = list(self.splits["train"].texts[0])
    texts[0] = "w0 w1"
    changed = dict(self.splits, train=dataclasses.replace(self.splits["train"],
                                                          texts=(texts,)))
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                r"training data of 18 examples \(sha256:.*\) there, 18 "):
      self._rerun(model_dir, splits=changed)
    with open(os.path.join(model_dir, run_records.RESULTS_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(self.results)))

  def test_a_setting_the_base_cannot_take_is_refused_before_anything_is_written(self):
    """LoRA leaving out a layer the two-layer base lacks is refused by its setting's name
    before run.json or the export folder is written; the corrected run then trains there."""
    root = self.create_tempdir().full_path
    model_dir, export_dir = os.path.join(root, "run"), os.path.join(root, "run", "export")
    config = self.config.replace(method="lora")
    with self.assertRaisesRegex(errors.UsageError, r"^lora_leave_out=\[2\] names layers \[2\] "
                                "that the encoder does not have: it has layers 0..1.$"):
      self._rerun(model_dir, config=config.replace(lora_leave_out=[2]), export_dir=export_dir)
    self.assertFalse(os.path.exists(model_dir))
    results = self._rerun(model_dir, config=config.replace(lora_leave_out=[1]))
    self.assertEqual(results["config"]["lora_leave_out"], [1])

  def test_an_interrupted_run_resumes_only_with_its_settings(self):
    model_dir = self._copy()
    os.remove(os.path.join(model_dir, run_records.RESULTS_FILE))
    os.remove(os.path.join(model_dir, trainer_lib.COMPLETION_MARKER))
    with self.assertRaisesRegex(run_records.RunSettingsError, "seed=0 there, seed=1 now"):
      self._rerun(model_dir, config=self.config.replace(seed=1))
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_records.RESULTS_FILE)))

  def test_a_finished_run_exports_when_asked_later(self):
    model_dir = self._copy()
    export_dir = os.path.join(self.create_tempdir().full_path, "export")
    checkpoint = tf.train.latest_checkpoint(model_dir) + ".index"
    trained_at = os.path.getmtime(checkpoint)
    with _NOT_TRAINED:
      results = self._rerun(model_dir, export_dir=export_dir)
    self.assertEqual(results["export_dir"], export_dir)
    self.assertEqual(results["metrics"], self.results["metrics"])
    self.assertEqual(os.path.getmtime(checkpoint), trained_at)
    served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](text=tf.constant(self.splits["test"].texts[0]))["probabilities"]
    self.assertEqual(served.shape, (6, 3))
    self.assertTrue(os.path.isfile(os.path.join(export_dir, "adapters", "adapter_config.json")))
    # Asked again: it is recorded and complete, nothing is exported twice.
    with mock.patch.object(classification.ClassificationTask, "export",
                           side_effect=AssertionError("exported")):
      self.assertEqual(self._rerun(model_dir, export_dir=export_dir)["export_dir"], export_dir)

  def test_a_finished_run_scores_a_new_split_without_training(self):
    model_dir = self._copy()
    extra = testing.examples(4, seed=7, labelled=False, prefix="u")
    with _NOT_TRAINED:
      results = self._rerun(model_dir, splits=dict(self.splits, unlabelled=extra))
    self.assertEqual(results["metrics"], self.results["metrics"])
    self.assertEqual(results["predictions"]["unlabelled"]["ids"], ["u0", "u1", "u2", "u3"])

  def test_folders_of_earlier_code_are_checked_on_what_they_record(self):
    """A finished run without run.json is compared on results.json; checkpoints without
    either cannot be checked and are refused."""
    model_dir = self._copy()
    os.remove(os.path.join(model_dir, run_records.RUN_FILE))
    with self.assertRaisesRegex(run_records.RunSettingsError, "epochs=1.0 there, epochs=2.0"):
      self._rerun(model_dir, config=self.config.replace(epochs=2.0))
    with _NOT_TRAINED:
      self.assertEqual(self._rerun(model_dir)["metrics"], self.results["metrics"])
    os.remove(os.path.join(model_dir, run_records.RESULTS_FILE))
    os.remove(os.path.join(model_dir, run_records.RUN_FILE))
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                f"{model_dir} holds checkpoints but no run.json"):
      self._rerun(model_dir)

  def test_a_comparison_refuses_runs_of_other_settings_before_training(self):
    """The folder of an earlier comparison run with --epochs=1 is refused by a comparison
    with epochs=3 before any run starts; its table is left as it was."""
    root = self.create_tempdir().full_path
    runs, results_dir = os.path.join(root, "runs"), os.path.join(root, "results")
    shutil.copytree(self.run_dir, os.path.join(runs, "adapters-seed0"))
    splits = dict(train=self.splits["train"], test=self.splits["test"])
    base = self.config.replace(learning_rate=1e-3)
    with mock.patch.dict(method_comparison.METHODS,
                         adapters=dict(tuning="adapters", adapter_size=4, learning_rate=1e-2)):
      first = method_comparison.compare_methods(self.spec, splits, base, ["adapters"], [0],
                                                runs, results_dir, num_layers=2)
      self.assertEqual(first["rows"][0]["scores"],
                       [100 * self.results["metrics"]["test"]["accuracy"]])
      def must_not_run(*args, **kwargs):
        raise AssertionError("a run started")
      with self.assertRaisesRegex(run_records.RunSettingsError,
                                  "adapters-seed0 holds a run with other settings: "
                                  r"epochs=1\.0 there, epochs=3\.0 now"):
        method_comparison.compare_methods(
            self.spec, splits, base.replace(epochs=3.0), ["adapters"], [0], runs,
            results_dir, num_layers=2, run_fn=must_not_run)
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["epochs"], 1.0)


if __name__ == "__main__":
  tf.test.main()

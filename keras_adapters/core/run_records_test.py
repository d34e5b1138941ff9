"""Tests of the run records: one comparison of run definitions for every task kind."""

import os

import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.utils import atomic_io


def _definition(**settings):
  config = config_definitions.ExperimentConfig.from_settings(
      hub_handle="hub", preprocess_handle="preprocess", **settings)
  return dict(task="topics", label_names=["a", "b"], train_examples=10,
              train_fingerprint="sha256:" + "0" * 64, base_fingerprint="base",
              config=config.definition())


class RunRecordsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def test_a_new_folder_or_the_same_run_passes(self):
    run_records.check_run_dir(self.model_dir, _definition())
    run_records.write_definition(self.model_dir, _definition())
    run_records.write_definition(self.model_dir, _definition(seed=3))  # The first stays.
    run_records.check_run_dir(self.model_dir, _definition())

  def test_every_difference_is_named(self):
    run_records.write_definition(self.model_dir, _definition())
    other = dict(_definition(learning_rate=1e-3, leave_out=[1]), task="colours",
                 train_examples=9, base_fingerprint="other")
    with self.assertRaisesRegex(
        run_records.RunSettingsError,
        r"holds a run with other settings: task 'topics' there, 'colours' now; training data "
        r"of 10 examples \(sha256:0{12}\) there, 9 \(sha256:0{12}\) now; another "
        r"base encoder \(its weights differ\); leave_out=\[\] there, leave_out=\[1\] now; "
        r"learning_rate=0.0003 there, learning_rate=0.001 now\. Use a new model_dir"):
      run_records.check_run_dir(self.model_dir, other)

  def test_records_from_before_the_adapter_settings_read_as_today(self):
    """Older records held AdapterConfig fields without flags in `adapter_config`, and no
    precision or XLA settings: they read as the values those runs had."""
    today = _definition(mh_adapter=False, adapter_activation="swish")
    old_config = {name: value for name, value in today["config"].items()
                  if name not in ("mh_adapter", "adapter_activation", "mixed_precision",
                                  "jit_compile", "leave_out", "scaling")}
    old_config["adapter_config"] = dict(mh_adapter=False, activation="swish")
    atomic_io.write_json(os.path.join(self.model_dir, run_records.RUN_FILE),
                         dict(today, config=old_config))
    run_records.check_run_dir(self.model_dir, today)
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                "mh_adapter=False there, mh_adapter=True now"):
      run_records.check_run_dir(self.model_dir, _definition(adapter_activation="swish"))

  def test_checkpoints_without_a_record_are_refused(self):
    checkpoint = tf.train.Checkpoint(step=tf.Variable(1))
    checkpoint.save(os.path.join(self.model_dir, "ckpt"))
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                "holds checkpoints but no run.json"):
      run_records.check_run_dir(self.model_dir, _definition())

  def test_each_session_is_added_to_those_recorded(self):
    before = dict(command="an older session", code=dict(commit="0" * 40))
    first = run_records.record_session(self.model_dir, [before])
    self.assertEqual(first[0], before)  # A run's earlier sessions start a new file.
    self.assertEqual(set(first[1]), {"command", "code", "packages", "date_utc", "machine"})
    second = run_records.record_session(self.model_dir, [])  # The file is what counts now.
    self.assertEqual(second[:2], first)
    self.assertLen(second, 3)


if __name__ == "__main__":
  tf.test.main()

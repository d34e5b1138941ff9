"""`run_classification --keras=3`: a run on the TensorFlow backend (in this process) and one
on JAX with two host devices (a subprocess, as a user runs it), both on the tiny TF Hub base;
and the one-line refusals of settings the Keras 3 path lacks and of a backend it cannot use."""

import json
import os
import subprocess
import sys
from unittest import mock

import tensorflow as tf

from experiments import testing as cli_testing
from keras_adapters.cli import keras_choice
from keras_adapters.cli import run_classification
from keras_adapters.keras3 import training_testing


class Keras3CliTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tf.compat.v1.test.get_temp_dir()
    cls.data_path = cli_testing.write_two_class_csv(os.path.join(cls.root, "keras3_two.csv"))
    cls.hub_handle, cls.preprocess_handle = training_testing.tiny_handles()

  def _argv(self, model_dir, *extra):
    return ["run_classification", "--keras=3", f"--data_path={self.data_path}",
            f"--hub_handle={self.hub_handle}", f"--preprocess_handle={self.preprocess_handle}",
            f"--max_seq_length={training_testing.SEQ_LENGTH}", "--epochs=1", "--batch_size=8",
            "--max_train_examples=0", f"--model_dir={model_dir}", *extra]

  def test_tensorflow_run_scores_and_exports(self):
    model_dir = self.create_tempdir().full_path
    printed = cli_testing.run_main(run_classification.main,
                                   self._argv(model_dir, "--backend=tensorflow", "--adapter_size=4"))
    self.assertRegex(printed, r"\ntest: accuracy \d+\.\d\d%")
    self.assertIn("/export/saved_model (strings in, probabilities out)", printed)
    served = tf.saved_model.load(os.path.join(model_dir, "export", "saved_model")).signatures[
        "serving_default"](text=tf.constant(["w1 w2 w3", "w25 w30"]))
    self.assertAllClose(tf.reduce_sum(served["probabilities"], axis=-1), [1.0, 1.0])
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    self.assertEqual((results["keras"], results["backend"]), (3, "tensorflow"))

  def test_jax_run_on_two_devices(self):
    model_dir = self.create_tempdir().full_path
    environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    result = subprocess.run(
        [sys.executable, "-m", "keras_adapters.cli.run_classification",
         *self._argv(model_dir, "--backend=jax", "--adapter_size=4")[1:]],
        capture_output=True, text=True, env=environ, timeout=900, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertRegex(result.stdout, r"\ntest: accuracy \d+\.\d\d%")
    self.assertIn("adapter-only artifact); the serving SavedModel needs --backend=tensorflow",
                  result.stdout)
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    self.assertEqual((results["backend"], results["devices"]), ("jax", 2))
    self.assertTrue(os.path.exists(os.path.join(model_dir, "export", "adapters",
                                                "adapter_config.json")))

  def test_refusals_are_one_line_before_any_work(self):
    model_dir = os.path.join(self.create_tempdir().full_path, "never_made")
    cases = {
        ("--method=lora", "--lora_target_modules=query,pooler"): "pooler",
        ("--adapter_config={\"is_parallel\": true}",): "is_parallel",
        ("--strategy=mirrored",): "--strategy='mirrored'",
        ("--methods=adapters,lora",): "--keras=3 trains one --method",
        ("--backend=jax",): "Keras was loaded on 'tensorflow'",
    }
    for extra, named in cases.items():
      status, lines = cli_testing.cli_error(run_classification.main,
                                            self._argv(model_dir, *extra))
      self.assertEqual(status, 2, extra)
      self.assertLen(lines, 1, extra)
      self.assertIn(named, lines[0], extra)
    argv = self._argv(model_dir)
    argv.remove("--keras=3")
    status, lines = cli_testing.cli_error(run_classification.main, argv + ["--backend=jax"])
    self.assertEqual((status, lines), (2, [
        "--backend=jax picks Keras 3's backend: add --keras=3, or drop --backend (Keras 2 runs "
        "on TensorFlow)."]))
    with mock.patch.object(keras_choice.importlib.util, "find_spec", return_value=None):
      status, lines = cli_testing.cli_error(run_classification.main,
                                            self._argv(model_dir, "--backend=jax"))
    self.assertEqual((status, lines), (2, [
        "--backend=jax: jax is not installed; install it (pip install 'keras-adapters[jax]') "
        "or pick the other --backend."]))
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()

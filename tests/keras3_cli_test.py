"""`run_classification --keras=3`: a run on the TensorFlow backend (in this process) and one
on JAX with two host devices (a subprocess, as a user runs it) stopped by SIGTERM and
resumed, both on the tiny TF Hub base; and the one-line refusals of settings the Keras 3 path
lacks and of a backend it cannot use.
`run_glue --keras=3` on a sentence-pair task and STS-B (regression), stopped by SIGTERM and
resumed, and the refusals of run_glue, run_squad and run_automl (in a subprocess: their flags
clash with run_classification's here)."""

import json
import os
import subprocess
from unittest import mock

import tensorflow as tf

from experiments import testing as cli_testing
from keras_adapters.cli import interruption_testing
from keras_adapters.cli import keras_choice
from keras_adapters.cli import run_classification
from keras_adapters.data import glue
from keras_adapters.data import glue_testing
from keras_adapters.keras3 import checkpoints
from keras_adapters.keras3 import tf_hub_bert
from keras_adapters.keras3 import training_testing
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A child that runs, for each script of argv[1] (JSON: script → command lines), its `main` on
# each command line, in-process as `cli.run` does, and prints each exit status and message
# lines. The scripts' flags clash (--task): each one's flags, and the keras_adapters.cli modules
# that defined them, go before the next is imported, which so defines its own afresh.
_REFUSALS = """
import importlib, json, sys
from absl import flags
from experiments import testing as cli_testing
reports = {}
for script, argvs in json.loads(sys.argv[1]).items():
  names, modules = set(flags.FLAGS), set(sys.modules)
  main = importlib.import_module("keras_adapters.cli." + script).main
  reports[script] = [cli_testing.cli_error(main, argv) for argv in argvs]
  for name in set(flags.FLAGS) - names:
    delattr(flags.FLAGS, name)
  for name in set(sys.modules) - modules:
    if name.startswith("keras_adapters.cli."):
      del sys.modules[name]
print(json.dumps(reports))
"""


def _environ(**extra):
  """This process's environment for a Keras 3 child: without the Keras 2 switch."""
  environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  return dict(environ, TF_CPP_MIN_LOG_LEVEL="2", **extra)


class Keras3CliTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tf.compat.v1.test.get_temp_dir()
    cls.data_path = cli_testing.write_two_class_csv(os.path.join(cls.root, "keras3_two.csv"))
    cls.hub_handle, cls.preprocess_handle = training_testing.tiny_handles()
    # The base converted here first, on TensorFlow: what that proves is kept for the session
    # (`hub.proofs`), so that every run's conversion, here and in the children, reads it
    # rather than probing the base again (5 CPU seconds in a JAX child, whose probes' eager
    # ops compile one by one), whichever test of the session converted it first.
    tf_hub_bert.from_tf_hub(cls.hub_handle)

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

  def test_jax_run_on_two_devices_stopped_by_sigterm_resumes(self):
    """Two JAX host devices, as a user runs it: SIGTERM after the first checkpoint ends the
    run in one line with status 143, and the same command resumes it to its results and
    artifact. (That a resumed run ends as one not stopped, on two JAX devices, is
    `keras3.training_test`'s.)"""
    model_dir = self.create_tempdir().full_path
    # Ten epochs of compiled steps (100) after the first checkpoint: time for the signal to
    # land before training ends when the cores are busy.
    command = warm_python.command("-m", "keras_adapters.cli.run_classification",
               *self._argv(model_dir, "--backend=jax", "--adapter_size=4", "--epochs=10",
                           "--batch_size=2", "--checkpoint_every_steps=1")[1:])
    environ = _environ(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    checkpoint = os.path.join(model_dir, checkpoints.CHECKPOINT_FILE)
    self.assertRegex(
        interruption_testing.stopped_by_sigterm(self, command, checkpoint, timeout=600,
                                                cwd=_REPO_ROOT, env=environ),
        rf"^run_classification.py: Stopped by SIGTERM at step \d+ of 100, saved in "
        rf"{checkpoint}: rerun the same command to resume from it.$")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "results.json")))

    resumed = subprocess.run(command, cwd=_REPO_ROOT, env=environ, capture_output=True,
                             text=True, timeout=900, check=False)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertRegex(resumed.stdout, r"\ntest: accuracy \d+\.\d\d%")
    self.assertIn("adapter-only artifact); the serving SavedModel needs --backend=tensorflow",
                  resumed.stdout)
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    self.assertEqual((results["backend"], results["devices"]), ("jax", 2))
    self.assertLen(results["train_losses"], 10)
    self.assertTrue(os.path.exists(os.path.join(model_dir, "export", "adapters",
                                                "adapter_config.json")))

  def test_refusals_are_one_line_before_any_work(self):
    model_dir = os.path.join(self.create_tempdir().full_path, "never_made")
    cases = {
        ("--adapter_config={\"original_ln_after\": false}",): "original_ln_after",
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


class Keras3GlueTest(tf.test.TestCase):

  def test_glue_pairs_and_regression_stopped_by_sigterm_resume_to_the_keras2_records(self):
    """MRPC (sentence pairs) and STS-B (regression), exported; SIGTERM after MRPC's first
    checkpoint ends the run in one line with status 143, and the same command resumes and
    writes what a Keras 2 run writes: glue_results.json, the submission files, the exports."""
    root = self.create_tempdir().full_path
    data_dir, model_dir = os.path.join(root, "glue"), os.path.join(root, "runs")
    export_dir = os.path.join(root, "exports")
    for task in ("mrpc", "stsb"):
      glue_testing.write_tiny_glue(data_dir, task, num_examples=8)
    hub_handle, preprocess_handle = training_testing.tiny_handles()
    command = warm_python.command(os.path.join("experiments", "run_glue.py"), "--keras=3",
               "--task=mrpc,stsb", f"--data_dir={data_dir}", f"--model_dir={model_dir}",
               f"--export_dir={export_dir}", f"--hub_handle={hub_handle}",
               f"--preprocess_handle={preprocess_handle}",
               f"--max_seq_length={training_testing.SEQ_LENGTH}", "--adapter_size=4",
               "--epochs=20", "--batch_size=2", "--checkpoint_every_steps=1")
    checkpoint = os.path.join(model_dir, "mrpc", "run", checkpoints.CHECKPOINT_FILE)
    self.assertRegex(
        interruption_testing.stopped_by_sigterm(self, command, checkpoint, timeout=600,
                                                cwd=_REPO_ROOT, env=_environ()),
        rf"^run_glue.py: Stopped by SIGTERM at step \d+ of \d+, saved in {checkpoint}: "
        "rerun the same command to resume from it.$")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "stsb")))

    resumed = subprocess.run(command, cwd=_REPO_ROOT, env=_environ(), capture_output=True,
                             text=True, timeout=900, check=False)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    with open(os.path.join(model_dir, "glue_results.json"), encoding="utf-8") as f:
      table = json.load(f)
    self.assertEqual({task: sorted(entry["metrics"]["validation"])
                      for task, entry in table.items()},
                     {task: sorted(glue.glue_task(task).metrics) for task in ("mrpc", "stsb")})
    self.assertCountEqual(os.listdir(os.path.join(model_dir, "submission")),
                          ["MRPC.tsv", "STS-B.tsv"])
    with open(os.path.join(model_dir, "stsb", "run", "results.json"), encoding="utf-8") as f:
      stsb = json.load(f)
    self.assertEqual((stsb["keras"], stsb["backend"], len(stsb["train_losses"])),
                     (3, "tensorflow", 20))
    served = tf.saved_model.load(os.path.join(export_dir, "stsb", "saved_model")).signatures[
        "serving_default"](sentence1=tf.constant(["w1 w2"]), sentence2=tf.constant(["w3"]))
    self.assertEqual(served["scores"].shape, (1,))
    for task in ("mrpc", "stsb"):
      self.assertTrue(os.path.exists(os.path.join(export_dir, task, "adapters",
                                                  "adapter_config.json")))

  def test_refusals_of_run_glue_run_squad_and_run_automl_are_one_line(self):
    """run_glue --keras=3 refuses --sweep, --methods and settings Keras 3 lacks before any
    work; run_squad and run_automl refuse --keras=3 naming the command lines that take it."""
    model_dir = os.path.join(self.create_tempdir().full_path, "never_made")
    glue_argv = ["run_glue", "--keras=3", "--task=rte", f"--model_dir={model_dir}",
                 f"--data_dir={model_dir}"]
    # One child for the three scripts (`_REFUSALS`): a Python and TensorFlow start, not three.
    argvs = {
        "run_glue": [glue_argv + ["--sweep"], glue_argv + ["--methods=adapters,lora"],
                     glue_argv + ["--strategy=mirrored"]],
        "run_squad": [["run_squad", "--keras=3", f"--model_dir={model_dir}"]],
        "run_automl": [["run_automl", "--keras=3", f"--model_dir={model_dir}"]],
    }
    result = subprocess.run(warm_python.command("-c", _REFUSALS, json.dumps(argvs)),
                            cwd=_REPO_ROOT, env=_environ(), capture_output=True, text=True,
                            timeout=600, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    reports = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(reports["run_glue"][:2], [
        [2, ["--sweep runs on Keras 2; --keras=3 trains one --method per task: drop --sweep "
             "or --keras=3."]],
        [2, ["--methods runs on Keras 2; --keras=3 trains one --method per task: drop "
             "--methods or --keras=3."]]])
    status, lines = reports["run_glue"][2]
    self.assertEqual((status, len(lines)), (2, 1))
    self.assertIn("--strategy='mirrored'", lines[0])
    keras2_only = [2, [
        "--keras=3: this command line trains on Keras 2 only; --keras=3 is taken by "
        "keras-adapters-classify (run_classification.py) and keras-adapters-glue "
        "(run_glue.py): drop --keras=3 here."]]
    self.assertEqual(reports["run_squad"], [keras2_only])
    self.assertEqual(reports["run_automl"], [keras2_only])
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()

"""End-to-end tests of experiments/run_glue.py on tiny GLUE files and a tiny random encoder.

The script runs in a subprocess, as a user runs it: its absl flags would clash with those of
other experiment scripts imported into the test process, and its errors must reach the user
as one line, not a traceback. `setUpClass` runs it once on all nine tasks (training and
evaluating each) and once more to export CoLA's finished run; the tests read what it wrote.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.data import glue
from keras_adapters.data import glue_submission
from keras_adapters.data import glue_testing
from keras_adapters.analysis import sweep
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRIPT = os.path.join(_REPO_ROOT, "experiments", "run_glue.py")
_NUM_EXAMPLES = 8
_SEQ_LENGTH = 16
_QUICK_FLAGS = ("--adapter_size=4", "--epochs=1", f"--batch_size={_NUM_EXAMPLES}",
                f"--max_seq_length={_SEQ_LENGTH}", "--learning_rate=1e-3")

# Task -> evaluation split -> the metrics GLUE reports for it, the selection metric first.
_EXPECTED_METRICS = {
    "cola": dict(validation=["matthews_corrcoef"]),
    "sst2": dict(validation=["accuracy"]),
    "mrpc": dict(validation=["f1", "accuracy"]),
    "stsb": dict(validation=["spearman", "pearson"]),
    "qqp": dict(validation=["f1", "accuracy"]),
    "mnli": dict(validation_matched=["accuracy"], validation_mismatched=["accuracy"]),
    "qnli": dict(validation=["accuracy"]),
    "rte": dict(validation=["accuracy"]),
    "wnli": dict(validation=["accuracy"]),
}
# Task -> the GLUE server files of its test sets; the MNLI model also predicts AX.
_EXPECTED_SUBMISSION = {
    "cola": ["CoLA.tsv"], "sst2": ["SST-2.tsv"], "mrpc": ["MRPC.tsv"], "stsb": ["STS-B.tsv"],
    "qqp": ["QQP.tsv"], "mnli": ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"], "qnli": ["QNLI.tsv"],
    "rte": ["RTE.tsv"], "wnli": ["WNLI.tsv"],
}


def _run_script(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  return subprocess.run(warm_python.command(_SCRIPT, *args), cwd=_REPO_ROOT, env=env,
                        capture_output=True, text=True, check=False)


def _read_text(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def _read_json(path):
  return json.loads(_read_text(path))


class RunGlueTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "run_glue_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    cls.data_dir = os.path.join(cls.root, "glue")
    for task in (*glue.GLUE_TASKS, "ax"):
      glue_testing.write_tiny_glue(cls.data_dir, task, num_examples=_NUM_EXAMPLES)
    cls.model_flags = (f"--hub_handle={testing.tiny_hub_handle()}",
                       f"--preprocess_handle={testing.tiny_preprocess_handle(_SEQ_LENGTH)}",
                       *_QUICK_FLAGS)
    cls.model_dir = os.path.join(cls.root, "runs")
    cls.export_dir = os.path.join(cls.root, "exports")
    # `all` is the paper's eight tasks; WNLI is added by name.
    cls.training = cls._run_glue("--task=all,wnli")
    cls.cola_checkpoint = os.path.join(cls.model_dir, "cola", "run", "ckpt-1.index")
    cls.cola_trained_at = os.path.getmtime(cls.cola_checkpoint)
    cls.export = cls._run_glue("--task=cola", f"--export_dir={cls.export_dir}")

  @classmethod
  def _run_glue(cls, *args):
    return _run_script(f"--data_dir={cls.data_dir}", f"--model_dir={cls.model_dir}",
                       *cls.model_flags, *args)

  def _assert_succeeded(self, process):
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])

  def _assert_serves(self, export_dir, task, submission_file):
    """The SavedModel serves the raw test strings and agrees with the submitted labels."""
    spec = glue.glue_task(task)
    test = glue.read_glue_split(self.data_dir, task, "test")
    serve = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"]
    probabilities = serve(**{field: tf.constant(texts)
                             for field, texts in zip(spec.text_fields, test.texts)}
                          )["probabilities"].numpy()
    self.assertEqual(probabilities.shape, (_NUM_EXAMPLES, spec.num_classes))
    self.assertAllClose(probabilities.sum(axis=-1), np.ones(_NUM_EXAMPLES), atol=1e-5)
    submitted = [line.split("\t")[1] for line in _read_text(submission_file).splitlines()[1:]]
    served = glue_submission.format_predictions(task, probabilities.argmax(axis=-1))
    # Serving packs to the full length and the evaluation to the longest text; a random
    # model's near-ties may fall either way, clear decisions may not.
    sorted_probabilities = np.sort(probabilities, axis=-1)
    clear = sorted_probabilities[:, -1] - sorted_probabilities[:, -2] > 1e-4
    self.assertEqual(np.array(served)[clear].tolist(), np.array(submitted)[clear].tolist())
    self.assertTrue(os.path.isdir(os.path.join(export_dir, "adapters")))

  def test_every_task_trains_and_reports_its_metrics(self):
    self._assert_succeeded(self.training)
    results = _read_json(os.path.join(self.model_dir, "glue_results.json"))
    self.assertCountEqual(results, _EXPECTED_METRICS)
    markdown = _read_text(os.path.join(self.model_dir, "glue_results.md"))
    for task, splits in _EXPECTED_METRICS.items():
      with self.subTest(task=task):
        entry = results[task]
        self.assertEqual({split: sorted(values) for split, values in entry["metrics"].items()},
                         {split: sorted(names) for split, names in splits.items()})
        for split, names in splits.items():
          scores = entry["metrics"][split]
          self.assertTrue(all(-1.0 <= scores[name] <= 1.0 for name in names), scores)
          # Printed and tabled in the task's metric order.
          printed = ", ".join(f"{name} {100 * scores[name]:.2f}" for name in names)
          self.assertIn(f"{task} {split}: {printed}\n", self.training.stdout)
          self.assertIn(f"| {task} | {split} | {printed} |", markdown)
        self.assertGreater(entry["parameters"]["trainable"], 0)
        self.assertIsNone(entry["trial"])
        self.assertEqual(entry["config"]["adapter_size"], 4)
        self.assertEqual(entry["submission"], _EXPECTED_SUBMISSION[task])

  def test_submission_files_have_the_server_names_and_every_test_row(self):
    self._assert_succeeded(self.training)
    submission_dir = os.path.join(self.model_dir, "submission")
    names = [name for files in _EXPECTED_SUBMISSION.values() for name in files]
    self.assertCountEqual(os.listdir(submission_dir), names)
    glue_submission.check_glue_submission(submission_dir, {name: _NUM_EXAMPLES
                                                           for name in names})
    rows = [line.split("\t")
            for line in _read_text(os.path.join(submission_dir, "STS-B.tsv")).splitlines()[1:]]
    self.assertEqual([index for index, _ in rows], [str(i) for i in range(_NUM_EXAMPLES)])
    self.assertTrue(all(0.0 <= float(score) <= 5.0 for _, score in rows))

  def test_exporting_a_finished_run_serves_raw_strings_without_training(self):
    """A single-sentence task, exported after its run had finished."""
    self._assert_succeeded(self.export)
    self.assertEqual(os.path.getmtime(self.cola_checkpoint), self.cola_trained_at)
    self.assertEqual(_read_json(os.path.join(self.model_dir, "glue_results.json"))["cola"][
        "export_dir"], os.path.join(self.export_dir, "cola"))
    self._assert_serves(os.path.join(self.export_dir, "cola"), "cola",
                        os.path.join(self.model_dir, "submission", "CoLA.tsv"))

  def test_sweep_selects_records_and_exports_the_best(self):
    """A 2-point sweep on a sentence-pair task."""
    model_dir = os.path.join(self.root, "sweep_runs")
    export_dir = os.path.join(self.root, "sweep_exports")
    process = _run_script(
        f"--data_dir={self.data_dir}", f"--model_dir={model_dir}", *self.model_flags,
        "--task=rte", f"--export_dir={export_dir}", "--sweep",
        "--sweep_learning_rates=1e-3,1e-2", "--sweep_epochs=1", "--sweep_adapter_sizes=4",
        "--sweep_seeds=0")
    self._assert_succeeded(process)
    sweep_dir = os.path.join(model_dir, "rte", "sweep")
    summary = _read_json(os.path.join(sweep_dir, sweep.SWEEP_JSON))
    names = ["learning_rate=0.001,epochs=1,adapter_size=4,seed=0",
             "learning_rate=0.01,epochs=1,adapter_size=4,seed=0"]
    self.assertEqual([trial["name"] for trial in summary["trials"]], names)
    self.assertEqual((summary["selection_split"], summary["selection_metric"]),
                     ("validation", "accuracy"))
    scores = [trial["metrics"]["validation"]["accuracy"] for trial in summary["trials"]]
    choice = summary["choice"]
    self.assertEqual(choice["trial"], names[int(scores[1] > scores[0])])
    self.assertEqual(choice["export_dir"], os.path.join(export_dir, "rte"))
    rows = [line for line in _read_text(os.path.join(sweep_dir, sweep.SWEEP_MARKDOWN)
                                        ).splitlines() if line.startswith("| ")][2:]
    self.assertLen(rows, 2)
    self.assertLen([row for row in rows if row.startswith("| **best** |")], 1)
    self.assertEqual(_read_json(os.path.join(model_dir, "glue_results.json"))["rte"]["trial"],
                     choice["trial"])
    # The best trial's rerun predicted the test set and exported the model it trained.
    best = _read_json(os.path.join(sweep_dir, sweep.BEST_DIR, "results.json"))
    self.assertEqual(best["metrics"], summary["trials"][names.index(choice["trial"])][
        "metrics"])
    self.assertEqual(best["config"], choice["config"])
    self._assert_serves(os.path.join(export_dir, "rte"), "rte",
                        os.path.join(model_dir, "submission", "RTE.tsv"))

  def test_missing_task_folder_is_a_one_line_error_before_any_training(self):
    data_dir = os.path.join(self.root, "only_cola")
    glue_testing.write_tiny_glue(data_dir, "cola", num_examples=_NUM_EXAMPLES)
    model_dir = os.path.join(self.root, "missing_runs")
    process = _run_script(f"--data_dir={data_dir}", f"--model_dir={model_dir}",
                          *self.model_flags, "--task=cola,rte")
    self.assertEqual(process.returncode, 2)
    self.assertNotIn("Traceback", process.stderr)
    message = process.stderr.strip().splitlines()[-1]
    self.assertStartsWith(message, "run_glue.py: error: There is no folder "
                          f"{os.path.join(data_dir, 'RTE')}")
    for hint in ("download_glue_data.py", "<data_dir>/RTE/{train.tsv,dev.tsv,test.tsv}",
                 "--tfds_data_dir"):
      self.assertIn(hint, message)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()

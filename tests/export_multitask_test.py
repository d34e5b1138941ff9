"""End to end: two tasks trained with the classification CLI, one multi-task SavedModel built
by `experiments/export_multitask.py` from their artifacts, served in a fresh Python process in
which keras_adapters cannot be imported, with the same answers as each task's own SavedModel.

The models are the tiny random encoder and preprocessing of `keras_adapters.hub.testing`; the
data two small CSV files written here. The export CLI and the serving process run as
subprocesses, as a user runs them.
"""

import json
import os
import subprocess
import sys
import textwrap

from absl import flags
from absl.testing import flagsaver
import numpy as np
import tensorflow as tf

from experiments import run_classification
from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

FLAGS = flags.FLAGS
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SEQ_LENGTH = 16
# Two tasks, each learnable from its own words.
_TASKS = dict(
    reviews=dict(columns=("review", "sentiment"), labels=("bad", "good", "meh"), words=0),
    topics=dict(columns=("text", "topic"), labels=("politics", "sport"), words=30))
_TEXTS = ["w1 w2 w3", "w45 w50", "w31 w32 w33 w34", "w5 unknown w40", ""]

# Runs in the fresh process: no keras_adapters, only TensorFlow and tensorflow-text.
_SERVE = textwrap.dedent("""
    import importlib.util, json, os, sys
    sys.path = [p for p in sys.path
                if not os.path.isdir(os.path.join(p or os.getcwd(), "keras_adapters"))]
    # An editable install may also find the package through a finder of its own.
    sys.meta_path = [f for f in sys.meta_path if "__editable__" not in f.__module__]
    assert importlib.util.find_spec("keras_adapters") is None, "keras_adapters is importable"
    import tensorflow as tf
    import tensorflow_text  # Registers the preprocessing models' ops.
    request = json.loads(sys.argv[1])
    multitask = tf.saved_model.load(request["multitask"])
    texts = tf.constant(request["texts"])
    answers = {"routed": {k: v.numpy().tolist() for k, v in multitask.signatures["routed"](
        task=tf.constant(request["tasks"]), text=texts).items() if k != "label"}}
    for name, (column, path) in request["single"].items():
      own = tf.saved_model.load(path).signatures["serving_default"](**{column: texts})
      shared = multitask.signatures[name](**{column: texts})
      answers[name] = dict(own=own["probabilities"].numpy().tolist(),
                           shared=shared["probabilities"].numpy().tolist())
    print(json.dumps(answers))
""")


def _write_csv(path, columns, labels, words, count=24):
  rng = np.random.default_rng(words)
  with open(path, "w", encoding="utf-8") as f:
    f.write(",".join(columns) + "\n")
    for i in range(count):
      group = testing.TINY_WORDS[words + 10 * (i % len(labels)):][:10]
      f.write(f"{' '.join(rng.choice(group, size=4))},{labels[i % len(labels)]}\n")
  return path


def _run(args):
  return subprocess.run(warm_python.command(*args), capture_output=True, text=True, check=False,
                        cwd=_ROOT)


class ExportMultitaskTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "export_multitask_test")
    os.makedirs(cls.root, exist_ok=True)
    hub_handle = testing.tiny_hub_handle()
    preprocess_handle = testing.tiny_preprocess_handle(_SEQ_LENGTH)
    cls.exports = {}
    for name, task in _TASKS.items():
      model_dir = os.path.join(cls.root, name)
      text_column, label_column = task["columns"]
      data_path = _write_csv(os.path.join(cls.root, f"{name}.csv"), task["columns"],
                             task["labels"], task["words"])
      argv = ["run_classification", f"--data_path={data_path}",
              f"--text_column={text_column}", f"--label_column={label_column}",
              f"--hub_handle={hub_handle}", f"--preprocess_handle={preprocess_handle}",
              f"--model_dir={model_dir}", f"--split_manifest={model_dir}/split.json",
              # A batch larger than the training split: its one step is traced once (a last,
              # smaller batch was a second trace of the step, ~1.5 CPU seconds per task).
              "--max_train_examples=0", "--epochs=1", "--batch_size=32",
              f"--max_seq_length={_SEQ_LENGTH}", "--adapter_size=4", "--learning_rate=0.01"]
      with flagsaver.flagsaver():
        run_classification.main(FLAGS(argv))
      cls.exports[name] = os.path.join(model_dir, "export")

  def test_one_savedmodel_answers_like_each_tasks_own_in_a_fresh_process(self):
    """Per-task signatures and a mixed routed batch equal the single-task SavedModels to
    1e-5, loaded with tf.saved_model.load where keras_adapters cannot be imported."""
    multitask = os.path.join(self.root, "multitask")
    tasks = ",".join(f"{name}={path}/adapters" for name, path in self.exports.items())
    built = _run(["experiments/export_multitask.py", f"--tasks={tasks}",
                  f"--export_dir={multitask}"])
    self.assertEqual(built.returncode, 0, built.stderr[-3000:])
    self.assertIn(f"Wrote {multitask}", built.stdout)
    self.assertIn("signatures reviews, topics (one task each) and routed", built.stdout)

    routed_tasks = ["topics", "reviews", "reviews", "topics", "reviews"]
    request = dict(multitask=multitask, texts=_TEXTS, tasks=routed_tasks, single={
        name: (task["columns"][0], os.path.join(self.exports[name], "saved_model"))
        for name, task in _TASKS.items()})
    served = subprocess.run([sys.executable, "-c", _SERVE, json.dumps(request)],
                            capture_output=True, text=True, check=False,
                            cwd=self.create_tempdir().full_path)
    self.assertEqual(served.returncode, 0, served.stderr[-3000:])
    answers = json.loads(served.stdout.strip().splitlines()[-1])
    routed = np.array(answers["routed"]["probabilities"])
    for name, task in _TASKS.items():
      own = np.array(answers[name]["own"])
      self.assertEqual(own.shape, (len(_TEXTS), len(task["labels"])))
      self.assertAllClose(answers[name]["shared"], own, atol=1e-5, rtol=0)
      for row, routed_task in enumerate(routed_tasks):
        if routed_task == name:
          self.assertAllClose(routed[row, :own.shape[1]], own[row], atol=1e-5, rtol=0)

  def test_a_single_task_export_is_not_replaced_without_overwrite(self):
    """--export_dir naming a task's own SavedModel is refused in one line naming
    --overwrite, and that SavedModel is kept."""
    single = os.path.join(self.exports["reviews"], "saved_model")
    before = sorted(os.listdir(single))
    result = _run(["experiments/export_multitask.py",
                   f"--tasks=reviews={self.exports['reviews']}/adapters",
                   f"--export_dir={single}"])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    self.assertIn("holds a single-task export, not a multi-task export", result.stderr)
    self.assertIn("--overwrite", result.stderr)
    self.assertNotIn("Traceback", result.stderr)
    self.assertEqual(sorted(os.listdir(single)), before)

  def test_bad_tasks_flag_is_one_line_error(self):
    result = _run(["experiments/export_multitask.py", "--tasks=reviews",
                   f"--export_dir={self.create_tempdir().full_path}"])
    self.assertNotEqual(result.returncode, 0)
    self.assertIn("--tasks: 'reviews' is not name=artifact_folder", result.stderr)
    self.assertNotIn("Traceback", result.stderr)


if __name__ == "__main__":
  tf.test.main()

"""End-to-end tests of experiments/run_automl.py on a toy CSV with a tiny word embedding.

The script runs in a subprocess, as a user runs it (its absl flags would clash with those of
other experiment scripts imported into the test process), and is really killed: the search
resumes from keras-tuner's state. The embedding is a local SavedModel path, the way any TF
Hub handle other than the built-in names is given.
"""

import json
import os
import signal
import subprocess
import time

import tensorflow as tf

from keras_adapters.baselines import testing
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRIPT = os.path.join(_REPO_ROOT, "experiments", "run_automl.py")


def _read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


class RunAutomlTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tf.compat.v1.test.get_temp_dir()
    cls.data_path = os.path.join(root, "reviews.csv")
    examples = testing.toy_examples(40)
    with open(cls.data_path, "w", encoding="utf-8") as f:
      f.write("text,label\n" + "".join(
          f"{text},{testing.LABELS[label]}\n"
          for text, label in zip(examples.texts[0], examples.labels)))
    cls.embedding = os.path.join(root, "tiny_embedding")
    if not os.path.isdir(cls.embedding):
      testing.build_tiny_embedding(cls.embedding)
    cls.model_dir = os.path.join(root, "run")
    cls.results_dir = os.path.join(root, "results")
    cls.argv = [f"--data_path={cls.data_path}", f"--model_dir={cls.model_dir}",
                f"--results_dir={cls.results_dir}", f"--embeddings={cls.embedding}",
                "--max_trials=2", "--max_epochs=1", "--batch_size=8"]

  def _start(self, *extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(warm_python.command(_SCRIPT, *self.argv, *extra), cwd=_REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)

  def test_killed_search_resumes_then_merges_both_rows(self):
    """Killed after its first trial, the search resumes from keras-tuner's state (trial 0 is
    not run again), finishes its 2 trials, and both rows reach the comparison table; a
    rerun of the finished search changes nothing."""
    first_trial = os.path.join(self.model_dir, "search", "trial_0")
    process = self._start()
    deadline = time.time() + 300
    # Trial 1 exists once keras-tuner has recorded the end of trial 0; the kill lands while
    # trial 1 builds and trains, which takes seconds.
    while not os.path.exists(os.path.join(self.model_dir, "search", "trial_1", "trial.json")):
      self.assertIsNone(process.poll(), process.stdout.read() if process.poll() else "")
      self.assertLess(time.time(), deadline)
      time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    first_seconds = _read_json(os.path.join(first_trial, "seconds.json"))

    process = self._start()
    output, _ = process.communicate(timeout=600)
    self.assertEqual(process.returncode, 0, output)
    self.assertIn("Reloading Tuner", output)
    self.assertEqual(_read_json(os.path.join(first_trial, "seconds.json")), first_seconds)
    results = _read_json(os.path.join(self.results_dir, "no_bert.json"))
    self.assertEqual([(t["trial_id"], t["status"]) for t in results["trials"]],
                     [("0", "COMPLETED"), ("1", "COMPLETED")])
    self.assertEqual(results["examples"], dict(train=32, validation=4, test=4))
    summary = _read_json(os.path.join(self.results_dir, "comparison.json"))
    self.assertEqual([row["method"] for row in summary["rows"]], ["no_bert", "tfidf_logreg"])
    self.assertEqual(summary["rows"][0]["mean"], 100 * results["final"]["test"]["accuracy"])
    self.assertTrue(os.path.isfile(os.path.join(self.model_dir, "export", "saved_model.pb")))
    with open(os.path.join(self.results_dir, "comparison.md"), encoding="utf-8") as f:
      table = f.read()
    self.assertIn(table, output)
    self.assertIn("| no_bert | 1 |", table)
    self.assertIn("| tfidf_logreg | 1 |", table)

    process = self._start()
    again, _ = process.communicate(timeout=600)
    self.assertEqual(process.returncode, 0, again)
    self.assertEqual(_read_json(os.path.join(self.results_dir, "no_bert.json")), results)


if __name__ == "__main__":
  tf.test.main()

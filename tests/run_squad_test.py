"""End-to-end tests of experiments/run_squad.py on tiny SQuAD files and a tiny random encoder.

The script runs in a subprocess, as a user runs it (its absl flags would clash with those of
other experiment scripts imported into the test process). `setUpClass` runs it once, the
default single run: train, answer, score, export; then once more with `--methods=adapters`,
which finds that run finished in its folder and only writes the results table.
"""

import json
import os
import shutil
import subprocess
import tempfile

import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.data import squad
from keras_adapters.tasks import question_answering
from keras_adapters.data import squad_testing
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRIPT = os.path.join(_REPO_ROOT, "experiments", "run_squad.py")
# The adapters method's settings (`method_comparison.METHODS`), so that --methods=adapters
# finds the single run as its own.
_QUICK_FLAGS = ("--max_seq_length=32", "--doc_stride=8", "--max_query_length=4",
                "--max_answer_length=5", "--batch_size=4", "--epochs=3", "--adapter_size=64",
                "--learning_rate=0.001")


def _run_script(*args):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
  return subprocess.run(warm_python.command(_SCRIPT, *args), cwd=_REPO_ROOT, env=env,
                        capture_output=True, text=True, check=False)


def _read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


class RunSquadTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, cls.root)
    cls.train_file = squad_testing.write_tiny_squad(os.path.join(cls.root, "train.json"))
    cls.predict_file = squad_testing.write_tiny_squad(os.path.join(cls.root, "dev.json"),
                                                      context_lengths=(9, 14, 40), seed=1)
    cls.common = (f"--train_file={cls.train_file}", f"--predict_file={cls.predict_file}",
                  f"--hub_handle={testing.tiny_hub_handle()}",
                  f"--preprocess_handle={testing.tiny_preprocess_handle()}",
                  f"--feature_cache_dir={os.path.join(cls.root, 'features')}", *_QUICK_FLAGS)
    cls.runs = os.path.join(cls.root, "runs")
    cls.model_dir = os.path.join(cls.runs, "adapters")
    cls.single = _run_script(*cls.common, f"--model_dir={cls.model_dir}")
    cls.checkpoint = tf.train.latest_checkpoint(cls.model_dir)
    cls.trained_at = os.path.getmtime(cls.checkpoint + ".index") if cls.checkpoint else None
    cls.results_dir = os.path.join(cls.root, "results")
    cls.methods = _run_script(*cls.common, f"--model_dir={cls.runs}", "--methods=adapters",
                              f"--results_dir={cls.results_dir}")

  def assert_succeeded(self, process):
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])

  def test_writes_official_predictions_and_scores(self):
    self.assert_succeeded(self.single)
    predictions = _read_json(os.path.join(self.model_dir, question_answering.PREDICTIONS_FILE))
    data = squad.read_squad_file(self.predict_file, training=False)
    self.assertCountEqual(predictions, data.question_ids)
    self.assertTrue(all(isinstance(text, str) for text in predictions.values()))
    scores = _read_json(os.path.join(self.model_dir, question_answering.EVAL_RESULTS_FILE))
    self.assertEqual(scores, squad.evaluate(data.articles, predictions))
    nbest = _read_json(os.path.join(self.model_dir, question_answering.NBEST_FILE))
    self.assertEqual({qid: entries[0]["text"] for qid, entries in nbest.items()}, predictions)
    self.assertIn(f"adapters: exact_match {scores['exact_match']:.2f}, f1 {scores['f1']:.2f} "
                  "on 3 questions", self.single.stdout)

  def test_exported_savedmodel_serves_raw_strings_like_the_predictions(self):
    self.assert_succeeded(self.single)
    export_dir = os.path.join(self.model_dir, "export")
    serve = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"]
    paragraphs = _read_json(self.predict_file)["data"][0]["paragraphs"]
    result = serve(question=tf.constant([p["qas"][0]["question"] for p in paragraphs]),
                   context=tf.constant([p["context"] for p in paragraphs]))
    predictions = _read_json(os.path.join(self.model_dir, question_answering.PREDICTIONS_FILE))
    nbest = _read_json(os.path.join(self.model_dir, question_answering.NBEST_FILE))
    for index, paragraph in enumerate(paragraphs):
      qid = paragraph["qas"][0]["id"]
      start, end = int(result["answer_start"][index]), int(result["answer_end"][index])
      self.assertEqual(paragraph["context"][start:end], result["answer"][index].numpy().decode())
      scores = [entry["start_logit"] + entry["end_logit"] for entry in nbest[qid][:2]]
      # A barely trained model's near-ties may fall either way; clear answers may not.
      if len(scores) < 2 or scores[0] - scores[1] > 1e-3:
        self.assertEqual(result["answer"][index].numpy().decode(), predictions[qid])
        self.assertAllClose(result["score"][index], scores[0], atol=1e-3)
    self.assertTrue(os.path.isfile(os.path.join(export_dir, "adapters",
                                                "adapter_config.json")))

  def test_methods_table_reuses_the_finished_run(self):
    self.assert_succeeded(self.methods)
    self.assertEqual(os.path.getmtime(self.checkpoint + ".index"), self.trained_at)
    table = _read_json(os.path.join(self.results_dir, "squad_results.json"))
    self.assertEqual(list(table), ["adapters"])
    self.assertEqual(table["adapters"]["metrics"],
                     _read_json(os.path.join(self.model_dir, question_answering.EVAL_RESULTS_FILE)))
    with open(os.path.join(self.results_dir, "squad_results.md"), encoding="utf-8") as f:
      markdown = f.read()
    self.assertEqual(markdown, question_answering.results_markdown(table))
    self.assertIn("| Houlsby et al. 2019 (BERT), full fine-tuning | 90.7 |", markdown)
    self.assertIn(markdown, self.methods.stdout)

  def test_methods_on_another_budget_never_touch_the_table(self):
    """--methods into a results_dir whose table has another budget is refused before any run
    trains, naming what differs and --results_dir; the table keeps its rows."""
    self.assert_succeeded(self.methods)
    table = os.path.join(self.results_dir, "squad_results.json")
    before = _read_json(table)
    runs = self.create_tempdir().full_path
    other = _run_script(*self.common, f"--model_dir={runs}", "--methods=adapters,full",
                        f"--results_dir={self.results_dir}", "--epochs=7")
    self.assertEqual(other.returncode, 2, other.stderr[-3000:])
    self.assertRegex(other.stderr, r"squad_results.json holds results of other data or "
                     r"another budget \(--epochs=3.0 there, 7.0 now\).*--results_dir=")
    self.assertEqual(_read_json(table), before)
    self.assertEqual(os.listdir(runs), [])

  def test_bad_data_is_a_one_line_error_naming_the_question(self):
    document = _read_json(self.train_file)
    document["data"][0]["paragraphs"][1]["qas"][0]["answers"][0]["answer_start"] += 1
    bad_file = os.path.join(self.root, "bad.json")
    with open(bad_file, "w", encoding="utf-8") as f:
      json.dump(document, f)
    model_dir = os.path.join(self.root, "bad_run")
    process = _run_script(f"--train_file={bad_file}", f"--predict_file={self.predict_file}",
                          f"--model_dir={model_dir}", *self.common[2:])
    self.assertEqual(process.returncode, 2)
    self.assertNotIn("Traceback", process.stderr)
    self.assertRegex(process.stderr.strip().splitlines()[-1],
                     r"^run_squad.py: error: .*bad.json: question q1: answer_start \d+ does "
                     r"not point at its answer")
    self.assertFalse(os.path.exists(model_dir))

  def test_missing_tfds_dataset_says_what_to_supply(self):
    process = _run_script(f"--tfds_data_dir={os.path.join(self.root, 'no_tfds')}",
                          f"--model_dir={os.path.join(self.root, 'tfds_run')}",
                          *self.common[2:])
    self.assertEqual(process.returncode, 2)
    self.assertRegex(process.stderr.strip().splitlines()[-1],
                     r"^run_squad.py: error: No prepared TFDS dataset squad/v1.1 .*never "
                     r"downloaded.*\(--train_file/--predict_file\)")


if __name__ == "__main__":
  tf.test.main()

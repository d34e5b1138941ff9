"""Tests for suite: the table over tasks, aggregated on hand-made comparisons."""

import json
import os
import shutil

import tensorflow as tf

from keras_adapters.analysis import method_comparison
from keras_adapters.analysis import suite

_BASE = 20_000_000


def _row(method, scores, trainable, percent=True):
  return dict(method=method, scores=scores, seeds=list(range(len(scores))),
              mean=0.0, sem=0.0,  # Stale on purpose: the suite recomputes them.
              trainable_parameters=trainable,
              trainable_percent_of_base=100.0 * trainable / _BASE if percent else None)


def _comparison(task, rows, train_examples=2000, max_seq_length=128):
  return dict(task=task, metric="accuracy", eval_split="test", eval_examples=100,
              train_examples=train_examples, epochs=2.0, max_seq_length=max_seq_length,
              batch_size=32, rows=rows)


_COMPARISONS = dict(
    alpha=_comparison("alpha", [
        _row("adapters", [80.0, 82.0, 84.0], 600_000),
        _row("full", [81.0, 83.0, 85.0], 19_900_000),
        _row("top_k", [79.0, 80.0, 81.0], 5_000_000),
        _row("layer_norm", [70.0, 70.0, 70.0], 10_000),
        _row("lora", [81.0, 81.0, 84.0], 160_000), _row("ia3", [75.0, 76.0, 77.0], 30_000),
        _row("tfidf_logreg", [60.0], 16_000, percent=False)]),
    beta=_comparison("beta", [
        _row("adapters", [90.0, 91.0, 92.0], 700_000),
        _row("full", [95.0, 95.0, 95.0], 19_900_500),
        _row("top_k", [94.0, 96.0], 5_000_500), _row("layer_norm", [88.0, 89.0, 90.0], 10_500),
        _row("lora", [90.0, 92.0, 94.0], 160_500), _row("ia3", [85.0, 86.0, 87.0], 30_500)],
        train_examples=1500, max_seq_length=64))


class BuildSuiteTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.suite = suite.build_suite(_COMPARISONS)

  def test_cells_are_mean_and_sem_of_the_scores(self):
    cell = self.suite["cells"]["alpha"]["adapters"]
    self.assertAlmostEqual(cell["mean"], 82.0)
    self.assertAlmostEqual(cell["sem"], 2.0 / 3 ** 0.5)  # scipy.stats.sem: std (ddof 1) / sqrt(n)
    self.assertAlmostEqual(self.suite["cells"]["beta"]["top_k"]["sem"], 1.0)
    self.assertEqual(self.suite["cells"]["alpha"]["tfidf_logreg"]["sem"], 0.0)

  def test_average_over_the_tasks_that_have_the_method(self):
    average = self.suite["average"]
    self.assertAlmostEqual(average["adapters"]["mean"], (82.0 + 91.0) / 2)
    self.assertAlmostEqual(average["top_k"]["mean"], (80.0 + 95.0) / 2)
    self.assertEqual(average["tfidf_logreg"], dict(mean=60.0, tasks=1))
    self.assertEqual(self.suite["methods"],
                     ["adapters", "full", "top_k", "layer_norm", "lora", "ia3", "tfidf_logreg"])

  def test_parameters_for_serving_every_task(self):
    self.assertEqual(self.suite["base_parameters"], _BASE)
    serving = self.suite["serving"]
    # One shared base plus each task's adapters, LayerNorms and head.
    self.assertEqual(serving["adapters"]["total_parameters"], _BASE + 600_000 + 700_000)
    self.assertAlmostEqual(serving["adapters"]["base_multiple"], 1.065)
    self.assertEqual(serving["layer_norm"]["total_parameters"], _BASE + 20_500)
    self.assertEqual(serving["top_k"]["total_parameters"], _BASE + 10_000_500)
    # A whole trained model per task.
    self.assertEqual(serving["full"]["total_parameters"], 39_800_500)
    self.assertAlmostEqual(serving["full"]["base_multiple"], 1.990025)
    self.assertEqual(serving["tfidf_logreg"], dict(tasks=1, total_parameters=16_000,
                                                    base_multiple=0.0008))

  def test_a_model_per_task_counts_its_frozen_tables(self):
    no_bert = dict(_row("no_bert", [75.0], 700_000, percent=False), total_parameters=21_000_000)
    comparisons = dict(_COMPARISONS, beta=dict(
        _COMPARISONS["beta"], rows=_COMPARISONS["beta"]["rows"] + [no_bert]))
    serving = suite.build_suite(comparisons)["serving"]
    self.assertEqual(serving["no_bert"], dict(tasks=1, total_parameters=21_000_000,
                                              base_multiple=1.05))

  def test_markdown(self):
    table = suite.markdown_table(self.suite)
    self.assertIn("| alpha | accuracy | 2,000 | 2 | 128 | 82.00 ± 1.15 | 83.00 ± 1.15 | 80.00 ± 0.58 "
                  "| 70.00 ± 0.00 | 82.00 ± 1.00 | 76.00 ± 0.58 | 60.00 (1) |", table)
    self.assertIn("| beta | accuracy | 1,500 | 2 | 64 | 91.00 ± 0.58 | 95.00 ± 0.00 | "
                  "95.00 ± 1.00 (2) | 89.00 ± 0.58 | 92.00 ± 1.15 | 86.00 ± 0.58 | – |", table)
    self.assertIn("| average | | | | | 86.50 | 89.00 | 87.50 | 79.50 | 87.00 | 81.00 | "
                  "60.00 (1 of 2 tasks) |", table)
    self.assertIn("| total params, 2 tasks | | | | | 1.06× (21.3M) | 1.99× (39.8M) | "
                  "1.50× (30.0M) | 1.00× (20.0M) | 1.02× (20.3M) | 1.00× (20.1M) | "
                  "0.00× (0.0M) (1 of 2 tasks) |", table)

  def test_different_bases_are_refused(self):
    other = _comparison("gamma", [_row("adapters", [1.0], 600_000)])
    other["rows"][0]["trainable_percent_of_base"] = 1.0
    with self.assertRaisesRegex(ValueError, "different bases"):
      suite.build_suite(dict(_COMPARISONS, gamma=other))


class RunSuiteTest(tf.test.TestCase):

  def test_only_incomplete_tasks_are_compared_and_the_files_are_written(self):
    root = os.path.join(self.get_temp_dir(), "results")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "alpha"))
    with open(os.path.join(root, "alpha", "comparison.json"), "w", encoding="utf-8") as f:
      json.dump(_COMPARISONS["alpha"], f)
    # beta has no comparison at all; gamma lacks top_k.
    partial = _comparison("gamma", [row for row in _COMPARISONS["beta"]["rows"]
                                    if row["method"] != "top_k"])
    os.makedirs(os.path.join(root, "gamma"))
    with open(os.path.join(root, "gamma", "comparison.json"), "w", encoding="utf-8") as f:
      json.dump(partial, f)
    calls = []

    def run_comparison(task, comparison, methods):
      calls.append((task, comparison, methods))
      return _COMPARISONS["beta"]

    written = suite.run_suite(["alpha", "beta", "gamma"], root, run_comparison,
                              notes=dict(beta="the base saw it.", delta="not in the table"),
                              log=lambda _: 0)
    self.assertEqual(written["notes"], dict(beta="the base saw it."))
    self.assertIn("\n- `beta`: the base saw it.\n", suite.markdown_table(written))
    self.assertEqual(calls, [("beta", None, list(suite.BERT_METHODS)),
                             ("gamma", partial, ["top_k"])])
    with open(os.path.join(root, "suite.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(written)))
    with open(os.path.join(root, "suite.md"), encoding="utf-8") as f:
      self.assertEqual(f.read(), suite.markdown_table(written))
    self.assertEqual([task["task"] for task in written["tasks"]], ["alpha", "beta", "gamma"])

  def test_rerun_methods_are_compared_again_in_every_task(self):
    """`rerun` methods are compared again in complete tasks too, beside a task's missing
    ones, in the table's order of methods."""
    root = os.path.join(self.get_temp_dir(), "rerun_results")
    shutil.rmtree(root, ignore_errors=True)
    partial = _comparison("gamma", [row for row in _COMPARISONS["beta"]["rows"]
                                    if row["method"] != "top_k"])
    for task, comparison in (("alpha", _COMPARISONS["alpha"]), ("gamma", partial)):
      os.makedirs(os.path.join(root, task))
      with open(os.path.join(root, task, "comparison.json"), "w", encoding="utf-8") as f:
        json.dump(comparison, f)
    calls, logged = [], []

    def run_comparison(task, comparison, methods):
      calls.append((task, methods))
      return _COMPARISONS["alpha"] if task == "alpha" else _COMPARISONS["beta"]

    suite.run_suite(["alpha", "gamma"], root, run_comparison, log=logged.append,
                    rerun=["full", "adapters"])
    self.assertEqual(calls, [("alpha", ["adapters", "full"]),
                             ("gamma", ["adapters", "full", "top_k"])])
    self.assertIn("alpha: training full, adapters again.", logged)

  def test_missing_methods(self):
    self.assertEqual(suite.missing_methods(None), list(suite.BERT_METHODS))
    self.assertEqual(suite.missing_methods(_COMPARISONS["alpha"]), [])

  def test_a_row_at_another_rate_than_the_selected_one_is_missing(self):
    rows = [dict(row, config=dict(learning_rate=5e-5 if row["method"] == "full" else 3e-3))
            for row in _COMPARISONS["alpha"]["rows"]]
    comparison = dict(_COMPARISONS["alpha"], rows=rows)
    rates = method_comparison.SelectedRates(dict(full=1e-4, adapters=3e-3), "lr.json")
    self.assertEqual(suite.missing_methods(comparison, rates), ["full"])
    cells = suite.build_suite(dict(alpha=comparison), rates)["cells"]["alpha"]
    # adapters trained at its selected rate (before the record was read, so its row names
    # none); full at another; top_k has no selected rate.
    self.assertEqual((cells["adapters"]["learning_rate"], cells["adapters"]["learning_rate_from"]),
                     (3e-3, "lr.json"))
    self.assertEqual((cells["full"]["learning_rate"], cells["full"]["learning_rate_from"]),
                     (5e-5, None))
    self.assertIsNone(cells["top_k"]["learning_rate_from"])

if __name__ == "__main__":
  tf.test.main()

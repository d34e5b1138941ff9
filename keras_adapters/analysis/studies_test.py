"""Tests for studies: the grids, the reduction to points, and resuming a killed study.

The resumption test trains real runs of the tiny random encoder on the colour task
(`training/testing.py`); the others replace `run_task` by fakes.
"""

import dataclasses
import json
import os
import shutil

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.analysis import studies
from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.data import examples as examples_lib
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.training import trainer
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

_BASE = config_definitions.ExperimentConfig.from_settings(
    hub_handle="/nowhere/encoder", preprocess_handle="/nowhere/p", pooling="mean", epochs=2.0)


class _Killed(BaseException):
  """Stands for the process being killed: no `except Exception` catches it."""


# What `run_task` records of the sessions that made a run (`provenance.record()` each).
_FAKE_SESSIONS = [dict(command="experiments/run_analysis.py --study=init_scale")]


def _fake_results(score, trainable=100):
  return dict(metrics=dict(validation=dict(accuracy=score)),
              parameters=dict(trainable=trainable), train_seconds=60.0, total_seconds=90.0,
              provenance=_FAKE_SESSIONS)


class BuildStudyTest(parameterized.TestCase, tf.test.TestCase):

  def test_tradeoff_grid(self):
    study = studies.build_study("tradeoff", _BASE, [0, 1, 2], num_layers=6)
    points = {trial.point for trial in study.trials}
    sizes = sorted(dict(p)["adapter_size"] for p in points if dict(p)["method"] == "adapters")
    self.assertEqual(sizes, [2, 4, 8, 16, 32, 64, 128, 256])
    self.assertEqual(sorted(dict(p)["top_k"] for p in points if dict(p)["method"] == "top_k"),
                     [1, 2, 3, 4, 5, 6])
    ranks = sorted(dict(p)["lora_r"] for p in points if dict(p)["method"] == "lora")
    self.assertEqual(ranks, [1, 2, 4, 8, 16, 64])
    self.assertLen(study.trials, (8 + 6 + 2 + 6 + 1) * 3)
    for trial in study.trials:
      point = dict(trial.point)
      if point["method"] == "top_k":
        self.assertEqual(trial.config.model.adapter.top_k, point["top_k"])
        self.assertEqual(trial.config.model.adapter.tuning, "top_k")
      if point["method"] == "lora":
        self.assertEqual(trial.config.model.method, "lora")
        self.assertEqual(trial.config.model.lora.r, point["lora_r"])
        self.assertEqual(trial.config.model.lora.alpha, 8.0)  # Kept over the ranks.
        self.assertEndsWith(trial.name, f",method=lora,lora_r={point['lora_r']}")
      if point["method"] == "ia3":
        self.assertEqual(trial.config.model.method, "ia3")
    self.assertEqual(study.figure, "Figures 3-4")

  def test_adapters_trials_keep_the_names_they_had_before_other_methods(self):
    study = studies.build_study("tradeoff", _BASE, [0], num_layers=2)
    names = {dict(t.point)["method"]: t.name for t in study.trials}
    self.assertEqual(names["layer_norm"], "tuning=layer_norm,adapter_size=None,top_k=None,"
                     "adapter_init_stddev=0.01,learning_rate=0.003,epochs=2,seed=0")

  def test_paper_budget_selects_among_the_papers_learning_rates(self):
    study = studies.build_study("tradeoff", _BASE, [0], num_layers=2, paper=True)
    rates = {trial.config.trainer.learning_rate for trial in study.trials}
    self.assertEqual(rates, set(studies.PAPER_SWEEP_LEARNING_RATES))
    study = studies.build_study("learning_rate", _BASE, [0], num_layers=2, paper=True)
    self.assertEqual({trial.config.trainer.epochs for trial in study.trials}, {3.0, 20.0})

  def test_learning_rate_study_tries_each_method_at_its_own_rates(self):
    study = studies.build_study("learning_rate", _BASE, [0], num_layers=2)
    rates = {}
    for trial in study.trials:
      point = dict(trial.point)
      self.assertEqual(trial.config.trainer.learning_rate, point["learning_rate"])
      self.assertEqual(trial.settings["method"],
                       method_comparison.METHODS[point["method"]]["method"])
      rates.setdefault(point["method"], []).append(point["learning_rate"])
    self.assertEqual(rates, {method: list(values)
                             for method, values in studies.LEARNING_RATES.items()})
    self.assertEqual(rates["lora"], [3e-4, 1e-3, 3e-3, 1e-2])
    # Every method of the comparison has its rate selected by this study.
    self.assertEqual(set(rates), set(method_comparison.METHODS))

  @parameterized.parameters(*studies.STUDIES)
  def test_trials_have_distinct_folders_and_shared_settings_share_them(self, name):
    study = studies.build_study(name, _BASE, [0, 1, 2], num_layers=6)
    self.assertLen({trial.name for trial in study.trials}, len(study.trials))
    # The comparison's adapters (m=64, init 1e-2, their learning rate) are one folder everywhere.
    self.assertIn("tuning=adapters,adapter_size=64,top_k=None,adapter_init_stddev=0.01,"
                  "learning_rate=0.003,epochs=2,seed=0", {t.name for t in study.trials})

  def test_init_scale_spans_1e_7_to_1(self):
    study = studies.build_study("init_scale", _BASE, [0, 1, 2], num_layers=6)
    stddevs = sorted({trial.config.model.adapter.init_stddev for trial in study.trials})
    self.assertEqual((stddevs[0], stddevs[-1], len(stddevs)), (1e-7, 1.0, 8))

  def test_adapter_drop_freezes_below_the_adapters_of_the_upper_layers(self):
    for num_layers, dropped in ((6, [0, 1, 2, 3, 4]), (12, [0, 2, 4, 6, 8])):
      study = studies.build_study("adapter_drop", _BASE, [0], num_layers=num_layers)
      self.assertEqual([dict(trial.point)["lowest_left_out"] for trial in study.trials],
                       dropped)
      for trial, count in zip(study.trials, dropped):
        self.assertEqual((trial.settings["leave_out"], trial.settings["freeze_below_adapters"]),
                         (list(range(count)), count > 0))
    # Only the trials that leave layers out name them.
    self.assertEqual(study.trials[2].name, study.trials[0].name
                     + ",leave_out=0-1-2-3,freeze_below_adapters=True")

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "Unknown study 'nope'"):
      studies.build_study("nope", _BASE, [0], 6)
    with self.assertRaisesRegex(ValueError, "at least one seed"):
      studies.build_study("tradeoff", _BASE, [], 6)


class ReducePointsTest(tf.test.TestCase):

  def test_best_option_by_mean_over_seeds_with_sem(self):
    config = method_comparison.method_config(_BASE, "adapters", 6)
    trials = [studies.Trial((("method", "adapters"),),
                            config.replace(learning_rate=rate, seed=seed))
              for rate in (1e-4, 1e-3) for seed in (0, 1, 2)]
    scores = {1e-4: [80.0, 90.0, 70.0], 1e-3: [82.0, 84.0, 86.0]}
    outcomes = {t.name: dict(score=scores[t.config.trainer.learning_rate][t.config.trainer.seed],
                             trainable_parameters=7)
                for t in trials}
    (point,) = studies.reduce_points(trials, outcomes)
    self.assertEqual(point["option"], dict(learning_rate=1e-3, epochs=2.0))
    self.assertAlmostEqual(point["mean"], 84.0)
    self.assertAlmostEqual(point["sem"], 2.0 / 3 ** 0.5)  # std 2 (ddof 1) over sqrt(3)
    self.assertEqual((point["seeds"], point["trainable_parameters"]), ([0, 1, 2], 7))

  def test_diverged_seeds_are_counted_apart(self):
    trials = studies.build_study("init_scale", _BASE, [0, 1], 6).trials[:2]
    outcomes = {trials[0].name: dict(score=50.0, trainable_parameters=1),
                trials[1].name: dict(diverged="loss nan")}
    (point,) = studies.reduce_points(trials, outcomes)
    self.assertEqual((point["mean"], point["sem"], point["diverged"]), (50.0, 0.0, 1))
    (point,) = studies.reduce_points(trials, {trials[1].name: dict(diverged="nan")})
    self.assertIsNone(point["mean"])


class SelectedRatesTest(tf.test.TestCase):

  def _summary(self, means, complete=True):
    return dict(study="learning_rate", complete=complete, points=[
        dict(method=method, learning_rate=rate, mean=mean)
        for method, by_rate in means.items() for rate, mean in by_rate.items()])

  def test_each_method_keeps_its_best_mean(self):
    rates = studies.selected_rates(self._summary(dict(
        full={3e-5: 80.0, 1e-4: 82.0, 3e-4: 81.0},
        lora={1e-3: 70.0, 3e-3: 75.0, 1e-2: None, 3e-2: 74.0})), "lr.json")
    self.assertEqual((rates.rates, rates.source), (dict(full=1e-4, lora=3e-3), "lr.json"))

  def test_a_best_rate_at_its_grids_end_is_refused(self):
    with self.assertRaisesRegex(studies.SelectionError,
                                r"full's best rate 0.0003 is at the end of its grid "
                                r"\(3e-05, 0.0001, 0.0003\); widen LEARNING_RATES\['full'\]"):
      studies.selected_rates(self._summary(dict(full={3e-5: 80.0, 1e-4: 82.0, 3e-4: 83.0})),
                             "lr.json")

  def test_an_unfinished_or_other_study_is_refused(self):
    for summary in (self._summary(dict(full={}), complete=False),
                    dict(self._summary(dict(full={})), study="tradeoff")):
      with self.assertRaisesRegex(studies.SelectionError, "no finished learning-rate study"):
        studies.selected_rates(summary, "lr.json")

  def test_the_committed_study_selects_every_method_inside_its_grid(self):
    """The record the suite trains at: every compared method has a rate, none at an end."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "results", "airline", "analysis", "learning_rate.json")
    with open(path, encoding="utf-8") as f:
      rates = studies.selected_rates(json.load(f), "learning_rate.json").rates
    self.assertCountEqual(rates, method_comparison.METHODS)
    for method, rate in rates.items():
      self.assertIn(rate, studies.LEARNING_RATES[method][1:-1])

  def test_the_tradeoff_trains_each_method_at_its_selected_rate(self):
    rates = method_comparison.SelectedRates(dict(full=1e-4, top_k=3e-4), "lr.json")
    trials = studies.build_study("tradeoff", _BASE, [0], 6, rates=rates).trials
    by_method = {}
    for trial in trials:
      by_method.setdefault(dict(trial.point)["method"], set()).add(
          trial.config.trainer.learning_rate)
    self.assertEqual((by_method["full"], by_method["top_k"], by_method["layer_norm"]),
                     ({1e-4}, {3e-4}, {method_comparison.METHODS["layer_norm"]["learning_rate"]}))


class RunStudyTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = os.path.join(self.get_temp_dir(), self._testMethodName)
    shutil.rmtree(self.root, ignore_errors=True)
    self.spec, self.splits = testing.colour_task()

  def _study(self):
    config = testing.run_config(pooling="mean")
    return studies.Study("init_scale", "Figure 6 (right)", tuple(
        studies.Trial((("adapter_init_stddev", stddev),),
                      config.replace(adapter_init_stddev=stddev))
        for stddev in (1e-3, 1e-2)))

  def test_a_killed_study_resumes_without_training_finished_runs_again(self):
    study, summary_path = self._study(), os.path.join(self.root, "analysis", "init_scale.json")
    runs_dir = os.path.join(self.root, "runs")
    calls = []

    def killed_at_the_second_run(*args, **kwargs):
      calls.append(args[3])
      if len(calls) == 2:
        raise _Killed()
      return classification.run_task(*args, **kwargs)

    with self.assertRaises(_Killed):
      studies.run_study(study, self.spec, self.splits, runs_dir, summary_path,
                        studies.CPU_BUDGET, run_fn=killed_at_the_second_run, log=lambda _: 0)
    # The JSON was written after the first run, before the kill.
    with open(summary_path, encoding="utf-8") as f:
      written = json.load(f)
    self.assertFalse(written["complete"])
    self.assertEqual(written["budget"]["runs_finished"], 1)
    first_dir = os.path.join(runs_dir, study.trials[0].name)
    marker = os.path.join(first_dir, trainer.COMPLETION_MARKER)
    stamps = {name: os.path.getmtime(os.path.join(first_dir, name))
              for name in (trainer.COMPLETION_MARKER, run_records.RESULTS_FILE)}
    with open(marker, encoding="utf-8") as f:
      trained = json.load(f)

    lines = []
    summary = studies.run_study(study, self.spec, self.splits, runs_dir, summary_path,
                                studies.CPU_BUDGET, log=lines.append)
    self.assertIn("2 run(s), 1 finished already", lines[0])
    # The first run was returned from its folder, not trained again.
    self.assertEqual({name: os.path.getmtime(os.path.join(first_dir, name)) for name in stamps},
                     stamps)
    with open(marker, encoding="utf-8") as f:
      self.assertEqual(json.load(f), trained)
    self.assertTrue(summary["complete"])
    self.assertEqual([p["adapter_init_stddev"] for p in summary["points"]], [1e-3, 1e-2])
    budget = summary["budget"]
    self.assertEqual((budget["runs_finished"], budget["train_examples"],
                      budget["eval_examples"]), (2, 18, 6))
    self.assertGreater(budget["train_minutes"], 0)
    self.assertGreaterEqual(budget["run_minutes"], budget["train_minutes"])
    # Each run names the sessions that made it, as its folder records them: the first
    # trained in the killed session, the other in the resumed one.
    for trial, run in zip(study.trials, summary["runs"]):
      with open(os.path.join(runs_dir, trial.name, run_records.RESULTS_FILE),
                encoding="utf-8") as f:
        self.assertEqual(run[provenance.KEY], json.load(f)[provenance.KEY])
      self.assertLen(run[provenance.KEY], 1)

  def test_diverged_runs_are_recorded_and_not_run_again(self):
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    calls = []

    def run_fn(spec, splits, config, model_dir, **kwargs):
      calls.append(config.model.adapter.init_stddev)
      self.assertEqual(sorted(splits), ["train", "validation"])  # The test split stays unseen.
      if config.model.adapter.init_stddev == 1e-2:
        raise trainer.TrainingDivergedError("Training diverged at step 2: loss nan.")
      return _fake_results(0.5)

    for _ in range(2):
      summary = studies.run_study(study, self.spec, self.splits, self.root, summary_path,
                                  studies.CPU_BUDGET, run_fn=run_fn, log=lambda _: 0,
                                  note="a caveat")
    self.assertEqual(calls, [1e-3, 1e-2])  # The JSON records both: neither runs again.
    self.assertEqual(summary["budget"]["runs_diverged"], 1)
    self.assertIn("loss nan", summary["runs"][1]["diverged"])
    self.assertEqual(summary["points"][1]["diverged"], 1)
    self.assertEqual(summary["note"], "a caveat")

  def test_the_json_alone_resumes_a_study_whose_run_folders_are_gone(self):
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    calls = []

    def run_fn(spec, splits, config, model_dir, **kwargs):
      calls.append(config.model.adapter.init_stddev)
      if len(calls) == 2:
        raise _Killed()
      return _fake_results(0.75)

    arguments = (study, self.spec, self.splits, os.path.join(self.root, "runs"), summary_path,
                 studies.CPU_BUDGET)
    with self.assertRaises(_Killed):
      studies.run_study(*arguments, run_fn=run_fn, log=lambda _: 0)
    calls.append("clone")  # _fake_results wrote no folder: only the JSON knows the first run.
    lines = []
    summary = studies.run_study(*arguments, run_fn=run_fn, log=lines.append)
    self.assertEqual(calls, [1e-3, 1e-2, "clone", 1e-2])
    self.assertIn("2 run(s), 1 finished already", lines[0])
    self.assertTrue(summary["complete"])
    self.assertEqual([point["mean"] for point in summary["points"]], [75.0, 75.0])
    # The run known only from the JSON keeps the sessions recorded there.
    self.assertEqual([run[provenance.KEY] for run in summary["runs"]], [_FAKE_SESSIONS] * 2)

  def test_recorded_runs_of_other_settings_are_trained_again(self):
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    calls = []

    def run_fn(spec, splits, config, model_dir, **kwargs):
      calls.append((config.data.max_seq_length, config.model.adapter.init_stddev))
      return _fake_results(0.5)

    for length in (16, 24):
      longer = dataclasses.replace(study, trials=tuple(
          dataclasses.replace(trial, config=trial.config.replace(max_seq_length=length))
          for trial in study.trials))
      summary = studies.run_study(longer, self.spec, self.splits, self.root, summary_path,
                                  studies.CPU_BUDGET, run_fn=run_fn, log=lambda _: 0)
    self.assertEqual(calls, [(16, 1e-3), (16, 1e-2), (24, 1e-3), (24, 1e-2)])
    self.assertEqual(summary["settings"]["config"]["max_seq_length"], 24)

  def test_what_a_json_of_other_settings_holds_is_dropped(self):
    """Its runs train again and what later steps added (the ablation's spans, made from a
    model of the old settings) goes with them."""
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    run_fn = lambda *args, **kwargs: _fake_results(0.5)
    summary = studies.run_study(study, self.spec, self.splits, self.root, summary_path,
                                studies.CPU_BUDGET, run_fn=run_fn, log=lambda _: 0)
    studies.write_json(summary_path, dict(summary, ablation=dict(scores={"none": 50.0})))
    longer = dataclasses.replace(study, trials=tuple(
        dataclasses.replace(trial, config=trial.config.replace(max_seq_length=24))
        for trial in study.trials))
    summary = studies.run_study(longer, self.spec, self.splits, self.root, summary_path,
                                studies.CPU_BUDGET, run_fn=run_fn, log=lambda _: 0)
    self.assertNotIn("ablation", summary)

  def test_the_ablation_trains_again_where_its_folder_is_gone(self):
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    calls = []

    def run_fn(spec, splits, config, model_dir, **kwargs):
      calls.append(config.model.adapter.init_stddev)
      return _fake_results(0.5)

    for _ in range(2):
      studies.run_study(study, self.spec, self.splits, self.root, summary_path,
                        studies.CPU_BUDGET, run_fn=run_fn, export_trials=True,
                        log=lambda _: 0)
    self.assertEqual(calls, [1e-3, 1e-2, 1e-3, 1e-2])

  def test_later_additions_to_the_summary_are_kept(self):
    study, summary_path = self._study(), os.path.join(self.root, "study.json")
    arguments = (study, self.spec, self.splits, self.root, summary_path, studies.CPU_BUDGET)
    summary = studies.run_study(*arguments, run_fn=lambda *a, **k: _fake_results(0.5),
                                log=lambda _: 0)
    studies.write_json(summary_path, dict(summary, ablation=dict(scores={"none": 50.0})))
    summary = studies.run_study(*arguments, run_fn=lambda *a, **k: _fake_results(0.5),
                                log=lambda _: 0)
    self.assertEqual(summary["ablation"], dict(scores={"none": 50.0}))


class CommittedStudiesTest(tf.test.TestCase):

  def test_committed_studies_resume_without_their_run_folders(self):
    """Each committed study of airline, asked again with its own settings (recorded before the
    settings added since), runs nothing and writes the same runs, points and budget."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "results", "airline", "analysis")

    def must_not_run(*args, **kwargs):
      raise AssertionError("a run started")

    # The studies after it train each method at the rate the learning-rate study selected.
    with open(os.path.join(root, "learning_rate.json"), encoding="utf-8") as f:
      rates = studies.selected_rates(json.load(f), "results/airline/analysis/learning_rate.json")
    for name in ("init_scale", "tradeoff", "learning_rate"):
      with open(os.path.join(root, f"{name}.json"), encoding="utf-8") as f:
        committed = json.load(f)
      settings = committed["settings"]
      base = config_definitions.ExperimentConfig.from_settings(
          epochs=committed["budget"]["epochs"][0],
          **{field: value.replace("<cache>", paths.cache_dir())
             if isinstance(value, str) else value
             for field, value in settings["config"].items()})
      spec = examples_lib.TaskSpec(name=settings["task"], text_fields=("text",),
                                   label_names=("a", "b", "c"), metrics=(committed["metric"],))
      splits = {split: examples_lib.TextExamples(
          ids=[str(i) for i in range(count)], texts=([f"w{i}" for i in range(count)],),
          labels=np.arange(count, dtype=np.int32) % 3)
                for split, count in (("train", settings["train_examples"]),
                                     ("validation", settings["eval_examples"]))}
      summary_path = os.path.join(self.create_tempdir().full_path, f"{name}.json")
      with open(summary_path, "w", encoding="utf-8") as f:
        json.dump(committed, f)
      study = studies.build_study(name, base, [0, 1, 2], num_layers=6,
                                  rates=None if name == "learning_rate" else rates)
      # A grid may have grown past its committed record while the study reruns: only its new
      # points may be missing, and the recorded ones must resume without a run.
      recorded = {run["name"] for run in committed["runs"]}
      missing = [dict(trial.point) for trial in study.trials if trial.name not in recorded]
      if name == "learning_rate":
        recorded_points = {(point["method"], point["learning_rate"])
                           for point in committed["points"]}
        self.assertFalse({(point["method"], point["learning_rate"]) for point in missing}
                         & recorded_points)
      else:
        self.assertEqual(missing, [], name)
      study = dataclasses.replace(
          study, trials=tuple(trial for trial in study.trials if trial.name in recorded))
      summary = studies.run_study(study, spec, splits, self.create_tempdir().full_path,
                                  summary_path, studies.CPU_BUDGET, run_fn=must_not_run,
                                  log=lambda _: 0)
      for key in ("runs", "points", "budget", "note", "complete"):
        self.assertEqual(summary[key], committed[key], (name, key))


if __name__ == "__main__":
  tf.test.main()

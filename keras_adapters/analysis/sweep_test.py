"""Tests for sweep: grid expansion, trial names, selection, records, resumption and export.

`run_fn` is replaced by a fake that keeps `classification.run_task`'s contract (a folder
records its run in run.json, refuses another run, and returns the results.json it holds
without training) and leaves checkpoint-like files behind, so no model is built or trained
here; the base encoder is not read either (its fingerprint is a stand-in).
"""

import json
import os
import re
import types
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.analysis import sweep
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.data import examples as examples_lib
from keras_adapters.hub import hub_encoder
from keras_adapters.tasks import classification
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance

_SPEC = examples_lib.TaskSpec(name="toy", text_fields=("text",), label_names=("a", "b"),
                              metrics=("f1", "accuracy"))
# What a finished training leaves in its folder besides run.json and results.json.
_TRAINING_FILES = ("checkpoint", "ckpt-1.index", "ckpt-1.data-00000-of-00001",
                   "training_complete.json")
# The fingerprint of the stand-in base encoder.
_BASE = "sha256:base"


def _without_provenance(summary):
  return {key: value for key, value in summary.items() if key != provenance.KEY}


def _examples(n, labelled=True):
  return examples_lib.TextExamples(ids=[str(i) for i in range(n)],
                                   texts=([f"w{i}" for i in range(n)],),
                                   labels=np.arange(n, dtype=np.int32) % 2 if labelled else None)


_SPLITS = dict(train=_examples(10), validation=_examples(3), test=_examples(4, labelled=False))


def _base_config(**overrides):
  return config_definitions.ExperimentConfig.from_settings(**{
      **dict(hub_handle="/nowhere/encoder", preprocess_handle="/nowhere/preprocess",
             epochs=2.0, batch_size=8, max_seq_length=16), **overrides})


class _FakeBase(types.SimpleNamespace):
  """A read base that only names itself, as the sweep's records need."""

  def without_weights(self):
    return self


class _FakeRun:
  """Stands in for `classification.run_task`; `trainings` lists the calls that trained."""

  def __init__(self, score_fn):
    self.score_fn = score_fn  # config -> {split: selection metric (f1)}.
    self.calls = 0
    self.trainings = []

  def __call__(self, spec, splits, config, model_dir, export_dir=None, progress_bar=True):
    self.calls += 1
    classification.check_run_dir(spec, splits, config, model_dir)
    results_path = os.path.join(model_dir, run_records.RESULTS_FILE)
    if os.path.isfile(results_path):
      with open(results_path, encoding="utf-8") as f:
        return json.load(f)
    os.makedirs(model_dir, exist_ok=True)
    self.trainings.append(dict(model_dir=model_dir, config=config, export_dir=export_dir,
                               files=sorted(os.listdir(model_dir)), splits=list(splits),
                               progress_bar=progress_bar))
    atomic_io.write_json(os.path.join(model_dir, run_records.RUN_FILE),
                         classification.ClassificationTask(spec, splits, config).definition())
    os.makedirs(os.path.join(model_dir, "summaries"), exist_ok=True)
    for name in _TRAINING_FILES:
      atomic_io.write_text(os.path.join(model_dir, name), name)
    results = dict(
        task=spec.name, config=config.settings(),
        metrics={split: dict(f1=score, accuracy=1.0 - score)
                 for split, score in self.score_fn(config).items()},
        predictions={name: dict(ids=list(split.ids), values=[config.trainer.seed] * len(split))
                     for name, split in splits.items() if split.labels is None},
        parameters=dict(trainable=1000 + (config.model.adapter.adapter_size or 0), total=10**6,
                        trainable_percent_of_base=0.5),
        train_examples=len(splits["train"]), num_train_steps=4, train_seconds=2.0,
        seconds_per_epoch=1.0, examples_per_second=20.0, total_seconds=3.0)
    if export_dir:
      results["export_dir"] = export_dir
    atomic_io.write_json(results_path, results)
    return results


def _validation_score(scores):
  """A score_fn giving validation f1 `scores[(learning_rate, seed)]`."""
  return lambda config: dict(validation=scores[(config.trainer.learning_rate,
                                                 config.trainer.seed)])


class ExpandGridTest(parameterized.TestCase, tf.test.TestCase):

  def test_points_in_product_order_over_the_base(self):
    """The first field varies slowest; fields outside the grid keep the base values."""
    configs = sweep.expand_grid(_base_config(batch_size=4), dict(
        learning_rate=[3e-4, 3e-3], epochs=[3, 20], seed=[0, 1]))
    self.assertEqual(
        [(c.trainer.learning_rate, c.trainer.epochs, c.trainer.seed) for c in configs],
        [(lr, e, s) for lr in (3e-4, 3e-3) for e in (3, 20) for s in (0, 1)])
    self.assertEqual({(c.trainer.batch_size, c.data.max_seq_length,
                       c.model.adapter.adapter_size) for c in configs}, {(4, 16, 64)})

  @parameterized.named_parameters(
      ("empty", {}, "grid is empty"),
      ("unknown_field", dict(learning_rat=[1e-3]), "'learning_rat', which is not a setting; "
       "the settings are: adapter_size"),
      ("no_values", dict(seed=[]), "give a non-empty list"),
      ("scalar", dict(seed=0), "give a non-empty list"),
      ("string", dict(tuning="full"), "give a non-empty list"),
      ("repeated_value", dict(epochs=[3, 3.0]), "a value twice"),
      ("invalid_value", dict(learning_rate=[1e-3, -1.0]), "must be positive"))
  def test_bad_grid(self, grid, message):
    with self.assertRaisesRegex(ValueError, re.escape(message)):
      sweep.expand_grid(_base_config(), grid)

  def test_ignored_field_is_an_error(self):
    """Fine-tuning has no adapters: an adapter_size grid would run one config thrice."""
    with self.assertRaisesRegex(ValueError, "same config.*Drop those fields"):
      sweep.expand_grid(_base_config(tuning="full"), dict(adapter_size=[8, 64, 256]))

  @parameterized.named_parameters(
      ("paper_point", dict(learning_rate=3e-4, epochs=3.0, adapter_size=64, seed=0),
       "learning_rate=0.0003,epochs=3,adapter_size=64,seed=0"),
      ("small_and_fractional", dict(learning_rate=3e-5, epochs=1.5),
       "learning_rate=3e-05,epochs=1.5"),
      ("strings_and_none", dict(tuning="layer_norm", top_k=None),
       "tuning=layer_norm,top_k=None"),
      ("unsafe_characters", dict(hub_handle="https://tfhub.dev/x/1", seed=2),
       "hub_handle=https___tfhub.dev_x_1,seed=2"),
      ("list", dict(leave_out=[0, 1], seed=0), "leave_out=0-1,seed=0"))
  def test_trial_name(self, fields, expected):
    config = _base_config().replace(**fields)
    self.assertEqual(sweep.trial_name(config, list(fields)), expected)

  def test_trial_names_are_distinct_folder_names(self):
    grid = dict(learning_rate=[3e-5, 3e-4, 3e-3], epochs=[3, 20], adapter_size=[8, 64, 256],
                seed=[0, 1, 2])
    names = [sweep.trial_name(c, list(grid)) for c in sweep.expand_grid(_base_config(), grid)]
    self.assertLen(set(names), 54)
    for name in names:
      self.assertRegex(name, r"^[A-Za-z0-9._+=,-]+$")


class SelectionSplitTest(tf.test.TestCase):

  def test_prefers_validation_then_first_labelled_validation_split(self):
    self.assertEqual(sweep.selection_split_for(_SPLITS), "validation")
    mnli = dict(train=_examples(4), validation_matched=_examples(2),
                validation_mismatched=_examples(2), test_matched=_examples(2, False))
    self.assertEqual(sweep.selection_split_for(mnli), "validation_matched")

  def test_no_labelled_validation_split(self):
    splits = dict(train=_examples(4), validation=_examples(2, labelled=False),
                  test=_examples(2))
    with self.assertRaisesRegex(ValueError, "labelled validation split.*never select on the "
                                "test split"):
      sweep.selection_split_for(splits)


class RunSweepTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # The runs' folders are checked against run.json, which records the base's fingerprint.
    self.enter_context(mock.patch.object(hub_encoder, "read_hub_encoder",
                                         return_value=_FakeBase(fingerprint=_BASE)))

  def _read(self, root, name):
    with open(os.path.join(root, name), encoding="utf-8") as f:
      return json.load(f) if name.endswith(".json") else f.read()

  def test_selects_on_the_first_metric_of_the_validation_split(self):
    """f1 (the spec's first metric) on validation picks; test and accuracy do not."""
    root = self.create_tempdir().full_path
    splits = dict(_SPLITS, test=_examples(4))  # A labelled test split, scored but not used.
    scores = {1e-3: dict(validation=0.7, test=0.1), 1e-2: dict(validation=0.6, test=0.9)}
    fake = _FakeRun(lambda config: scores[config.trainer.learning_rate])
    result = sweep.run_sweep(_SPEC, splits, _base_config(), dict(learning_rate=[1e-3, 1e-2]),
                             root, run_fn=fake)
    choice = result.summary["choice"]
    self.assertEqual((choice["trial"], choice["score"]), ("learning_rate=0.001", 0.7))
    self.assertEqual(result.summary["evaluation_splits"], ["validation", "test"])
    self.assertFalse(result.summary["averaged_over_seeds"])
    # Each trial ran in its own folder, without a progress bar, and nothing was exported.
    self.assertEqual([t["model_dir"] for t in fake.trainings],
                     [os.path.join(root, "learning_rate=0.001"),
                      os.path.join(root, "learning_rate=0.01")])
    self.assertEqual({(t["export_dir"], t["progress_bar"]) for t in fake.trainings},
                     {(None, False)})
    self.assertIsNone(choice["export_dir"])
    # Every split was scored by the trials: no rerun is needed.
    self.assertFalse(os.path.exists(os.path.join(root, sweep.BEST_DIR)))
    self.assertEqual(result.best["config"]["learning_rate"], 1e-3)

  def test_ties_go_to_the_earlier_trial(self):
    fake = _FakeRun(lambda config: dict(validation=0.5))
    result = sweep.run_sweep(_SPEC, _SPLITS, _base_config(), dict(seed=[2, 0, 1]),
                             self.create_tempdir().full_path, run_fn=fake)
    self.assertEqual(result.summary["choice"]["trial"], "seed=2")

  def test_mnli_selects_on_validation_matched(self):
    splits = dict(train=_examples(4), validation_matched=_examples(2),
                  validation_mismatched=_examples(2), test=_examples(2, labelled=False))
    scores = {1e-3: 0.4, 1e-2: 0.6}
    fake = _FakeRun(lambda config: dict(
        validation_matched=scores[config.trainer.learning_rate],
        validation_mismatched=1 - scores[config.trainer.learning_rate]))
    result = sweep.run_sweep(_SPEC, splits, _base_config(), dict(learning_rate=[1e-3, 1e-2]),
                             self.create_tempdir().full_path, run_fn=fake)
    self.assertEqual(result.summary["selection_split"], "validation_matched")
    self.assertEqual(result.summary["choice"]["trial"], "learning_rate=0.01")

  def test_mean_over_seeds_picks_the_setting_then_its_best_seed(self):
    """A lucky seed does not win: 1e-3 has the best single trial, 1e-2 the best mean."""
    root = self.create_tempdir().full_path
    export_dir = os.path.join(root, "export")
    fake = _FakeRun(_validation_score({(1e-3, 0): 0.9, (1e-3, 1): 0.1, (1e-3, 2): 0.2,
                                       (1e-2, 0): 0.5, (1e-2, 1): 0.6, (1e-2, 2): 0.55}))
    grid = dict(learning_rate=[1e-3, 1e-2], seed=[0, 1, 2])
    result = sweep.run_sweep(_SPEC, _SPLITS, _base_config(), grid, root,
                             export_best_dir=export_dir, run_fn=fake)
    summary = result.summary
    self.assertTrue(summary["averaged_over_seeds"])
    self.assertEqual([(s["name"], s["trials"]) for s in summary["settings"]], [
        ("learning_rate=0.001", [f"learning_rate=0.001,seed={s}" for s in range(3)]),
        ("learning_rate=0.01", [f"learning_rate=0.01,seed={s}" for s in range(3)])])
    self.assertAllClose([s["mean_score"] for s in summary["settings"]], [0.4, 0.55])
    choice = summary["choice"]
    self.assertEqual((choice["setting"], choice["trial"], choice["score"]),
                     ("learning_rate=0.01", "learning_rate=0.01,seed=1", 0.6))
    self.assertAlmostEqual(choice["mean_score"], 0.55)
    self.assertEqual(choice["config"]["seed"], 1)
    # Trials never predict the unlabelled test split; the chosen seed does, in a rerun from a
    # copy of its folder (its run.json, checkpoints and completion marker, no results, which
    # would stop the rerun, and no summaries) that also exports it.
    export = fake.trainings[-1]
    self.assertLen(fake.trainings, 7)
    self.assertEqual({tuple(t["splits"]) for t in fake.trainings[:6]},
                     {("train", "validation")})
    self.assertEqual(export["splits"], ["train", "validation", "test"])
    self.assertEqual((export["model_dir"], export["export_dir"]),
                     (os.path.join(root, sweep.BEST_DIR), export_dir))
    self.assertEqual((export["config"].trainer.learning_rate, export["config"].trainer.seed),
                     (1e-2, 1))
    self.assertEqual(export["files"], sorted(_TRAINING_FILES + (run_records.RUN_FILE,)))
    self.assertEqual(result.best["export_dir"], export_dir)
    self.assertEqual(result.best["predictions"]["test"]["values"], [1] * 4)
    self.assertNotIn("export_dir", self._read(os.path.join(root, "learning_rate=0.01,seed=1"),
                                              run_records.RESULTS_FILE))

  def test_records(self):
    """sweep.json holds every trial and the choice; sweep.md a row per trial, one marked."""
    root = self.create_tempdir().full_path
    fake = _FakeRun(_validation_score({(1e-3, 0): 0.25, (1e-3, 1): 0.5, (1e-2, 0): 0.75,
                                       (1e-2, 1): 0.125}))
    grid = dict(learning_rate=[1e-3, 1e-2], adapter_size=[8], seed=[0, 1])
    summary = sweep.run_sweep(_SPEC, _SPLITS, _base_config(), grid, root, run_fn=fake).summary
    recorded = self._read(root, sweep.SWEEP_JSON)
    self.assertEqual(recorded, json.loads(json.dumps(summary)))
    self.assertEqual(recorded["grid"], dict(learning_rate=[1e-3, 1e-2], adapter_size=[8],
                                            seed=[0, 1]))
    self.assertEqual((recorded["selection_split"], recorded["selection_metric"]),
                     ("validation", "f1"))
    self.assertEqual(recorded["base_config"]["epochs"], 2.0)
    self.assertLen(recorded["trials"], 4)
    trial = recorded["trials"][2]
    self.assertEqual(trial["name"], "learning_rate=0.01,adapter_size=8,seed=0")
    self.assertEqual(trial["setting"], "learning_rate=0.01,adapter_size=8")
    self.assertEqual((trial["config"]["learning_rate"], trial["config"]["adapter_size"],
                      trial["config"]["seed"]), (1e-2, 8, 0))
    self.assertEqual(trial["metrics"], dict(validation=dict(f1=0.75, accuracy=0.25)))
    self.assertEqual(trial["score"], 0.75)
    self.assertEqual(trial["parameters"]["trainable"], 1008)
    self.assertEqual((trial["train_seconds"], trial["seconds_per_epoch"],
                      trial["num_train_steps"]), (2.0, 1.0, 4))
    # Means 0.375 and 0.4375: the second setting wins with its seed 0.
    self.assertEqual(recorded["choice"]["trial"], trial["name"])

    lines = self._read(root, sweep.SWEEP_MARKDOWN).splitlines()
    self.assertIn("selected on validation f1 (%) by the mean over seeds", lines[0])
    self.assertIn("Chosen: `learning_rate=0.01,adapter_size=8,seed=0`, 75.00 (setting mean "
                  "43.75)", lines[0])
    self.assertEqual(lines[2], "| chosen | learning_rate | adapter_size | seed | validation f1 "
                     "| validation accuracy | mean over seeds | trained params | s / epoch |")
    self.assertEqual(lines[3], "| --- " * 9 + "|")
    rows = lines[4:]
    self.assertLen(rows, 4)
    self.assertEqual(rows[2], "| **best** | 0.01 | 8 | 0 | 75.00 | 25.00 | 43.75 | 1,008 | 1.0 |")
    self.assertEqual(rows[0], "|  | 0.001 | 8 | 0 | 25.00 | 75.00 | 37.50 | 1,008 | 1.0 |")
    self.assertLen([row for row in rows if "**best**" in row], 1)

  def test_resume_trains_only_unfinished_trials(self):
    """Rerunning a finished sweep trains and exports nothing; a killed trial reruns alone."""
    root = self.create_tempdir().full_path
    export_dir = os.path.join(root, "export")
    fake = _FakeRun(_validation_score({(1e-3, 0): 0.5, (1e-3, 1): 0.6, (1e-2, 0): 0.7,
                                       (1e-2, 1): 0.2}))
    grid = dict(learning_rate=[1e-3, 1e-2], seed=[0, 1])

    def run():
      return _without_provenance(sweep.run_sweep(
          _SPEC, _SPLITS, _base_config(), grid, root, export_best_dir=export_dir,
          run_fn=fake).summary)

    first = run()
    self.assertLen(fake.trainings, 5)  # 4 trials and the export.
    self.assertEqual(run(), first)
    self.assertLen(fake.trainings, 5)
    os.remove(os.path.join(root, "learning_rate=0.001,seed=1", run_records.RESULTS_FILE))
    self.assertEqual(run(), first)
    self.assertEqual([t["model_dir"] for t in fake.trainings[5:]],
                     [os.path.join(root, "learning_rate=0.001,seed=1")])

  def test_resumed_sweep_with_a_new_best_exports_it(self):
    """A grown grid's new winner replaces the export; the old winner's export run is redone
    if it wins again."""
    root = self.create_tempdir().full_path
    export_dir = os.path.join(root, "export")
    fake = _FakeRun(_validation_score({(1e-3, 0): 0.5, (1e-2, 0): 0.7, (1e-1, 0): 0.9}))

    def exported_learning_rate(learning_rates):
      summary = sweep.run_sweep(_SPEC, _SPLITS, _base_config(),
                                dict(learning_rate=learning_rates), root,
                                export_best_dir=export_dir, run_fn=fake).summary
      export = fake.trainings[-1]
      self.assertEqual(export["model_dir"], os.path.join(root, sweep.BEST_DIR))
      self.assertEqual(summary["choice"]["config"]["learning_rate"],
                       export["config"].trainer.learning_rate)
      return export["config"].trainer.learning_rate

    self.assertEqual(exported_learning_rate([1e-3, 1e-2]), 1e-2)
    self.assertEqual(exported_learning_rate([1e-3, 1e-2, 1e-1]), 1e-1)
    self.assertEqual(exported_learning_rate([1e-3, 1e-2]), 1e-2)
    # Trained: 1e-3, 1e-2, export; 1e-1, export; export.
    self.assertLen(fake.trainings, 6)

  def test_trial_of_another_config_is_refused_before_any_trains(self):
    """Changed base flags must not silently reuse the trials of the old ones: the trials'
    run.json are checked before the first trial runs."""
    root = self.create_tempdir().full_path
    fake = _FakeRun(lambda config: dict(validation=0.5))
    grid = dict(learning_rate=[1e-3])
    sweep.run_sweep(_SPEC, _SPLITS, _base_config(), grid, root, run_fn=fake)
    calls, trainings = fake.calls, len(fake.trainings)  # The trial, and its test predictions.
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                r"learning_rate=0.001 holds a run with other settings: "
                                r"max_seq_length=16 there, max_seq_length=32 now"):
      sweep.run_sweep(_SPEC, _SPLITS, _base_config(max_seq_length=32),
                      dict(learning_rate=[1e-2, 1e-3]), root, run_fn=fake)
    self.assertEqual(fake.calls, calls)  # Not even the new first trial ran.
    # How a run executes may change on resumption.
    sweep.run_sweep(_SPEC, _SPLITS, _base_config(checkpoint_every_steps=7), grid, root,
                    run_fn=fake)
    self.assertLen(fake.trainings, trainings)

  def test_unlabelled_selection_split_is_an_error(self):
    with self.assertRaisesRegex(ValueError, "Cannot select on 'test'"):
      sweep.run_sweep(_SPEC, _SPLITS, _base_config(), dict(seed=[0]),
                      self.create_tempdir().full_path, run_fn=_FakeRun(None),
                      selection_split="test")


if __name__ == "__main__":
  tf.test.main()

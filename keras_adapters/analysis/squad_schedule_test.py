"""Tests of the SQuAD paper-schedule search and selection, with a stand-in for the runs."""

import os

import tensorflow as tf

from keras_adapters.analysis import squad_schedule
from keras_adapters.core import config_definitions
from keras_adapters.core import grid
from keras_adapters.data import squad
from keras_adapters.data import squad_testing
from keras_adapters.tasks import question_answering
from keras_adapters.utils import atomic_io


def _fake_f1(settings):
  """Adapters best at m=256 (over the parameter budget), then m=64, at lr 2e-3, 3 epochs; LoRA
  best at lr 1e-3, 2 epochs; full fine-tuning best at lr 1e-4, 1 epoch."""
  if settings["method"] == "lora":
    return 40 - abs(settings["epochs"] - 2) + (settings["learning_rate"] == 1e-3)
  if settings["tuning"] == "adapters":
    return 50 + settings["epochs"] + (settings["learning_rate"] == 2e-3) + (
        settings["adapter_size"] == 256)
  return 60 - settings["epochs"] + (settings["learning_rate"] == 1e-4)


class FakeRuns:
  """Records each run asked for and returns results as `run_squad` does."""

  def __init__(self, fail_at=None):
    self.calls, self.fail_at = [], fail_at

  def __call__(self, train, dev, config, squad_config, model_dir, export_dir=None):
    if len(self.calls) == self.fail_at:
      raise KeyboardInterrupt("stopped")
    self.calls.append((os.path.basename(model_dir), squad_config, dev, export_dir))
    settings = config.settings()
    return dict(metrics=dict(exact_match=_fake_f1(settings) - 10, f1=_fake_f1(settings)),
                parameters=dict(trainable=100 if settings["tuning"] == "adapters" else 10_000,
                                trainable_percent_of_base=(
                                    4.0 if settings.get("adapter_size") == 256 else 1.0)),
                train_questions=squad_config.max_train_examples,
                eval_questions=squad_config.holdout_questions or 4,
                train_seconds=60.0 * settings["epochs"],
                provenance=[dict(command=f"session of {os.path.basename(model_dir)}")])


class SquadScheduleTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    root = self.create_tempdir().full_path
    self.train = squad.read_squad_file(
        squad_testing.write_tiny_squad(os.path.join(root, "train.json")), training=True)
    self.dev = squad.read_squad_file(
        squad_testing.write_tiny_squad(os.path.join(root, "dev.json"), seed=1), training=False)
    self.config = config_definitions.ExperimentConfig.from_settings(
        hub_handle="hub", preprocess_handle="preprocess")
    self.squad_config = question_answering.SquadConfig(max_train_examples=20000)
    self.model_dir, self.results_dir = os.path.join(root, "runs"), os.path.join(root, "results")

  def _search(self, runs):
    return squad_schedule.run_search(self.train, self.config, self.squad_config, 6,
                                     self.model_dir, self.results_dir, run_squad=runs)

  def test_the_grid_is_the_issue_s(self):
    keys = [point.key for point in squad_schedule.search_points(self.config, 6)]
    self.assertLen(keys, 2 * 3 * 3 + 5 * 2 + 2 * 5 * 3)
    self.assertIn("adapters-m256-lr0.001-e3", keys)
    self.assertIn("full-lr5e-05-e2", keys)
    self.assertIn("lora-r8-lr0.002-e1", keys)
    self.assertIn("lora-r16-lr0.005-e3", keys)
    self.assertIn("full-lr0.0003-e1", keys)
    self.assertIn("full-lr0.001-e2", keys)
    self.assertIn("lora-r16-lr0.01-e3", keys)
    self.assertIn("lora-r16-lr0.02-e3", keys)

  def test_search_scores_held_out_training_questions_and_resumes_after_a_stop(self):
    with self.assertRaises(KeyboardInterrupt):
      self._search(FakeRuns(fail_at=5))
    recorded = grid.read(os.path.join(self.results_dir, squad_schedule.SEARCH_FILE), {})
    self.assertLen(recorded["points"], 5)
    runs = FakeRuns()
    search = self._search(runs)
    self.assertLen(runs.calls, 58 - 5)
    for _, squad_config, dev, export_dir in runs.calls:
      self.assertIs(dev, self.train)  # Never the dev set.
      self.assertEqual((squad_config.max_train_examples, squad_config.holdout_questions),
                       (squad_schedule.SEARCH_TRAIN_QUESTIONS,
                        squad_schedule.HOLDOUT_QUESTIONS))
      self.assertIsNone(export_dir)
    self.assertLen(search, 58)
    self.assertEqual((search["lora-r8-lr0.001-e2"]["method"],
                      search["lora-r8-lr0.001-e2"]["lora_r"]), ("lora", 8))
    self.assertEmpty(FakeRuns().calls)
    self.assertEqual(self._search(FakeRuns(fail_at=0)), search)  # Finished: nothing runs.

  def test_each_method_s_best_point_trains_on_the_budget_and_scores_the_dev_set(self):
    search = self._search(FakeRuns())
    selection = squad_schedule.select(search)
    # m=256 scores best but trains 4% of the base, over the adapters' 3%.
    self.assertGreater(search["adapters-m256-lr0.002-e3"]["f1"],
                       search["adapters-m64-lr0.002-e3"]["f1"])
    self.assertEqual({method: row["key"] for method, row in selection.items()},
                     dict(adapters="adapters-m64-lr0.002-e3", full="full-lr0.0001-e1",
                          lora="lora-r8-lr0.001-e2"))
    runs = FakeRuns()
    selected = squad_schedule.run_selected(self.train, self.dev, self.config,
                                           self.squad_config, search, 6, self.model_dir,
                                           self.results_dir, run_squad=runs)
    self.assertEqual([call[0] for call in runs.calls], ["adapters", "full", "lora"])
    for _, squad_config, dev, export_dir in runs.calls:
      self.assertIs(dev, self.dev)
      self.assertEqual((squad_config.max_train_examples, squad_config.holdout_questions),
                       (20000, 0))
      self.assertTrue(export_dir.endswith("export"))
    self.assertEqual((selected["methods"]["adapters"]["epochs"],
                      selected["methods"]["adapters"]["learning_rate"]), (3.0, 2e-3))
    self.assertEqual(selected["methods"]["full"]["selected_by"]["search_key"],
                     "full-lr0.0001-e1")
    # LoRA's best rate is its axis' lowest: the record says so, for the axis to be widened.
    self.assertEqual({method: row["selected_by"]["at_rate_edge"]
                      for method, row in selected["methods"].items()},
                     dict(adapters=False, full=False, lora=True))
    # Each row names the sessions of its own run, not only the file's last writer.
    self.assertEqual(selected["methods"]["full"]["provenance"],
                     [dict(command="session of full")])
    # The equal-budget rows come from run_squad.py's results file, a whole config each.
    equal_budget = {method: dict(
        config=dict(adapter_size=64, lora_r=8, epochs=1.0, learning_rate=rate),
        metrics=dict(exact_match=50.0, f1=60.0), train_seconds=600.0,
        parameters=dict(trainable=100, trainable_percent_of_base=0.5))
                    for method, rate in (("adapters", 1e-3), ("full", 1e-4), ("ia3", 3e-3))}
    table = squad_schedule.markdown(selected, search, equal_budget)
    self.assertIn("| adapters | selected | m=64 | 3 | 0.002 |", table)
    self.assertIn("| full | selected | – | 1 | 0.0001 |", table)
    self.assertIn("| lora | selected | r=8 | 2 | 0.001 |", table)
    self.assertIn("| adapters | equal budget | m=64 | 1 | 0.001 | 50.00 | 60.00 | 100 | 0.50 | "
                  "10.0 |", table)
    self.assertIn("| full | equal budget | – | 1 | 0.0001 |", table)
    self.assertIn("| ia3 | equal budget | – | 1 | 0.003 |", table)
    self.assertIn("| full-lr5e-05-e2 |", table)

  def test_a_method_added_to_the_search_adds_its_own_selected_run_only(self):
    search = self._search(FakeRuns())
    before = {key: row for key, row in search.items() if not key.startswith("lora")}
    first = FakeRuns()
    self._selected(before, first)
    self.assertEqual([call[0] for call in first.calls], ["adapters", "full"])
    runs = FakeRuns()
    selected = self._selected(search, runs)
    self.assertEqual([call[0] for call in runs.calls], ["lora"])
    self.assertEqual(list(selected["methods"]), ["adapters", "full", "lora"])
    # A search that now selects another point for a method trains that method again.
    changed = dict(search, **{"full-lr5e-05-e2": dict(search["full-lr5e-05-e2"], f1=99.0)})
    runs = FakeRuns()
    selected = self._selected(changed, runs)
    self.assertEqual([call[0] for call in runs.calls], ["full"])
    self.assertEqual(selected["methods"]["full"]["selected_by"]["search_key"], "full-lr5e-05-e2")

  def test_a_run_stopped_before_its_last_method_leaves_its_table_beside_its_record(self):
    search = self._search(FakeRuns())
    with self.assertRaises(KeyboardInterrupt):
      self._selected(search, FakeRuns(fail_at=2))
    record = atomic_io.read_json(os.path.join(self.results_dir, squad_schedule.SELECTED_FILE))
    self.assertEqual(list(record["methods"]), ["adapters", "full"])
    with open(os.path.join(self.results_dir, squad_schedule.SELECTED_MARKDOWN)) as f:
      table = f.read()
    self.assertEqual(table, squad_schedule.markdown(record, search, None))
    self.assertIn("| full | selected |", table)
    self.assertNotIn("| lora | selected |", table)

  def _selected(self, search, runs):
    return squad_schedule.run_selected(self.train, self.dev, self.config, self.squad_config,
                                       search, 6, self.model_dir, self.results_dir,
                                       run_squad=runs)

  def test_a_search_of_other_data_is_refused(self):
    self._search(FakeRuns())
    with self.assertRaisesRegex(grid.OtherIdentityError, "batch_size=32 there, 16 now"):
      squad_schedule.run_search(self.train, self.config.replace(batch_size=16),
                                self.squad_config, 6, self.model_dir, self.results_dir,
                                run_squad=FakeRuns())


if __name__ == "__main__":
  tf.test.main()

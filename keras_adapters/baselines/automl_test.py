"""A whole no-BERT run on the toy task: search, choice, retraining, test, export, row."""

import dataclasses
import json
import os
import shutil
from unittest import mock

import tensorflow as tf

from keras_adapters.baselines import automl
from keras_adapters.baselines import deep_and_wide
from keras_adapters.baselines import testing


class RunAutomlTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tf.compat.v1.test.get_temp_dir()
    cls.tiny = testing.tiny_embedding(os.path.join(root, "cache"))
    cls.tiny.__enter__()
    cls.settings = automl.SearchSettings(embeddings=(testing.TINY_EMBEDDING,), max_trials=2,
                                         max_epochs=2.0, batch_size=8)
    cls.model_dir = os.path.join(root, "automl_run")
    cls.splits = testing.toy_splits()
    cls.results = automl.run_automl(testing.TOY_SPEC, cls.splits, cls.settings, cls.model_dir)

  @classmethod
  def tearDownClass(cls):
    cls.tiny.__exit__(None, None, None)
    super().tearDownClass()

  def test_results_hold_every_trial_and_the_best(self):
    results = self.results
    with open(os.path.join(self.model_dir, automl.RESULTS_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(results)))
    trials = results["trials"]
    self.assertEqual([t["trial_id"] for t in trials], ["0", "1"])
    self.assertEqual(results["best"]["validation"], max(t["validation"] for t in trials))
    best = next(t for t in trials if t["trial_id"] == results["best"]["trial_id"])
    self.assertEqual(results["best"]["config"]["embedding"], testing.TINY_EMBEDDING)
    self.assertEqual(best["values"]["embedding"], testing.TINY_EMBEDDING)
    self.assertAllClose(results["search_seconds"], sum(t["seconds"] for t in trials))
    self.assertGreater(results["search_seconds"], 0.0)
    self.assertEqual(results["examples"], dict(train=16, validation=8, test=8))
    for split in ("validation", "test"):
      self.assertBetween(results["final"][split]["accuracy"], 0.0, 1.0)

  def test_export_serves_strings(self):
    """The export maps strings to probabilities over the task's classes."""
    loaded = tf.saved_model.load(self.results["final"]["export_dir"])
    probabilities = loaded.signatures["serving_default"](
        text=tf.constant(["good crew", "rude crew"]))["probabilities"].numpy()
    self.assertEqual(probabilities.shape, (2, 2))
    self.assertAllClose(probabilities.sum(axis=1), [1.0, 1.0])
    self.assertEqual([n.decode() for n in loaded.label_names.numpy()], list(testing.LABELS))

  def test_comparison_row(self):
    row = automl.comparison_row(self.results)
    test = 100.0 * self.results["final"]["test"]["accuracy"]
    self.assertEqual((row["method"], row["scores"], row["mean"], row["sem"]),
                     ("no_bert", [test], test, 0.0))
    self.assertEqual(row["trainable_parameters"],
                     self.results["final"]["parameters"]["trainable"])
    self.assertEqual(row["total_parameters"], self.results["final"]["parameters"]["total"])
    self.assertIn("random search, 2 trial(s)", row["note"])

  def test_resumed_search_records_every_session(self):
    model_dir = os.path.join(self.get_temp_dir(), "resumed")
    shutil.copytree(self.model_dir, model_dir)
    (first,) = self.results["provenance"]
    self.assertEqual(first["max_trials"], 2)
    self.assertIn("commit", first["code"])
    more = automl.run_automl(testing.TOY_SPEC, self.splits,
                             dataclasses.replace(self.settings, max_trials=3), model_dir)
    self.assertLen(more["trials"], 3)
    # Other tests may have resumed the search with its own settings in between.
    self.assertEqual(more["provenance"][0], json.loads(json.dumps(first)))
    self.assertEqual(more["provenance"][-1]["max_trials"], 3)

  def test_finished_run_is_not_repeated(self):
    with mock.patch.object(deep_and_wide, "train") as train:
      again = automl.run_automl(testing.TOY_SPEC, self.splits, self.settings, self.model_dir)
    train.assert_not_called()
    self.assertEqual(again, json.loads(json.dumps(self.results)))

  def test_other_settings_are_refused(self):
    with self.assertRaisesRegex(ValueError, r"made with oracle='random', not oracle='hyperband'"):
      automl.run_automl(testing.TOY_SPEC, self.splits,
                        dataclasses.replace(self.settings, oracle="hyperband"), self.model_dir)


if __name__ == "__main__":
  tf.test.main()

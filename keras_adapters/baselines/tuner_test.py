"""keras-tuner drives the no-BERT search on a toy task: oracles, best choice, failures.

Resuming a killed search is tested end to end, with a real kill, in tests/run_automl_test.py.
"""

import os
from unittest import mock

from absl.testing import parameterized
from keras_tuner.src import utils as keras_tuner_utils
import tensorflow as tf

from keras_adapters.baselines import deep_and_wide
from keras_adapters.baselines import search_space
from keras_adapters.baselines import testing
from keras_adapters.baselines import tuner as tuner_lib
from keras_adapters.utils import errors

_OBJECTIVE = "validation_accuracy"


class TunerTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.enter_context(testing.tiny_embedding(self.create_tempdir().full_path))
    self.directory = self.create_tempdir().full_path

  def _tuner(self, oracle="random", max_trials=3, max_epochs=2.0):
    space = search_space.SearchSpace([testing.TINY_EMBEDDING], max_epochs=max_epochs)
    oracle = tuner_lib.make_oracle(oracle, objective=_OBJECTIVE, max_trials=max_trials,
                                   max_epochs=max_epochs, seed=0)
    return tuner_lib.AutoMLTuner(oracle, space, testing.TOY_SPEC, testing.toy_splits(),
                                 batch_size=8, seed=0, directory=self.directory)

  @parameterized.parameters("random", "bayesian")
  def test_three_trials_and_the_best_on_validation(self, oracle):
    """Three trials complete, each scored on the validation split (Bayesian optimisation
    proposes the third from a Gaussian process); the best trial is the one with the highest
    validation accuracy."""
    tuner = self._tuner(oracle)
    tuner.search()
    trials = list(tuner.oracle.trials.values())
    self.assertLen(trials, 3)
    self.assertEqual({t.status for t in trials}, {"COMPLETED"})
    scores = [t.metrics.get_last_value(_OBJECTIVE) for t in trials]
    for score in scores:
      self.assertBetween(score, 0.0, 1.0)
    (best,) = tuner.oracle.get_best_trials(1)
    self.assertEqual(best.score, max(scores))
    self.assertEqual(tuner.get_best_hyperparameters()[0].values, best.hyperparameters.values)

  def test_hyperband_continues_the_best_trial(self):
    """With a budget of 3 epochs, Hyperband runs three 1-epoch trials, then trains the best
    of them on to 3 epochs from its saved weights."""
    with mock.patch.object(search_space, "TRAINING_FRACTIONS", (1.0,)):
      tuner = self._tuner("hyperband", max_trials=4, max_epochs=3.0)
      tuner.search()
    trials = [tuner.oracle.trials[i] for i in sorted(tuner.oracle.trials)]
    self.assertEqual([t.hyperparameters.values["tuner/epochs"] for t in trials], [1, 1, 1, 3])
    first_round = trials[:3]
    best_first = max(first_round, key=lambda t: t.score)
    self.assertEqual(trials[3].hyperparameters.values["tuner/trial_id"], best_first.trial_id)
    self.assertEqual(trials[3].metrics.get_last_value("epochs"), 3)
    self.assertTrue(os.path.exists(
        os.path.join(tuner.get_trial_dir(best_first.trial_id), "weights.index")))

  def test_state_files_are_written_atomically_and_reload(self):
    """keras-tuner's own writer, which writes in place, is never called: the oracle's, the
    tuner's and each trial's state go through atomic writes (a kill mid-write leaves the
    previous file), in keras-tuner's format, so a new tuner on the folder resumes from them."""
    with mock.patch.object(keras_tuner_utils, "save_json",
                           side_effect=AssertionError("written in place")):
      tuner = self._tuner(max_trials=2)
      tuner.search()
    resumed = self._tuner(max_trials=2)
    self.assertEqual({i: t.status for i, t in resumed.oracle.trials.items()},
                     {"0": "COMPLETED", "1": "COMPLETED"})
    self.assertEqual({i: t.score for i, t in resumed.oracle.trials.items()},
                     {i: t.score for i, t in tuner.oracle.trials.items()})

  def test_a_state_file_left_empty_is_refused_naming_the_folder(self):
    """A search killed mid-write by a version that wrote in place left an empty file: resuming
    says which search cannot resume and how to start again, not a bare JSON error."""
    self._tuner(max_trials=1).search()
    project = os.path.join(self.directory, "search")
    with open(os.path.join(project, "trial_0", "trial.json"), "w", encoding="utf-8"):
      pass
    with self.assertRaisesRegex(errors.UsageError,
                                f"^The search in {project} cannot resume: .*Delete that folder"):
      self._tuner(max_trials=1)

  def test_diverged_trial_fails_and_the_search_goes_on(self):
    calls = []

    def diverge_once(*args, **kwargs):
      calls.append(1)
      if len(calls) == 1:
        raise FloatingPointError("The training loss became nan")
      return 0.5

    with mock.patch.object(deep_and_wide, "train", diverge_once):
      tuner = self._tuner(max_trials=2)
      tuner.search()
    statuses = [tuner.oracle.trials[i].status for i in ("0", "1")]
    self.assertEqual(statuses, ["FAILED", "COMPLETED"])
    self.assertIn("nan", tuner.oracle.trials["0"].message)

  @parameterized.parameters("random", "bayesian", "hyperband")
  def test_a_seed_repeats_the_oracle_s_choices_seed_0_too(self, name):
    def oracle(seed):
      return tuner_lib.make_oracle(name, objective=_OBJECTIVE, max_trials=3, max_epochs=2,
                                   seed=seed)
    self.assertEqual(oracle(0).seed, oracle(0).seed)
    self.assertNotEqual(oracle(0).seed, oracle(1).seed)

  def test_unknown_oracle(self):
    with self.assertRaisesRegex(ValueError, "Unknown oracle 'grid'"):
      tuner_lib.make_oracle("grid", objective=_OBJECTIVE, max_trials=1, max_epochs=1, seed=0)


if __name__ == "__main__":
  tf.test.main()

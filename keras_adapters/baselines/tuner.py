"""keras-tuner over the no-BERT search space: oracles and a tuner that fits tf_keras models.

keras-tuner 1.4's stock tuners only accept Keras 3 models, so `AutoMLTuner` subclasses
`BaseTuner` and builds, trains and scores the tf_keras model itself in `run_trial`. The
oracle (random search, Bayesian optimisation or Hyperband) proposes configurations and keeps
its state and every trial in the project folder: a search that is killed resumes where it
stopped, re-running the trial it was in. keras-tuner writes its state files in place
(`open(path, "w")`, then the text), so a kill between the two would leave an empty file that
the resumption cannot read: the oracle's, the tuner's and each trial's are written
atomically here instead.
"""

import json
import math
import os
import time
from typing import Dict, Mapping

import keras_tuner
from keras_tuner.engine import base_tuner
import tensorflow as tf
import tf_keras as keras

from keras_adapters.baselines import deep_and_wide
from keras_adapters.baselines import search_space as search_space_lib
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import metrics as metrics_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

ORACLES = ("random", "bayesian", "hyperband")
# Some configurations diverge (learning rates up to 0.5); only a run of failures stops it.
_MAX_CONSECUTIVE_FAILURES = 5
_HYPERBAND_FACTOR = 3
_WEIGHTS = "weights"
SECONDS_FILE = "seconds.json"
# keras-tuner's name for a trial's state in its folder, which `Oracle.reload` globs.
_TRIAL_FILE = "trial.json"


def objective_name(spec: examples_lib.TaskSpec) -> str:
  """The trials' score: the task's first metric on the validation split."""
  return f"validation_{spec.metrics[0]}"


def make_oracle(name: str, *, objective: str, max_trials: int, max_epochs: float,
                seed: int) -> keras_tuner.Oracle:
  """A keras-tuner oracle maximising `objective`.

  Args:
    name: "random" (random search), "bayesian" (Gaussian-process Bayesian optimisation after
      a third of `max_trials` random trials) or
      "hyperband" (successive halving over training length, up to `max_epochs`).
    objective: The metric trials report.
    max_trials: Most trials to run (Hyperband stops earlier when its brackets are done).
    max_epochs: The cap of knob 21 (see `search_space`), Hyperband's largest budget.
    seed: Seed of the oracle's choices.

  Returns:
    The oracle.
  """
  # keras-tuner draws a random seed in place of a falsy one, so seed 0 (the default) would
  # not repeat its choices: its seed is ours plus one.
  common = dict(objective=keras_tuner.Objective(objective, "max"), seed=seed + 1,
                max_consecutive_failed_trials=_MAX_CONSECUTIVE_FAILURES)
  if name == "random":
    return _atomic(keras_tuner.oracles.RandomSearchOracle)(max_trials=max_trials, **common)
  if name == "bayesian":
    # keras-tuner's default of 3 random trials per knob (63) would leave nothing for the
    # Gaussian process in a budget of tens of trials: a third of the budget is random.
    return _atomic(keras_tuner.oracles.BayesianOptimizationOracle)(
        max_trials=max_trials, num_initial_points=max(2, max_trials // 3), **common)
  if name == "hyperband":
    oracle = _atomic(keras_tuner.oracles.HyperbandOracle)(
        max_epochs=math.ceil(max_epochs), factor=_HYPERBAND_FACTOR, **common)
    # HyperbandOracle takes no max_trials, but the base Oracle honours the attribute.
    oracle.max_trials = max_trials
    return oracle
  raise errors.UsageError(f"Unknown oracle {name!r}; choose from {list(ORACLES)}.")


def _atomic(oracle_class):
  """`oracle_class` with its state and its trials' written atomically."""

  class Oracle(oracle_class):

    def save(self):
      atomic_io.write_json(self._get_oracle_fname(), self.get_state())

    def _save_trial(self, trial):
      atomic_io.write_json(os.path.join(self._get_trial_dir(trial.trial_id), _TRIAL_FILE),
                           trial.get_state())

  Oracle.__name__ = Oracle.__qualname__ = oracle_class.__name__
  return Oracle


class AutoMLTuner(base_tuner.BaseTuner):
  """Runs trials of the no-BERT search space on a task's train and validation splits.

  A trial builds its configuration's model, trains it for its number of epochs (knob 21;
  under Hyperband at most the bracket's budget, continuing from the weights of the trial it
  extends) and reports the validation score and its epochs; its wall time is recorded in
  its folder.
  """

  def __init__(self, oracle: keras_tuner.Oracle, search_space: search_space_lib.SearchSpace,
               spec: examples_lib.TaskSpec, splits: Mapping[str, examples_lib.TextExamples],
               *, batch_size: int, seed: int, directory: str, project_name: str = "search"):
    """Creates the tuner; an existing project in `directory/project_name` is resumed.

    Args:
      oracle: From `make_oracle`.
      search_space: The search space (keras-tuner's hypermodel).
      spec: The task: one text field, classes.
      splits: "train" and "validation" examples.
      batch_size: Training batch size.
      seed: Base seed; trial `i` trains with seed `seed + i`.
      directory: Folder of keras-tuner's project.
      project_name: Name of the project folder.
    """
    super().__init__(oracle, hypermodel=search_space, directory=directory,
                     project_name=project_name)
    self.spec = spec
    self.train_examples = splits["train"]
    self.validation_examples = splits["validation"]
    self.batch_size = batch_size
    self.seed = seed

  def save(self):
    # `BaseTuner.save`, with the tuner's file written atomically (the oracle's is by `_atomic`).
    if not self._is_worker():
      self.oracle.save()
    atomic_io.write_json(self._get_tuner_fname(), self.get_state())

  def reload(self):
    try:
      super().reload()
    except json.JSONDecodeError as e:
      # Written in place before these files were written atomically, a file of a search
      # killed mid-write is empty.
      raise errors.UsageError(
          f"The search in {self.project_dir} cannot resume: a file of its state is not JSON "
          f"({e}), as a search killed while writing it leaves it. Delete that folder to "
          "search again from the start.") from None

  def run_trial(self, trial, *args, **kwargs) -> Dict[str, float]:
    del args, kwargs  # The data is the tuner's.
    values = trial.hyperparameters.values
    config = self.hypermodel.build(trial.hyperparameters)
    epochs, initial_epoch = config.train_epochs, 0.0
    if "tuner/epochs" in values:
      epochs = min(epochs, values["tuner/epochs"])
      initial_epoch = min(epochs, values["tuner/initial_epoch"])
    keras.backend.clear_session()
    keras.utils.set_random_seed(self.seed + int(trial.trial_id))
    model = deep_and_wide.build_classifier(config, self.spec.num_classes)
    if "tuner/trial_id" in values:
      self._checkpoint(model).read(self._weights_path(values["tuner/trial_id"])).assert_consumed()
    train = self.train_examples
    steps = (deep_and_wide.steps_for(epochs, len(train), self.batch_size) -
             deep_and_wide.steps_for(initial_epoch, len(train), self.batch_size))
    try:
      deep_and_wide.train(model, train.texts[0], train.labels, steps=steps,
                          batch_size=self.batch_size, seed=self.seed + int(trial.trial_id))
    except FloatingPointError as e:
      raise keras_tuner.errors.FailedTrialError(str(e)) from e
    if "tuner/epochs" in values:
      self._checkpoint(model).write(self._weights_path(trial.trial_id))
    return {objective_name(self.spec): self.score(model, self.validation_examples),
            "epochs": epochs}

  def on_trial_begin(self, trial):
    super().on_trial_begin(trial)
    self._trial_start = time.time()

  def on_trial_end(self, trial):
    # Failed trials cost time too: every trial's wall time is recorded beside it.
    atomic_io.write_json(os.path.join(self.get_trial_dir(trial.trial_id), SECONDS_FILE),
                         {"seconds": time.time() - self._trial_start})
    super().on_trial_end(trial)

  def trial_seconds(self, trial_id: str) -> float:
    """Wall time of a trial's last run, 0 if it never ended (killed)."""
    recorded = atomic_io.read_json(os.path.join(self.get_trial_dir(trial_id), SECONDS_FILE))
    return 0.0 if recorded is None else recorded["seconds"]

  def score(self, model: keras.Model, examples: examples_lib.TextExamples) -> float:
    """The task's first metric of `model` on `examples`."""
    predictions = deep_and_wide.predict_classes(model, examples.texts[0], self.batch_size)
    return metrics_lib.compute_metrics(self.spec, examples.labels,
                                       predictions)[self.spec.metrics[0]]

  def _weights_path(self, trial_id: str) -> str:
    return os.path.join(self.get_trial_dir(trial_id), _WEIGHTS)

  @staticmethod
  def _checkpoint(model: keras.Model) -> tf.train.Checkpoint:
    """What a Hyperband round continues from: the weights training changed, by position
    (a frozen embedding is left out; it is the same in every model)."""
    frozen = {id(w) for w in model.get_layer("embedding").non_trainable_weights}
    return tf.train.Checkpoint(weights=[w for w in model.weights if id(w) not in frozen])

"""`Task`: what one kind of task gives the run driver (`train_lib.run`).

As the Model Garden's `base_task.Task`, a task owns its data, model, loss, evaluation and
export; the driver owns everything a run of any task shares: the run records, resumption,
the finished-run restore, the lock on the run folder, the precision policy and the Trainer.
A new task kind subclasses `Task` (see `keras_adapters.tasks`); a new PEFT method is an
`AdapterConfig` option the model reads, and reaches every task unchanged.
"""

import abc
from typing import Any, Dict, List, Mapping, Optional

import tensorflow as tf
import tf_keras as keras

from keras_adapters.core import config_definitions
from keras_adapters.hub import hub_encoder
from keras_adapters.training import trainer as trainer_lib


class Task(abc.ABC):
  """One task on its data, under one `ExperimentConfig`.

  The driver calls, in order: `prepare` (check everything before the first step),
  `definition` (the run's record), `check_export_dir`; then, once the run folder is held:
  `pending_evaluations` and `exported`, `steps_per_epoch`, `build_model` (by `built_model`),
  `loss` and `train_dataset` (through the Trainer), `initial_results`, `evaluate` and
  `export`.
  """

  def __init__(self, config: config_definitions.ExperimentConfig):
    self.config = config
    self._base = None

  def read_base(self) -> hub_encoder.HubEncoderWeights:
    """The config's base encoder, read and checked against the Hub model once per task.

    Its weights are held until the model is built (`built_model`), which takes them from here
    instead of reading and checking the SavedModel again (a quarter of a minute for
    BERT-large); then dropped, so that a large base's copy does not stay beside the model's
    for the whole run.
    """
    if self._base is None:
      self._base = hub_encoder.read_hub_encoder(self.config.model.hub_handle)
    return self._base

  def built_model(self) -> keras.Model:
    """`build_model`, after which the base's weights are no longer held."""
    model = self.build_model()
    if self._base is not None:
      self._base = self._base.without_weights()
    return model

  @property
  @abc.abstractmethod
  def name(self) -> str:
    """The task's name, recorded with every run."""

  @abc.abstractmethod
  def prepare(self) -> None:
    """Checks the data and that the base and the preprocessing can serve the config; raises a
    `ValueError` naming the setting otherwise. Called first, before anything is written."""

  @abc.abstractmethod
  def definition(self) -> Dict[str, Any]:
    """What defines the run (see `run_records`): `task`, `train_examples`,
    `train_fingerprint`, `base_fingerprint`, `config` and any task-specific identity."""

  def check_export_dir(self, export_dir: str) -> None:
    """Refuses, before training, an `export_dir` this task's export would damage."""

  @abc.abstractmethod
  def steps_per_epoch(self) -> int:
    """Training batches in one epoch."""

  @abc.abstractmethod
  def build_model(self) -> keras.Model:
    """A new model, as the Trainer builds it under the strategy's scope."""

  @abc.abstractmethod
  def loss(self, labels: Any, outputs: Any) -> tf.Tensor:
    """Per-example training loss."""

  @abc.abstractmethod
  def train_dataset(self, shuffle_seed: int) -> tf.data.Dataset:
    """One epoch of (features, labels) batches, shuffled with `shuffle_seed`."""

  @abc.abstractmethod
  def initial_results(self, train_result: trainer_lib.TrainResult,
                      steps_per_epoch: int) -> Dict[str, Any]:
    """What the results record of the training itself, beyond what the driver records."""

  @abc.abstractmethod
  def pending_evaluations(self, results: Optional[Mapping[str, Any]]) -> List[str]:
    """What recorded `results` (`None`: none yet) lack: the evaluations still to run."""

  @abc.abstractmethod
  def evaluate(self, model: keras.Model, results: Dict[str, Any], pending: List[str],
               output_dir: Optional[str]) -> None:
    """Runs the `pending` evaluations into `results`; writes any prediction files to
    `output_dir` (`None` on a worker that is not the chief)."""

  def exported(self, results: Optional[Mapping[str, Any]], export_dir: str) -> bool:
    """Whether `results` record a complete export to `export_dir`."""
    return results is not None and results.get("export_dir") == export_dir

  @abc.abstractmethod
  def export(self, model: keras.Model, export_dir: str) -> None:
    """Writes the task's serving SavedModel and adapter-only artifact under `export_dir`."""

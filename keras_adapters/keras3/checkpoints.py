"""A Keras 3 run's checkpoint: everything training needs to go on where it stopped.

One file in the run's folder, `checkpoint.npz`, replaced atomically every
`checkpoint_every_steps` steps and at the end: the values of the model's variables that
training changes (its weights but the base weights `adapt` froze, which the run builds again
from its base: an adapter run's checkpoint is megabytes, not the base's size; and the random
seed states its dropout draws from), of the optimizer's (its moments and step count), and
where training was: the step and the losses of the epochs so far.
Restored into the same model and optimizer, and fed the same batches from that step on
(`training.fit`), training ends as it would have without the stop.

Keras' own `BackupAndRestore` resumes only at the start of an epoch and keeps neither the
seed states nor a file that a stop while writing cannot spoil: hence this one.
"""

import dataclasses
import io
import json
import os
from typing import List, Optional

import keras
import numpy as np

from keras_adapters.keras3 import base_weights
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import stop_requests

CHECKPOINT_FILE = "checkpoint.npz"


@dataclasses.dataclass
class TrainingState:
  """Where training is: `step` steps done, the mean loss of each finished epoch
  (`epoch_losses`) and the sum of the losses of the current epoch's steps
  (`epoch_loss_sum`)."""
  step: int = 0
  epoch_losses: List[float] = dataclasses.field(default_factory=list)
  epoch_loss_sum: float = 0.0


def _variables(model):
  """What a checkpoint holds: the model's variables but the frozen base's, then the
  optimizer's."""
  frozen = {id(variable) for variable in _frozen_base_weights(model)}
  return [variable for variable in model.variables
          if id(variable) not in frozen] + list(model.optimizer.variables)


def _frozen_base_weights(model):
  """The base weights of the backbones in `model` that `adapt` froze and that stay frozen
  (the LayerNorms a config trains are not among them)."""
  for layer in model._flatten_layers():  # pylint: disable=protected-access
    if getattr(layer, "base_fingerprint", None) is not None:  # Set by `adapt`.
      yield from (variable for variable in base_weights.model_garden_weights(layer).values()
                  if not variable.trainable)


def _whole_model_variables(model):
  """What checkpoints of versions before 2026-11-29 held: every variable of the model."""
  return list(model.variables) + list(model.optimizer.variables)


def save(model, directory, state):
  """Writes `model`'s and its optimizer's variables and `state` to `directory`, atomically."""
  buffer = io.BytesIO()
  values = [keras.ops.convert_to_numpy(variable) for variable in _variables(model)]
  np.savez(buffer, state=np.array(json.dumps(dataclasses.asdict(state))), *values)
  atomic_io.write_bytes(os.path.join(directory, CHECKPOINT_FILE), buffer.getvalue())


def restore(model, directory) -> Optional[TrainingState]:
  """Assigns the checkpoint in `directory`, if any, to `model` and its optimizer (compiled,
  built or not) and returns its `TrainingState`; `None` without a checkpoint.

  Raises:
    UsageError: The checkpoint holds variables of another model.
  """
  path = os.path.join(directory, CHECKPOINT_FILE)
  if not os.path.exists(path):
    return None
  if not model.optimizer.built:
    model.optimizer.build(model.trainable_variables)
  with np.load(path) as saved:
    state = TrainingState(**json.loads(str(saved["state"])))
    values = [saved[f"arr_{index}"] for index in range(len(saved.files) - 1)]
  saved_shapes = [value.shape for value in values]
  variables = _variables(model)
  shapes = [tuple(variable.shape) for variable in variables]
  if saved_shapes != shapes:
    variables = _whole_model_variables(model)
    if saved_shapes != [tuple(variable.shape) for variable in variables]:
      raise errors.UsageError(
          f"{path} holds the variables of another model ({len(values)} arrays, this model "
          f"has {len(shapes)} of other shapes): use a new model_dir, or remove that file.")
  for variable, value in zip(variables, values):
    variable.assign(value)
  return state


class StepCheckpoints(keras.callbacks.Callback):
  """Saves the run's checkpoint in `directory` (unless `None`) every `every_steps` steps of
  `model.fit`, and after the last of `total_steps`, going on from `state` (a restored
  `TrainingState`) and keeping its losses: a fit that resumes mid-epoch runs that epoch's
  remaining steps alone. Once `stop` (`stop_requests.requested`) holds a signal's number,
  the step under way is saved and `stop_requests.TrainingInterrupted` raised.

  Attributes:
    state: Where training is, once `fit` returns: every epoch's mean loss.
  """

  def __init__(self, directory, every_steps, total_steps, steps_per_epoch, state, stop=()):
    super().__init__()
    self.directory = directory
    self.every_steps = every_steps
    self.total_steps = total_steps
    self.steps_per_epoch = steps_per_epoch
    self.state = state
    self.stop = stop

  def on_epoch_begin(self, epoch, logs=None):
    # The losses of the epoch's steps before this fit (a resumed epoch), then Keras' running
    # mean of the steps since.
    self._loss_sum_before = self.state.epoch_loss_sum

  def on_train_batch_end(self, batch, logs=None):
    self.state.step += 1
    self.state.epoch_loss_sum = self._loss_sum_before + float(logs["loss"]) * (batch + 1)
    if self.state.step % self.steps_per_epoch == 0:
      self.state.epoch_losses.append(self.state.epoch_loss_sum / self.steps_per_epoch)
      self.state.epoch_loss_sum = 0.0
    if self.directory and (self.stop or self.state.step % self.every_steps == 0
                           or self.state.step == self.total_steps):
      # `self.model` gathers a JAX model's state: only when it is saved.
      save(self.model, self.directory, self.state)
    if self.stop:
      raise stop_requests.TrainingInterrupted(
          self.stop[0], self.state.step, self.total_steps,
          os.path.join(self.directory, CHECKPOINT_FILE))

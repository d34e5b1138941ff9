"""A custom training loop for any Keras model under a `tf.distribute` strategy.

In the spirit of the TF Model Garden's Orbit trainers, without `model.fit`:

* one `tf.function` step runs `strategy.run` on a batch of
  `strategy.experimental_distribute_dataset`, averages the per-example losses over the global
  batch (`tf.nn.compute_average_loss`) and differentiates with respect to
  `model.trainable_variables` only, so frozen variables get no gradient and are never written;
* the weights training changes (`trained_variables`: not the frozen base, which `model_fn`
  builds again, so an adapter run's checkpoint is megabytes, not the base's size), the
  optimiser, step and data position are checkpointed every `checkpoint_every_steps` and at
  the end. Rerunning the same training after the process died
  resumes from the last checkpoint and continues the data order where it left off (the order
  of epoch `e` is a function of `(seed, e)`, consumed batches are skipped), so it ends with the
  weights an uninterrupted run would have, provided the model has no random ops in training
  (dropout masks after a resume differ from the uninterrupted run's). A finished run leaves a
  completion marker and is not trained again;
* divergence stops the run with `TrainingDivergedError`: a NaN or infinite loss or gradient,
  a loss over `LOSS_EXPLOSION_FACTOR` times that of the call's first step (a learning rate of
  1e6 gives finite losses of 1e13), or weights over `WEIGHT_EXPLOSION_FACTOR` times their
  starting global norm, or not finite, when a checkpoint is due. A checkpoint is kept only
  when it is known good: its weights are checked before it is written, and the loss they give
  at the next step must pass too, or the checkpoint is deleted. So the last checkpoint is
  always a good one to resume from;
* the host does not wait for the device at every step: the steps' losses and gradient checks
  stay on the device and are read together every `log_every_steps` and before every
  checkpoint, evaluation or stop (as Orbit's `steps_per_loop` and Keras'
  `steps_per_execution` do), so the device runs ahead of the Python loop. Divergence is still
  reported at the step it happened, before anything after it is saved;
* a latest checkpoint that cannot be read (a write cut short) is skipped with a warning, and
  training resumes from the one before it; what interrupted saves left behind
  (`ckpt-<step>_temp` folders, `*.tempstate*` and `checkpoint.tmp*` files) is deleted;
* SIGTERM (what schedulers, GKE and Cloud TPU send before stopping a job) and Ctrl-C stop
  training after the current step: its checkpoint is saved and `TrainingInterrupted` says
  how to resume, so a stop loses at most the step under way. A second Ctrl-C stops at once.
  (`tf.distribute.experimental.PreemptionCheckpointHandler` does not fit this loop: it adds
  its own run counter to the checkpoint, numbers checkpoints by it and ends the process
  itself. A multi-worker run keeps the signals' default: one worker alone stopping would
  leave the others waiting in a collective; it resumes from its last periodic checkpoint);
* progress goes to a `keras.utils.Progbar` and to TensorBoard under `model_dir/summaries`;
* a model built under Keras' `mixed_float16` policy gets dynamic loss scaling (the Model
  Garden's `performance.configure_optimizer`, a `LossScaleOptimizer`): the loss is scaled
  before differentiation, the gradients unscaled before the all-reduce and the global-norm
  clipping, and a step whose scaled gradients overflowed is skipped while the scale drops, as
  Keras does; such a step counts as divergence only once the scale is below 1, where the
  unscaled gradients themselves overflow. `mixed_bfloat16` needs no scaling;
* `jit_compile=True` compiles each replica's forward and backward pass with XLA (what TPUs do
  to every step). XLA compiles one program per input shape, so give it batches of one shape
  (padded to the maximum length, the last partial batch dropped). The cross-replica sum, the
  clipping and the optimiser update stay outside the compiled function, so that they work
  under any strategy.

With `MultiWorkerMirroredStrategy` on several workers (configured by `TF_CONFIG`), every
worker runs the same loop and saves at the same steps, as collective ops require, but only the
chief writes `model_dir`; the others write to their own temporary `model_dir/workertemp_<id>`,
removed at the end (the Keras and Model Garden convention). Every worker resumes from the
chief's checkpoints, so `model_dir` must be a path they all reach (a shared file system or a
`gs://` bucket).
"""

import dataclasses
import math
import numbers
import os
import time
from typing import Callable, Dict, Iterator, Mapping, Optional, Tuple, Union

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras as keras

from official.modeling import performance
from keras_adapters.training import optimization
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import stop_requests

# `model_dir` layout: checkpoints `ckpt-<step>`, the completion marker, TensorBoard summaries.
CHECKPOINT_NAME = "ckpt"
COMPLETION_MARKER = "training_complete.json"
SUMMARIES_DIR = "summaries"
# Divergence that is not (yet) NaN: a loss this many times that of the first step of a call
# (or 1, if that was smaller), weights this many times their global norm at its start (or 1).
LOSS_EXPLOSION_FACTOR = 100.0
WEIGHT_EXPLOSION_FACTOR = 1000.0
# What a save cut short leaves in the folder: TensorFlow's per-save staging folder, its
# bundle writer's temporary files and the temporary copy of the `checkpoint` state file.
_SAVE_LEFTOVERS = (f"{CHECKPOINT_NAME}-*_temp", "*.tempstate*", "checkpoint.tmp*")
# Reading a checkpoint whose files were cut short fails with these (IndexError: a data file
# shorter than its index says).
_UNREADABLE_CHECKPOINT_ERRORS = (tf.errors.OpError, IndexError)
# The keys of a checkpoint that saved the whole model, as versions before 2026-11-29 did.
_WHOLE_MODEL_PREFIX = "model/"

# A dataset of `(features, labels)` batches at the global batch size, or a function from an
# epoch's shuffle seed to such a dataset.
TrainData = Union[tf.data.Dataset, Callable[[int], tf.data.Dataset]]
LossFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
EvalFn = Callable[[keras.Model], Mapping[str, float]]


class TrainingDivergedError(errors.RunFailedError):
  """The loss, the gradient or the weights became NaN or infinite, or exploded."""


# Its public path was here: kept.
TrainingInterrupted = stop_requests.TrainingInterrupted


@dataclasses.dataclass(frozen=True)
class TrainResult:
  """What a training run did.

  Attributes:
    step: The last step trained, `num_train_steps` once the run is finished.
    loss: Loss of the last step trained by the call that finished the run; `None` if that call
      found the final checkpoint already written and trained no step.
    wall_time_s: Seconds the training loop of that call took (steps, checkpoints, evaluations;
      not building the model or restoring it).
    steps_per_sec: Steps of that call per second of `wall_time_s`.
    examples_per_sec: Training examples of that call per second of `wall_time_s`.
    start_step: The step that call started from: 0, or the step of the checkpoint it resumed.
    train_seconds: Seconds of the training loops of every call that trained this run, up to
      the checkpoints they left (steps a stopped call trained after its last checkpoint were
      lost and do not count): what the whole run took, also when it was resumed. A
      checkpoint saved before this was kept counts 0, and a completion marker written before
      it reads as `wall_time_s`.
    checkpoint_path: The final checkpoint. To get the trained model in another process,
      `restore_trained_weights(model_fn(), checkpoint_path)`.
    eval_metrics: What `eval_fn` returned at the end, `{}` without one.
  """
  step: int
  loss: Optional[float]
  wall_time_s: float
  steps_per_sec: float
  examples_per_sec: float
  start_step: int
  checkpoint_path: str
  eval_metrics: Dict[str, float]
  train_seconds: Optional[float] = None

  def __post_init__(self):
    if self.train_seconds is None:
      object.__setattr__(self, "train_seconds", self.wall_time_s)


class Trainer:
  """Trains a Keras model with the paper's optimiser, with checkpoints, resumption and logs.

  Attributes:
    model: The model of the last `train()` call: trained, or as it was when divergence was
      found (up to `log_every_steps` steps after it); `None` before, or when that call found
      the run already finished.

  Example:
    ```
    strategy = distribution.get_strategy("mirrored")
    trainer = Trainer(model_fn, loss_fn, dataset_fn, num_train_steps=10000,
                      learning_rate=1e-4, model_dir="/tmp/run", strategy=strategy)
    result = trainer.train()  # Rerun after a crash: it resumes; after success: no-op.
    ```
  """

  def __init__(self,
               model_fn: Callable[[], keras.Model],
               loss_fn: LossFn,
               train_data: TrainData,
               *,
               num_train_steps: int,
               learning_rate: float,
               model_dir: str,
               warmup_fraction: float = optimization.DEFAULT_WARMUP_FRACTION,
               weight_decay: float = optimization.DEFAULT_WEIGHT_DECAY,
               strategy: Optional[tf.distribute.Strategy] = None,
               checkpoint_every_steps: int = 1000,
               max_checkpoints_to_keep: int = 3,
               seed: int = 0,
               eval_fn: Optional[EvalFn] = None,
               eval_every_steps: Optional[int] = None,
               log_every_steps: int = 100,
               progress_bar: bool = True,
               deterministic: bool = False,
               jit_compile: bool = False):
    """Initialises the trainer; nothing is built before `train()`.

    Args:
      model_fn: Builds and returns the model, already built (its variables exist). Called
        under `strategy.scope()`, after the random seed is set.
      loss_fn: `loss_fn(labels, outputs)` returns one loss per example, shape `[batch]` (for
        a Keras loss, use `reduction=keras.losses.Reduction.NONE`).
      train_data: `(features, labels)` batches at the global batch size: either a finite
        `tf.data.Dataset` that is iterated once per epoch (then it must give the same order
        on every pass for resumption to continue exactly), or a function
        `train_data(shuffle_seed)` returning one epoch, its order a function of the seed;
        the trainer derives that seed from `(seed, epoch)`. An infinite dataset is one epoch.
      num_train_steps: Number of optimiser steps of the whole run.
      learning_rate: Peak learning rate, see `optimization.create_optimizer`.
      model_dir: Directory of the checkpoints, the completion marker and the summaries; one
        per run.
      warmup_fraction: Fraction of the steps spent warming the learning rate up.
      weight_decay: Decoupled weight decay (AdamW), LayerNorm and bias variables excluded.
      strategy: Distribution strategy; `None` for the current one (the default strategy
        outside any scope).
      checkpoint_every_steps: Checkpoint interval; a crash loses at most this many steps.
      max_checkpoints_to_keep: How many of the latest checkpoints stay on disk.
      seed: Seeds Python, NumPy and TensorFlow (`keras.utils.set_random_seed`, process-global)
        before the model is built, and the per-epoch data order.
      eval_fn: `eval_fn(model)` returns metrics (name to float), logged to TensorBoard and
        returned in the result; called every `eval_every_steps` and at the end.
      eval_every_steps: Evaluation interval; `None` evaluates only at the end.
      log_every_steps: Interval of the TensorBoard scalars (mean loss over the interval,
        learning rate) and of the loss shown on the progress bar; the steps' losses are read
        from the device (the host waiting for it) this often, or at a checkpoint,
        evaluation or stop if sooner.
      progress_bar: Whether to show a `keras.utils.Progbar`.
      deterministic: Whether to call `tf.config.experimental.enable_op_determinism()`. It is
        process-global and stays on after training: ops without a deterministic kernel then
        raise, and some GPU kernels get slower. Not needed on CPU for dense models, whose
        kernels are deterministic already.
      jit_compile: Whether to compile the forward and backward pass with XLA.

    Raises:
      TypeError: If a callable or the training data has the wrong type.
      ValueError: If a number is out of its range.
    """
    for name, value in (("model_fn", model_fn), ("loss_fn", loss_fn)):
      if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r}.")
    if not (isinstance(train_data, tf.data.Dataset) or callable(train_data)):
      raise TypeError("train_data must be a tf.data.Dataset or a function from a shuffle "
                      f"seed to one, got {train_data!r}.")
    if eval_fn is not None and not callable(eval_fn):
      raise TypeError(f"eval_fn must be callable or None, got {eval_fn!r}.")
    if eval_every_steps is not None and eval_fn is None:
      raise ValueError("eval_every_steps is set but eval_fn is None: pass an eval_fn.")
    counts = {"num_train_steps": num_train_steps,
              "checkpoint_every_steps": checkpoint_every_steps,
              "max_checkpoints_to_keep": max_checkpoints_to_keep,
              "log_every_steps": log_every_steps}
    if eval_every_steps is not None:
      counts["eval_every_steps"] = eval_every_steps
    for name, value in counts.items():
      if not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if not isinstance(seed, numbers.Integral) or seed < 0:
      raise ValueError(f"seed must be a non-negative integer, got {seed!r}.")
    if not model_dir:
      raise ValueError("model_dir must be a non-empty path.")
    self._model_fn = model_fn
    self._loss_fn = loss_fn
    self._train_data = train_data
    # Plain ints: NumPy integers would not go into the JSON of the completion marker.
    self._num_train_steps = int(num_train_steps)
    self._optimizer_args = dict(learning_rate=learning_rate, num_train_steps=int(num_train_steps),
                                warmup_fraction=warmup_fraction, weight_decay=weight_decay)
    self._model_dir = model_dir
    self._strategy = strategy or tf.distribute.get_strategy()
    self._checkpoint_every_steps = int(checkpoint_every_steps)
    self._max_checkpoints_to_keep = int(max_checkpoints_to_keep)
    self._seed = int(seed)
    self._eval_fn = eval_fn
    self._eval_every_steps = None if eval_every_steps is None else int(eval_every_steps)
    self._log_every_steps = int(log_every_steps)
    self._progress_bar = progress_bar
    self._deterministic = deterministic
    self._jit_compile = bool(jit_compile)
    self.model = None

  def train(self) -> TrainResult:
    """Trains to `num_train_steps`, resuming from the latest checkpoint in `model_dir`.

    Sets `self.model` to the trained model, except when the run had already finished: then it
    returns that run's result at once, building nothing, and `self.model` stays `None`.

    Returns:
      The `TrainResult`, also saved as the completion marker.

    Raises:
      TrainingDivergedError: If training diverged (see the module docstring).
      ValueError: If the data or `loss_fn` output has the wrong form, or `model_dir` holds a
        checkpoint of another model, one past `num_train_steps`, or none that can be read.
    """
    finished = self.finished_result()
    if finished is not None:
      logging.info("Training in %s already finished at step %d: not training again.",
                   self._model_dir, finished.step)
      return finished
    self._build()
    start_step = self._restore()
    try:
      # One worker of several must not stop alone (see the module docstring).
      with stop_requests.requested(enabled=not isinstance(
          self._strategy, tf.distribute.MultiWorkerMirroredStrategy)) as stop:
        result = self._train_loop(start_step, stop)
    finally:
      for writer in self._writers.values():
        writer.close()
    if self._is_chief:
      atomic_io.write_json(self._marker_path, dataclasses.asdict(result))
    else:
      tf.io.gfile.rmtree(self._write_dir)
    return result

  @property
  def _marker_path(self) -> str:
    return os.path.join(self._model_dir, COMPLETION_MARKER)

  def finished_result(self) -> Optional[TrainResult]:
    """The recorded result if `model_dir` holds this run finished, else `None`.

    Finished means: the completion marker is there, for `num_train_steps`, and its final
    checkpoint is the latest one. Nothing is built.
    """
    recorded = atomic_io.read_json(self._marker_path)
    if recorded is None:
      return None
    result = TrainResult(**recorded)
    latest = tf.train.latest_checkpoint(self._model_dir)
    # The marker is written after the final checkpoint; it only counts while that checkpoint
    # is the latest one and the run asks for the same number of steps.
    if (result.step != self._num_train_steps or latest is None or
        os.path.basename(latest) != os.path.basename(result.checkpoint_path)):
      return None
    return dataclasses.replace(result, checkpoint_path=latest)

  def step_function(self) -> Callable[[tuple], tf.Tensor]:
    """Builds the model and optimiser as `train()` does, without reading or writing
    `model_dir`, and returns `step(batch)`: one training step on a `(features, labels)` batch
    (a distributed one under a strategy of several replicas), returning the loss. For
    benchmarks and profiling: it is the step `train()` takes, loss scaling and XLA included.
    """
    self._build_step()
    return lambda batch: self._train_step(batch)["loss"]

  def _build(self):
    """Builds the step, the checkpoint and summary writers."""
    self._build_step()
    # Completed steps, and where the data stands: the epoch and the batches consumed in it.
    self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    self._epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
    self._batch_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="batch_in_epoch")
    # Seconds the training loops took up to the checkpoint: a resumed run's time adds to it.
    self._train_seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                      name="train_seconds")
    # Only the chief writes model_dir; the other workers of a multi-worker run still save (a
    # save reads distributed variables with collective ops), into their own folder.
    self._is_chief = self._strategy.extended.should_checkpoint
    self._write_dir = self._model_dir if self._is_chief else os.path.join(
        self._model_dir, f"workertemp_{self._strategy.cluster_resolver.task_id}")
    self._progress = dict(optimizer=self._optimizer, step=self._step, epoch=self._epoch,
                          batch_in_epoch=self._batch_in_epoch)
    self._checkpoint = tf.train.Checkpoint(**_weights_to_checkpoint(self.model),
                                           **self._progress, train_seconds=self._train_seconds)
    self._remove_save_leftovers()
    self._manager = self._new_manager()
    self._writers = {
        kind: tf.summary.create_file_writer(os.path.join(self._write_dir, SUMMARIES_DIR, kind))
        for kind in ("train", "eval")}

  def _build_step(self):
    """Builds the model, the optimiser and the step function."""
    keras.utils.set_random_seed(self._seed)
    if self._deterministic:
      tf.config.experimental.enable_op_determinism()
    with self._strategy.scope():
      model = self._model_fn()
      if not isinstance(model, keras.Model):
        raise TypeError(f"model_fn must return a keras.Model, got {type(model).__name__}.")
      if not model.built:
        raise ValueError("model_fn returned an unbuilt model: build it (keras.Input, or call "
                         "it once on a batch) so that its variables exist.")
      if not model.trainable_variables:
        raise ValueError("The model has no trainable variables: nothing to train.")
      optimizer = optimization.create_optimizer(**self._optimizer_args)
      # Read before wrapping: a LossScaleOptimizer does not forward it.
      self._clip_norm = optimizer.gradient_clip_norm
      self._loss_scaling = model.compute_dtype == "float16"
      optimizer = performance.configure_optimizer(optimizer, use_float16=self._loss_scaling)
      # The slots now, not in the first step: a `tf.function` whose first call makes
      # variables is traced twice, and the step's trace is most of a short run's first
      # step (a legacy Keras optimizer has no public `build`).
      optimizer._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access
    self.model = model
    self._optimizer = optimizer
    # Per-batch padding gives a few distinct sequence lengths: trace once for all of them.
    # No autograph: the step branches on Python values only, and converting the model's and
    # the optimizer's source was most of the tracing of a short run's first step.
    self._train_step = tf.function(self._distributed_step, reduce_retracing=True,
                                   autograph=False)
    self._loss_and_gradients = tf.function(self._replica_loss_and_gradients,
                                           jit_compile=self._jit_compile,
                                           reduce_retracing=True, autograph=False)

  def _new_manager(self) -> tf.train.CheckpointManager:
    """A manager of `write_dir`'s checkpoints, as its `checkpoint` state file lists them."""
    return tf.train.CheckpointManager(
        self._checkpoint, self._write_dir, max_to_keep=self._max_checkpoints_to_keep,
        checkpoint_name=CHECKPOINT_NAME)

  def _remove_save_leftovers(self):
    """Deletes what saves cut short left in `write_dir`; no save of this run is under way."""
    for pattern in _SAVE_LEFTOVERS:
      for path in tf.io.gfile.glob(os.path.join(self._write_dir, pattern)):
        logging.info("Deleting %s, left by a save that was cut short.", path)
        if tf.io.gfile.isdir(path):
          tf.io.gfile.rmtree(path)
        else:
          tf.io.gfile.remove(path)

  def _restore(self) -> int:
    """Restores the chief's latest readable checkpoint, if any; returns its step (0 without
    one). Unreadable newer ones are skipped, and deleted by the chief."""
    state = tf.train.get_checkpoint_state(self._model_dir)
    if state is None or not state.model_checkpoint_path:
      return 0
    # Newest first: the latest, then the older ones still on record.
    candidates = list(dict.fromkeys([state.model_checkpoint_path,
                                     *reversed(state.all_model_checkpoint_paths)]))
    unreadable = []
    for path in candidates:
      try:
        # What a checkpoint must hold to resume from; the time is read apart, below, so that
        # checkpoints saved before it was kept still resume.
        training_state = tf.train.Checkpoint(**_weights_to_restore(self.model, path),
                                             **self._progress)
        training_state.restore(path).assert_existing_objects_matched().expect_partial()
      except _UNREADABLE_CHECKPOINT_ERRORS as e:
        unreadable.append(path)
        logging.warning("Cannot read the checkpoint %s (%s: %s), probably a save cut short; "
                        "trying the one before it.", path, type(e).__name__,
                        (str(e).splitlines() or [""])[0][:200])
        continue
      except (AssertionError, ValueError) as e:
        raise ValueError(f"The checkpoint {path} does not match this model and optimiser "
                         f"({e}). Use a new model_dir=<folder> for a different model.") from e
      tf.train.Checkpoint(train_seconds=self._train_seconds).read(path).expect_partial()
      break
    else:
      raise ValueError(
          f"None of the checkpoints in {self._model_dir} can be read "
          f"({', '.join(os.path.basename(p) for p in candidates)}). Use a new model_dir=<folder>, "
          "or delete the checkpoints there to train from the start.")
    if unreadable:
      logging.warning("Resuming from %s instead of the unreadable %s.", path,
                      ", ".join(os.path.basename(p) for p in unreadable))
      if self._is_chief:
        for bad in unreadable:
          self._discard(bad)
    step = int(self._step.numpy())
    if step > self._num_train_steps:
      raise ValueError(f"{path} is at step {step}, past num_train_steps="
                       f"{self._num_train_steps}: use a new model_dir=<folder>.")
    logging.info("Resuming from %s at step %d.", path, step)
    return step

  def _discard(self, path: str):
    """Deletes the checkpoint `path` of `write_dir` and takes it off the state file's list."""
    state = tf.train.get_checkpoint_state(self._write_dir)
    kept = [(p, t) for p, t in zip(state.all_model_checkpoint_paths,
                                    state.all_model_checkpoint_timestamps or
                                    [None] * len(state.all_model_checkpoint_paths))
            if os.path.basename(p) != os.path.basename(path)] if state else []
    for name in tf.io.gfile.glob(path + ".*"):
      tf.io.gfile.remove(name)
    state_file = os.path.join(self._write_dir, "checkpoint")
    if kept:
      paths, timestamps = zip(*kept)
      tf.__internal__.train.update_checkpoint_state(
          self._write_dir, paths[-1], list(paths),
          all_model_checkpoint_timestamps=None if None in timestamps else list(timestamps),
          last_preserved_timestamp=state.last_preserved_timestamp, save_relative_paths=True)
    elif tf.io.gfile.exists(state_file):
      tf.io.gfile.remove(state_file)
    self._manager = self._new_manager()

  def _epoch_dataset(self, epoch: int) -> tf.data.Dataset:
    """The training data of `epoch`, checked to be `(features, labels)` pairs."""
    if isinstance(self._train_data, tf.data.Dataset):
      dataset = self._train_data
    else:
      dataset = self._train_data(_epoch_seed(self._seed, epoch))
      if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"train_data(seed) must return a tf.data.Dataset, got "
                        f"{type(dataset).__name__}.")
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
      raise ValueError("The training data must give (features, labels) pairs, got elements "
                       f"{spec}: map them to a 2-tuple.")
    return dataset

  def _batches(self, epoch: int, consumed: int) -> Iterator[Tuple[int, int, tuple]]:
    """Yields `(epoch, batches consumed in it, distributed batch)`, epoch after epoch."""
    while True:
      batches = self._strategy.experimental_distribute_dataset(
          self._epoch_dataset(epoch).skip(consumed))
      # Traced once for the data's spec, which leaves padded lengths open, and not first for
      # the first batch's shapes, then again relaxed at the second batch's.
      self._train_step.get_concrete_function(batches.element_spec)
      for batch in batches:
        consumed += 1
        yield epoch, consumed, batch
      if consumed == 0:
        raise ValueError(f"Epoch {epoch} of the training data has no batch: check the data "
                         "(a batch size larger than the data with drop_remainder=True?).")
      epoch, consumed = epoch + 1, 0

  def _distributed_step(self, batch: tuple) -> Dict[str, tf.Tensor]:
    """One training step.

    Args:
      batch: `(features, labels)`, distributed.

    Returns:
      Tensors, left on the device: `loss`, averaged over the global batch; `gradients_ok`,
      whether its gradient was finite before clipping, or overflowed only scaled (a step the
      loss scaler skipped while lowering the scale, which is still at least 1); and
      `num_examples`, of the global batch.
    """
    loss, grad_norm, num_examples = self._strategy.run(self._replica_step, args=batch)
    # The norm and the count were all-reduced: every replica holds the global value.
    first_replica = lambda value: self._strategy.experimental_local_results(value)[0]
    gradients_ok = tf.math.is_finite(first_replica(grad_norm))
    if self._loss_scaling:
      # Below a scale of 1, the true gradients themselves overflowed.
      gradients_ok = tf.logical_or(gradients_ok, self._optimizer.loss_scale >= 1.0)
    return dict(loss=self._strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                gradients_ok=gradients_ok, num_examples=first_replica(num_examples))

  def _replica_step(self, features, labels) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The step on one replica's share of the batch."""
    replica_context = tf.distribute.get_replica_context()
    # The global batch is counted rather than taken from a static shape, so that a short last
    # batch, split unevenly over the replicas, is still averaged correctly. int32: TPUs cannot
    # all-reduce int64.
    num_examples = replica_context.all_reduce(
        tf.distribute.ReduceOp.SUM, tf.shape(tf.nest.flatten(labels)[0])[0])
    loss, grads = self._loss_and_gradients(features, labels, num_examples)
    # Sum over the replicas first, then clip the global batch's gradient: the optimiser's own
    # clipping acts on each replica's share, so N replicas would not train as one device.
    grads = replica_context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    grads, grad_norm = tf.clip_by_global_norm(grads, self._clip_norm)
    self._optimizer.apply_gradients(zip(grads, self.model.trainable_variables),
                                    experimental_aggregate_gradients=False)
    return loss, grad_norm, num_examples

  def _replica_loss_and_gradients(self, features, labels,
                                  num_examples: tf.Tensor) -> Tuple[tf.Tensor, list]:
    """The replica's share of the global batch's mean loss, and its gradient (unscaled)."""
    variables = self.model.trainable_variables
    # Watching only the trainable variables keeps the tape from recording the frozen ones.
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(variables)
      outputs = self.model(features, training=True)
      per_example_loss = self._loss_fn(labels, outputs)
      if per_example_loss.shape.rank == 0:
        raise ValueError("loss_fn must return one loss per example (shape [batch]), got a "
                         "scalar: use reduction=keras.losses.Reduction.NONE.")
      # float32 whatever the compute dtype: a float16 mean of many losses loses digits.
      loss = tf.nn.compute_average_loss(tf.cast(per_example_loss, tf.float32),
                                        global_batch_size=num_examples)
      if self.model.losses:
        loss += tf.nn.scale_regularization_loss(
            tf.add_n([tf.cast(term, tf.float32) for term in self.model.losses]))
      scaled_loss = self._optimizer.get_scaled_loss(loss) if self._loss_scaling else loss
    grads = tape.gradient(scaled_loss, variables)
    if self._loss_scaling:
      grads = self._optimizer.get_unscaled_gradients(grads)
    return loss, grads

  def _train_loop(self, start_step: int, stop: list) -> TrainResult:
    """Trains from `start_step` to the end; saves, evaluates and logs on the way; stops
    after the step under way when `stop` holds a signal's number."""
    num_steps = self._num_train_steps
    progbar = keras.utils.Progbar(num_steps, verbose=int(self._progress_bar and self._is_chief),
                                  stateful_metrics=["loss", "learning_rate"])
    progbar.update(start_step)
    step, loss, num_examples, interval_losses = start_step, None, 0, []
    # The outputs of the steps taken since the last read, still on the device.
    unread = []
    self._loop_start_time = time.perf_counter()
    self._seconds_before = float(self._train_seconds.numpy())
    # The references of the explosion checks: where this call starts.
    self._start_weight_norm = self._weight_norm()
    self._first_loss = None
    batches = self._batches(int(self._epoch.numpy()), int(self._batch_in_epoch.numpy()))
    while step < num_steps:
      epoch, consumed, batch = next(batches)
      unread.append(self._train_step(batch))
      step += 1
      log_due = step % self._log_every_steps == 0 or step == num_steps
      save_due = step < num_steps and step % self._checkpoint_every_steps == 0
      eval_due = bool(step < num_steps and self._eval_every_steps and
                      step % self._eval_every_steps == 0)
      if log_due or save_due or eval_due or stop:
        losses, examples = self._read_steps(step - len(unread) + 1, unread)
        unread, loss = [], losses[-1]
        num_examples += examples
        interval_losses.extend(losses)
        # Where a checkpoint resumes from; only checkpoints read them.
        self._step.assign(step)
        self._epoch.assign(epoch)
        self._batch_in_epoch.assign(consumed)
      logs = None
      if log_due:
        logs = [("loss", float(np.mean(interval_losses))),
                # The rate of the step just taken: the optimiser has counted it already.
                ("learning_rate", optimization.current_learning_rate(self._optimizer,
                                                                     offset=-1))]
        self._write_summaries("train", dict(logs), step)
        interval_losses = []
      progbar.update(step, logs)
      # The end is saved and evaluated once, below.
      if save_due:
        self._save(step)
      if eval_due:
        self._evaluate(step)
      if stop and step < num_steps:
        self._stop(step, stop[0], progbar)
    if start_step < num_steps:
      self._save(num_steps)
    eval_metrics = self._evaluate(num_steps) if self._eval_fn else {}
    wall_time = time.perf_counter() - self._loop_start_time
    return TrainResult(
        step=num_steps, loss=loss, wall_time_s=wall_time,
        steps_per_sec=(num_steps - start_step) / wall_time,
        examples_per_sec=num_examples / wall_time, start_step=start_step,
        # The chief's copy: a worker's own folder is removed at the end.
        checkpoint_path=os.path.join(
            self._model_dir, os.path.basename(self._manager.latest_checkpoint)),
        eval_metrics=eval_metrics, train_seconds=self._seconds_before + wall_time)

  def _read_steps(self, first_step: int, outputs: list) -> Tuple[list, int]:
    """Reads the outputs of steps `first_step`, `first_step + 1`, ... from the device (the
    host waits for them here) and checks them in order.

    Returns:
      The steps' losses, and the examples they trained on.

    Raises:
      TrainingDivergedError: At the first step that diverged.
    """
    losses = tf.stack([output["loss"] for output in outputs]).numpy().tolist()
    gradients_ok = tf.stack([output["gradients_ok"] for output in outputs]).numpy()
    examples = tf.stack([output["num_examples"] for output in outputs]).numpy()
    for step, loss, step_gradients_ok in zip(range(first_step, first_step + len(outputs)),
                                             losses, gradients_ok):
      if self._first_loss is None and math.isfinite(loss):
        self._first_loss = (step, loss)
      problem = _loss_problem(loss, bool(step_gradients_ok), self._first_loss)
      if problem:
        # This loss is that of the weights the previous step left: if they were saved, that
        # checkpoint is not good either. (Nothing was saved since: every save reads first.)
        latest = self._manager.latest_checkpoint
        self._diverged(step, problem, bad_checkpoint=latest if latest and _checkpoint_step(
            latest) == step - 1 else None)
    return losses, int(examples.sum())

  def _save(self, step: int):
    """Saves the weights of `step` if they are finite and have not exploded."""
    norm, start_norm = self._weight_norm(), self._start_weight_norm
    if not math.isfinite(norm) or norm > WEIGHT_EXPLOSION_FACTOR * max(start_norm, 1.0):
      self._diverged(step, f"the update left the trainable weights with global norm {norm:.4g} "
                     f"(they started at {start_norm:.4g})")
    self._train_seconds.assign(self._seconds_before +
                               time.perf_counter() - self._loop_start_time)
    logging.debug("Saved %s.", self._manager.save(checkpoint_number=step))

  def _stop(self, step: int, signal_number: int, progbar: keras.utils.Progbar):
    """Saves `step` (unless its checkpoint is there) and raises `TrainingInterrupted`."""
    latest = self._manager.latest_checkpoint
    if latest is None or _checkpoint_step(latest) != step:
      self._save(step)
    progbar.update(step, finalize=True)  # Ends the bar's line before the message.
    raise TrainingInterrupted(signal_number, step, self._num_train_steps,
                              os.path.join(self._model_dir,
                                           os.path.basename(self._manager.latest_checkpoint)))

  def _weight_norm(self) -> float:
    return float(tf.linalg.global_norm(self.model.trainable_variables))

  def _diverged(self, step: int, problem: str, bad_checkpoint: Optional[str] = None):
    """Raises `TrainingDivergedError` after deleting `bad_checkpoint`, if given."""
    if bad_checkpoint:
      self._discard(bad_checkpoint)
    good = self._manager.latest_checkpoint
    deleted = (f"The checkpoint of step {step - 1}, whose weights gave that loss, was deleted. "
               if bad_checkpoint else "")
    raise TrainingDivergedError(
        f"Training diverged at step {step}: {problem}. {deleted}Nothing was saved after it; "
        f"the last good checkpoint is {good or 'none'}. Lower the learning rate (now "
        f"learning_rate={self._optimizer_args['learning_rate']:g}) and train again in a new "
        "model_dir=<folder> (a rerun in this one resumes from "
        f"{os.path.basename(good) if good else 'the start'}).")

  def _evaluate(self, step: int) -> Dict[str, float]:
    metrics = {name: float(value) for name, value in self._eval_fn(self.model).items()}
    self._write_summaries("eval", metrics, step)
    logging.info("Step %d evaluation: %s", step, metrics)
    return metrics

  def _write_summaries(self, kind: str, scalars: Mapping[str, float], step: int):
    with self._writers[kind].as_default():
      for name, value in scalars.items():
        tf.summary.scalar(name, value, step=step)


def trained_variables(model: keras.Model) -> list:
  """The variables of `model` that training can change, in the model's order: its trainable
  ones and those made untrainable by nature (a counter, a moving average), not the ones a
  frozen layer holds, which stay as `model_fn` built them."""
  trainable = {id(variable) for variable in model.trainable_variables}
  return [variable for variable in model.variables
          if id(variable) in trainable or not variable.trainable]


def restore_trained_weights(model: keras.Model, checkpoint_path: str) -> keras.Model:
  """Assigns the trained weights of a run's checkpoint to `model`, built by the run's
  `model_fn` (its frozen weights, not in the checkpoint, come from there); returns `model`.
  Reads checkpoints of the whole model too, as versions before 2026-11-29 saved."""
  tf.train.Checkpoint(**_weights_to_restore(model, checkpoint_path)).read(
      checkpoint_path).expect_partial()
  return model


def _weights_to_checkpoint(model: keras.Model) -> Dict[str, object]:
  return dict(trained=trained_variables(model))


def _weights_to_restore(model: keras.Model, checkpoint_path: str) -> Dict[str, object]:
  """What of `model` the checkpoint holds: the trained variables, or (saved by earlier
  versions) the whole model."""
  # Not `tf.train.list_variables`, which first asks whether the path is a folder: on `ram://`
  # a checkpoint's prefix, with its files under it, reads as one.
  names = tf.compat.v1.train.NewCheckpointReader(checkpoint_path).get_variable_to_shape_map()
  if any(name.startswith(_WHOLE_MODEL_PREFIX) for name in names):
    return dict(model=model)
  return _weights_to_checkpoint(model)


def _loss_problem(loss: float, grads_finite: bool,
                  first_loss: Optional[Tuple[int, float]]) -> Optional[str]:
  """What is wrong with a step's loss and gradient, or `None`."""
  if not math.isfinite(loss):
    return f"loss {loss}"
  if not grads_finite:
    return f"loss {loss:.4g}, gradients not finite"
  first_step, reference = first_loss
  if loss > LOSS_EXPLOSION_FACTOR * max(reference, 1.0):
    return (f"loss {loss:.4g}, over {LOSS_EXPLOSION_FACTOR:g} times the {reference:.4g} of "
            f"step {first_step}")
  return None


def _checkpoint_step(path: str) -> int:
  return int(path.rsplit("-", 1)[1])


def _epoch_seed(seed: int, epoch: int) -> int:
  """The shuffle seed of `epoch` of the run seeded with `seed`.

  Mixed from both, so that runs with nearby seeds do not share epochs as `seed + epoch` would.
  """
  return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])

"""The one run driver: train a `Task`'s model, evaluate it, export it, record the run.

Every task kind and every grid of runs goes through `run`, so resumption, the records and the
exports behave the same for classification, GLUE and SQuAD. Rerunning into a folder resumes
an interrupted run; on a finished one nothing trains: the recorded results come back, after
the evaluations they lack and an export they do not record, from the final checkpoint.
"""

import time
from typing import Any, Dict, Optional

from absl import logging
import tensorflow as tf

from keras_adapters.core import base_task
from keras_adapters.core import run_records
from keras_adapters.models import parameter_summary
from keras_adapters.training import distribution
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import precision
from keras_adapters.utils import provenance
from keras_adapters.utils import run_lock


def run(task: base_task.Task, model_dir: str, export_dir: Optional[str] = None,
        progress_bar: bool = True) -> Dict[str, Any]:
  """Trains, evaluates and optionally exports `task`'s model in `model_dir`; resumable.

  Everything is checked before the first step: the settings, the data, that the base can
  serve them, that `model_dir` holds no run with other settings, that the folders can be
  written.

  Args:
    task: The task, with its data and config.
    model_dir: Folder of `run.json`, checkpoints, logs, evaluation files and `results.json`.
    export_dir: If set, receives the task's export (a serving SavedModel and `adapters/`).
    progress_bar: Whether to show the training progress bar.

  Returns:
    The results also written to `model_dir/results.json`.

  Raises:
    run_records.RunSettingsError: `model_dir` holds a run with other settings.
    run_lock.ModelDirBusyError: Another run is using `model_dir`.
    ValueError: Bad data, or a setting the base or the preprocessing cannot serve; the
      message names it.
    PermissionError: `model_dir` or `export_dir` cannot be written.
    trainer_lib.TrainingInterrupted: SIGTERM or Ctrl-C stopped training (at a checkpoint).
  """
  runtime = task.config.runtime
  # First: a multi-worker cluster or a TPU is set up before TensorFlow runs anything else.
  strategy = distribution.get_strategy(runtime.strategy, tpu=runtime.tpu)
  # A precision that the user's cap on the CPU kernels would crash, before anything is read
  # (a TPU computes in its own kernels).
  if not runtime.on_tpu:
    cpu_kernels.check_sixteen_bit(runtime.mixed_precision)
  # Folders that cannot be used (a file, storage that cannot be reached), before the base
  # is read.
  atomic_io.check_output_dir(model_dir, "model_dir")
  if export_dir:
    atomic_io.check_output_dir(export_dir, "export_dir")
  task.prepare()
  # Settings that only the base's depth can refuse (`lora_leave_out` naming every layer), before
  # anything is written: a refused run leaves its folders as they were.
  task.config.model.validate_for(task.read_base().config["num_layers"])
  definition = task.definition()
  run_records.check_run_dir(model_dir, definition)
  if export_dir:
    atomic_io.make_writable_dir(export_dir, "export_dir")
    task.check_export_dir(export_dir)
  atomic_io.make_writable_dir(model_dir, "model_dir")
  # One run per folder: a second one would resume from this one's checkpoints, and both
  # would write them. Only the chief writes model_dir, so only the chief holds it.
  with run_lock.hold(model_dir, enabled=strategy.extended.should_checkpoint), \
      precision.policy_scope(runtime.mixed_precision):
    return _run_in_locked_dir(task, model_dir, export_dir, progress_bar, strategy, definition)


def _run_in_locked_dir(task, model_dir, export_dir, progress_bar, strategy, definition):
  """`run` once everything is checked and `model_dir` is this run's."""
  config = task.config
  is_chief = strategy.extended.should_checkpoint
  if is_chief:
    atomic_io.remove_leftovers(model_dir)
    run_records.write_definition(model_dir, definition)
  results = run_records.read_results(model_dir)
  pending = task.pending_evaluations(results)
  to_export = bool(export_dir) and not task.exported(results, export_dir)
  if results is not None and not pending and not to_export:
    return results

  start = time.time()
  steps_per_epoch = task.steps_per_epoch()
  num_train_steps = max(1, round(config.trainer.epochs * steps_per_epoch))
  trainer = trainer_lib.Trainer(
      task.built_model, task.loss, task.train_dataset,
      num_train_steps=num_train_steps, learning_rate=config.trainer.learning_rate,
      model_dir=model_dir, warmup_fraction=config.trainer.warmup_fraction,
      weight_decay=config.trainer.weight_decay, strategy=strategy,
      checkpoint_every_steps=config.trainer.checkpoint_every_steps, seed=config.trainer.seed,
      log_every_steps=max(1, min(50, num_train_steps // 10)), progress_bar=progress_bar,
      jit_compile=config.runtime.jit_compile)
  if results is not None and trainer.finished_result() is None:
    raise ValueError(
        f"{model_dir} holds the results of a finished run but not its final checkpoint, so "
        "it cannot evaluate again or export. Use a new model_dir=<folder>, or pass the data "
        "and export_dir it was run with.")
  earlier = (results or {}).get(provenance.KEY, [])
  sessions = (run_records.record_session(model_dir, earlier) if is_chief
              else earlier + [provenance.record()])
  train_result = trainer.train()
  model = trainer.model
  if model is None:  # Finished earlier: restore the final weights.
    with strategy.scope():
      model = task.built_model()
    trainer_lib.restore_trained_weights(model, train_result.checkpoint_path)

  if results is None:
    results = dict(task=task.name, config=config.settings(), num_train_steps=num_train_steps,
                   train_seconds=train_result.train_seconds,
                   parameters=_parameter_counts(model),
                   **task.initial_results(train_result, steps_per_epoch))
  task.evaluate(model, results, pending, model_dir if is_chief else None)
  if to_export:
    logging.info("Exporting to %s...", export_dir)
    task.export(model, export_dir)
    results["export_dir"] = export_dir
  results["total_seconds"] = results.get("total_seconds", 0.0) + time.time() - start
  # One entry per session that trained, evaluated or exported, stopped ones included.
  results[provenance.KEY] = sessions
  if is_chief:
    run_records.write_results(model_dir, results)
  return results


def _parameter_counts(model) -> Dict[str, Any]:
  summary = parameter_summary.parameter_summary(model)
  return dict(trainable=summary.trainable, total=summary.total, base=summary.base,
              adapters=summary.adapters,
              trainable_percent_of_base=100.0 * summary.trainable / summary.base)


"""One experiment: train a task model on a split, evaluate it, export it, record the result.

Shared by `experiments/run_glue.py`, `experiments/run_classification.py` and the sweeps, so
that every method (adapters, LayerNorm-only, top-k, full fine-tuning) runs the same code.
"""

import dataclasses
import json
import math
import os
import time
from typing import Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import task_export
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import parameter_summary
from keras_adapters.models import saving
from keras_adapters.tasks import examples as examples_lib
from keras_adapters.tasks import features
from keras_adapters.tasks import metrics as metrics_lib
from keras_adapters.training import distribution
from keras_adapters.training import optimization
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io

RESULTS_FILE = "results.json"


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """How one model is trained. Field names match the command-line flags."""
  hub_handle: str
  preprocess_handle: str
  tuning: str = "adapters"
  top_k: Optional[int] = None
  adapter_size: Optional[int] = 64
  adapter_init_stddev: float = 1e-2
  pooling: str = "cls"
  learning_rate: float = 3e-4
  epochs: float = 3.0
  batch_size: int = 32
  max_seq_length: int = 128
  seed: int = 0
  weight_decay: float = optimization.DEFAULT_WEIGHT_DECAY
  warmup_fraction: float = optimization.DEFAULT_WARMUP_FRACTION
  checkpoint_every_steps: int = 200
  strategy: str = "default"
  tpu: Optional[str] = None

  def __post_init__(self):
    if self.tuning != "adapters" and self.adapter_size is not None:
      # Baselines have no adapters: one config field, not a contradiction to resolve later.
      object.__setattr__(self, "adapter_size", None)
    if self.epochs <= 0 or self.batch_size <= 0 or self.learning_rate <= 0:
      raise ValueError(
          f"epochs, batch_size and learning_rate must be positive, got {self.epochs}, "
          f"{self.batch_size}, {self.learning_rate}.")


def run_task(spec: examples_lib.TaskSpec,
             splits: Mapping[str, examples_lib.TextExamples],
             config: RunConfig,
             model_dir: str,
             export_dir: Optional[str] = None,
             progress_bar: bool = True):
  """Trains on `splits["train"]`, scores every other labelled split, optionally exports.

  Rerunning with the same `model_dir` resumes an interrupted run and returns a finished one's
  recorded results without training again.

  Args:
    spec: The task.
    splits: Split name → examples; `"train"` is required. Unlabelled splits (a GLUE test set)
      get predictions instead of metrics.
    config: The run's hyper-parameters.
    model_dir: Folder for checkpoints, logs and `results.json`.
    export_dir: If set, receives `saved_model/` (strings in, probabilities out) and
      `adapters/` (the adapter-only artifact).
    progress_bar: Whether to show the training progress bar.

  Returns:
    The results dict also written to `model_dir/results.json`: metrics per split, predictions
    of unlabelled splits, parameter counts, timings and the config.
  """
  results_path = os.path.join(model_dir, RESULTS_FILE)
  if os.path.isfile(results_path):
    with open(results_path, encoding="utf-8") as f:
      return json.load(f)
  if "train" not in splits:
    raise ValueError(f"run_task needs a 'train' split; got {sorted(splits)}.")

  strategy = distribution.get_strategy(config.strategy, tpu=config.tpu)
  preprocessor = hub.load(config.preprocess_handle)
  train = splits["train"]
  steps_per_epoch = math.ceil(len(train) / config.batch_size)
  num_train_steps = max(1, round(config.epochs * steps_per_epoch))

  def train_data(shuffle_seed):
    return features.make_dataset(
        train, preprocessor, max_seq_length=config.max_seq_length,
        batch_size=config.batch_size, shuffle=True, seed=shuffle_seed)

  def model_fn():
    encoder = adapted_bert.AdaptedBert(
        config.hub_handle, adapter_size=config.adapter_size, tuning=config.tuning,
        top_k=config.top_k, adapter_init_stddev=config.adapter_init_stddev)
    return classifier.build_classifier(encoder, spec.num_classes, pooling=config.pooling)

  trainer = trainer_lib.Trainer(
      model_fn, _loss_fn(spec), train_data,
      num_train_steps=num_train_steps, learning_rate=config.learning_rate,
      model_dir=model_dir, warmup_fraction=config.warmup_fraction,
      weight_decay=config.weight_decay, strategy=strategy,
      checkpoint_every_steps=config.checkpoint_every_steps, seed=config.seed,
      log_every_steps=max(1, min(50, num_train_steps // 10)), progress_bar=progress_bar)
  start = time.time()
  train_result = trainer.train()
  model = trainer.model
  if model is None:  # Finished earlier but results were never written: restore the weights.
    with strategy.scope():
      model = model_fn()
    tf.train.Checkpoint(model=model).restore(train_result.checkpoint_path).expect_partial()

  steps_run = max(train_result.step - train_result.start_step, 1)
  results = dict(
      task=spec.name, config=dataclasses.asdict(config),
      train_examples=len(train), num_train_steps=num_train_steps,
      train_seconds=train_result.wall_time_s,
      seconds_per_epoch=train_result.wall_time_s / steps_run * steps_per_epoch,
      examples_per_second=train_result.examples_per_sec,
      parameters=_parameter_counts(model), metrics={}, predictions={})
  for name, split in splits.items():
    if name == "train":
      continue
    scores = predict(model, split, preprocessor, config)
    if split.labels is None:
      results["predictions"][name] = dict(ids=list(split.ids), values=_prediction_values(
          spec, scores))
    else:
      results["metrics"][name] = metrics_lib.compute_metrics(
          spec, split.labels, _prediction_values(spec, scores))
  if export_dir:
    logging.info("Exporting the SavedModel and the adapter-only artifact to %s...", export_dir)
    task_export.export_task(
        model, preprocessor, os.path.join(export_dir, "saved_model"),
        text_fields=spec.text_fields, seq_length=config.max_seq_length,
        label_names=spec.label_names)
    saving.save_adapters(
        model, os.path.join(export_dir, "adapters"),
        metadata=dict(task=spec.name, text_fields=list(spec.text_fields),
                      label_names=None if spec.is_regression else list(spec.label_names),
                      max_seq_length=config.max_seq_length),
        label_names=None if spec.is_regression else spec.label_names,
        preprocessing=adapter_artifact.PreprocessingConfig(
            config.preprocess_handle, spec.text_fields, config.max_seq_length))
    results["export_dir"] = export_dir
  results["total_seconds"] = time.time() - start
  atomic_io.write_json(results_path, results)
  return results


def predict(model, examples, preprocessor, config):
  """Logits (or scores) of `model` on `examples`, in example order, as a numpy array."""
  dataset = features.make_dataset(
      examples, preprocessor, max_seq_length=config.max_seq_length,
      batch_size=max(config.batch_size, 64), shuffle=False)

  @tf.function(reduce_retracing=True, autograph=False)
  def call(inputs):
    return model(inputs, training=False)

  outputs = [call(batch[0] if isinstance(batch, tuple) else batch).numpy()
             for batch in dataset]
  return np.concatenate(outputs, axis=0)


def _prediction_values(spec, outputs):
  return outputs[:, 0].tolist() if spec.is_regression else np.argmax(outputs, -1).tolist()


def _loss_fn(spec):
  if spec.is_regression:
    return lambda labels, outputs: tf.square(tf.cast(labels, tf.float32) - outputs[:, 0])
  return keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=keras.losses.Reduction.NONE)


def _parameter_counts(model):
  summary = parameter_summary.parameter_summary(model)
  return dict(trainable=summary.trainable, total=summary.total, base=summary.base,
              adapters=summary.adapters,
              trainable_percent_of_base=100.0 * summary.trainable / summary.base)

"""Text classification and regression (GLUE, the paper's extra tasks, a user's CSV) as a `Task`.

`run_task` trains a classifier on `splits["train"]` through the run driver
(`core.train_lib.run`), scores every other labelled split, predicts the unlabelled ones (a
GLUE test set) and exports a SavedModel (strings in, probabilities out) and the adapter-only
artifact. The record of a run (`run.json`) holds the task, a fingerprint of its training data
and of the base encoder, and every setting that changes what is learnt.
"""

import itertools
import json
import os
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.core import base_task
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.core import train_lib
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import features
from keras_adapters.data import metrics as metrics_lib
from keras_adapters.data import split_checks
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.serving import task_export
from keras_adapters.utils import errors

_RUN_FORMAT_VERSION = 1


class ClassificationTask(base_task.Task):
  """A classification or regression task (`spec`) on its splits.

  Args:
    spec: The task.
    splits: Split name → examples; `"train"` is required. Unlabelled splits get predictions
      instead of metrics.
    config: The run's settings.
  """

  def __init__(self, spec: examples_lib.TaskSpec,
               splits: Mapping[str, examples_lib.TextExamples],
               config: config_definitions.ExperimentConfig):
    super().__init__(config)
    self.spec = spec
    self.splits = dict(splits)
    self._preprocessor = None

  @property
  def name(self) -> str:
    return self.spec.name

  @property
  def _evaluated(self):
    return {name: split for name, split in self.splits.items() if name != "train"}

  def prepare(self) -> None:
    check_splits(self.spec, self.splits)
    check_static_batch(self.config, len(self.splits["train"]))
    model, seq_length = self.config.model, self.config.data.max_seq_length
    # Each text field needs a [SEP], and one token of text at least: refused here, not when
    # the first batch is packed, with the progress bar on screen.
    needed = len(self.spec.text_fields) + 2
    if seq_length < needed:
      raise errors.UsageError(
          f"max_seq_length={seq_length} leaves no room for text beside [CLS] and "
          f"{len(self.spec.text_fields)} [SEP]; use at least {needed} (usually 128).")
    base = self.read_base()
    compatibility.check_seq_length(seq_length, base.config)
    self._preprocessor = compatibility.load_preprocessor(model.preprocess_handle)
    compatibility.check_preprocessor(self._preprocessor, base.config,
                                     encoder_tokenizer=base.tokenizer,
                                     handle=model.preprocess_handle)
    compatibility.check_unknown_tokens(
        self._preprocessor, itertools.chain.from_iterable(zip(*self.splits["train"].texts)),
        base.config, base.tokenizer, hub_handle=model.hub_handle,
        preprocess_handle=model.preprocess_handle)

  def definition(self) -> Dict[str, Any]:
    spec, train = self.spec, self.splits["train"]
    return dict(
        format_version=_RUN_FORMAT_VERSION, task=spec.name, text_fields=list(spec.text_fields),
        label_names=None if spec.is_regression else list(spec.label_names),
        train_examples=len(train), train_fingerprint=data_fingerprint(train),
        base_fingerprint=self.read_base().fingerprint, config=self.config.definition())

  def check_export_dir(self, export_dir: str) -> None:
    for name, marker in (("saved_model", "saved_model.pb"),
                         ("adapters", adapter_artifact.CONFIG_FILE)):
      target = os.path.join(export_dir, name)
      if (tf.io.gfile.isdir(target) and tf.io.gfile.listdir(target)
          and not tf.io.gfile.exists(os.path.join(target, marker))):
        raise ValueError(
            f"export_dir={export_dir!r} holds a folder {name}/ that is not an export; "
            "exporting would replace it. Pass another export_dir, or move that folder away.")
    # Nor is another kind of export (a multi-task one) replaced by this task's.
    task_export.check_export_dir(os.path.join(export_dir, "saved_model"),
                                 task_export.TASK_EXPORT, run_records.RunSettingsError, fix=(
                                     "Pass another export_dir, or move that folder away."))

  def steps_per_epoch(self) -> int:
    return features.num_batches(len(self.splits["train"]), self.config.trainer.batch_size,
                                drop_remainder=self.config.static_shapes)

  def build_model(self) -> keras.Model:
    model = self.config.model
    encoder = adapted_bert.AdaptedBert(model.hub_handle, **self.config.adapted_bert_options)
    return classifier.build_classifier(encoder, self.spec.num_classes, pooling=model.pooling)

  def loss(self, labels, outputs):
    if self.spec.is_regression:
      return tf.square(tf.cast(labels, tf.float32) - outputs[:, 0])
    return keras.losses.sparse_categorical_crossentropy(labels, outputs, from_logits=True)

  def train_dataset(self, shuffle_seed: int) -> tf.data.Dataset:
    config = self.config
    return features.make_dataset(
        self.splits["train"], self._preprocessor, max_seq_length=config.data.max_seq_length,
        batch_size=config.trainer.batch_size, shuffle=True, seed=shuffle_seed,
        dynamic_padding=not config.static_shapes, drop_remainder=config.static_shapes)

  def initial_results(self, train_result, steps_per_epoch) -> Dict[str, Any]:
    steps_run = max(train_result.step - train_result.start_step, 1)
    return dict(train_examples=len(self.splits["train"]),
                seconds_per_epoch=train_result.wall_time_s / steps_run * steps_per_epoch,
                examples_per_second=train_result.examples_per_sec, metrics={},
                predictions={}, split_fingerprints={})

  def pending_evaluations(self, results: Optional[Mapping[str, Any]]) -> List[str]:
    if results is None:
      return list(self._evaluated)
    return [name for name, split in self._evaluated.items()
            if not _scored(results, name, data_fingerprint(split))]

  def evaluate(self, model, results, pending, output_dir) -> None:
    del output_dir  # The scores go in the results alone.
    outputs = predict_each(model, [self._evaluated[name] for name in pending],
                           self._preprocessor, self.config)
    for name, split_outputs in zip(pending, outputs):
      split = self._evaluated[name]
      values = _prediction_values(self.spec, split_outputs)
      if split.labels is None:
        results["metrics"].pop(name, None)
        results["predictions"][name] = dict(ids=list(split.ids), values=values)
      else:
        results["predictions"].pop(name, None)
        results["metrics"][name] = metrics_lib.compute_metrics(self.spec, split.labels, values)
      results.setdefault("split_fingerprints", {})[name] = data_fingerprint(split)

  def exported(self, results, export_dir) -> bool:
    return super().exported(results, export_dir) and all(
        tf.io.gfile.exists(os.path.join(export_dir, *path)) for path in (
            ("saved_model", "saved_model.pb"), ("adapters", adapter_artifact.CONFIG_FILE)))

  def export(self, model, export_dir) -> None:
    spec, seq_length = self.spec, self.config.data.max_seq_length
    label_names = None if spec.is_regression else list(spec.label_names)
    task_export.export_task(
        model, self._preprocessor, os.path.join(export_dir, "saved_model"),
        text_fields=spec.text_fields, seq_length=seq_length, label_names=spec.label_names)
    saving.save_adapters(
        model, os.path.join(export_dir, "adapters"),
        metadata=dict(task=spec.name, text_fields=list(spec.text_fields),
                      label_names=label_names, max_seq_length=seq_length),
        label_names=label_names,
        preprocessing=adapter_artifact.PreprocessingConfig(
            self.config.model.preprocess_handle, spec.text_fields, seq_length))


def run_task(spec: examples_lib.TaskSpec,
             splits: Mapping[str, examples_lib.TextExamples],
             config: config_definitions.ExperimentConfig,
             model_dir: str,
             export_dir: Optional[str] = None,
             progress_bar: bool = True) -> Dict[str, Any]:
  """Trains on `splits["train"]`, scores every other labelled split, optionally exports.

  `train_lib.run(ClassificationTask(spec, splits, config), ...)`: see there for resumption,
  the records and the errors.

  Returns:
    The results also written to `model_dir/results.json`: metrics per split, predictions of
    unlabelled splits, parameter counts, timings and the config.
  """
  return train_lib.run(ClassificationTask(spec, splits, config), model_dir,
                       export_dir=export_dir, progress_bar=progress_bar)


def check_run_dir(spec: examples_lib.TaskSpec,
                  splits: Mapping[str, examples_lib.TextExamples],
                  config: config_definitions.ExperimentConfig, model_dir: str) -> None:
  """Raises `run_records.RunSettingsError` if `model_dir` holds a run with other settings.

  `run_task` checks this itself; calling it first lets a series of runs (a comparison, a
  sweep) stop before the first one trains.
  """
  check_splits(spec, splits)
  run_records.check_run_dir(model_dir, ClassificationTask(spec, splits, config).definition())


def check_static_batch(config, num_examples: int) -> None:
  """Refuses a batch larger than the training data when every batch has one shape
  (`jit_compile`, TPUs): the last, smaller batch is dropped, and no batch would be left."""
  batch_size = config.trainer.batch_size
  if not config.static_shapes or num_examples >= batch_size:
    return
  why = ("jit_compile=True" if config.runtime.jit_compile else
         f"strategy={config.runtime.strategy!r}")
  raise errors.UsageError(
      f"batch_size={batch_size} is more than the {num_examples} training examples: with "
      f"{why} every batch has one shape (static shapes), so the last, smaller batch is "
      f"dropped, and none would be left. Give batch_size={num_examples} or less"
      + (", or jit_compile=False." if config.runtime.jit_compile else "."))


# Defined beside the data, for the Keras 3 runner too; their old paths stay.
check_splits = split_checks.check_splits
data_fingerprint = split_checks.data_fingerprint


def _scored(results: Mapping[str, Any], name: str, fingerprint: str) -> bool:
  """Whether `results` hold the scores or predictions of split `name` with this data."""
  recorded = results.get("split_fingerprints")
  if recorded is None:  # Results of a run from before fingerprints: trusted by name.
    return name in results["metrics"] or name in results["predictions"]
  return recorded.get(name) == fingerprint


def predict(model, examples, preprocessor, config):
  """Logits (or scores) of `model` on `examples`, in example order, as a numpy array."""
  return predict_each(model, [examples], preprocessor, config)[0]


def predict_each(model, splits, preprocessor, config):
  """`predict` of each of `splits`, by one `tf.function`: traced for the first split, not
  again for each."""
  @tf.function(reduce_retracing=True, autograph=False, jit_compile=config.runtime.jit_compile)
  def call(inputs):
    return model(inputs, training=False)

  features_of = lambda batch: batch[0] if isinstance(batch, tuple) else batch
  predictions = []
  for examples in splits:
    dataset = features.make_dataset(
        examples, preprocessor, max_seq_length=config.data.max_seq_length,
        batch_size=max(config.trainer.batch_size, 64), shuffle=False,
        dynamic_padding=not config.static_shapes, pad_last_batch=config.static_shapes)
    # Traced once for the data's spec, which leaves padded lengths open, and not first for
    # the first batch's shapes, then again relaxed at the second batch's.
    call.get_concrete_function(features_of(dataset.element_spec))
    outputs = [call(features_of(batch)).numpy() for batch in dataset]
    # Without the padding rows of a static-shape last batch.
    predictions.append(np.concatenate(outputs, axis=0)[:len(examples)])
  return predictions


def _prediction_values(spec, outputs):
  return outputs[:, 0].tolist() if spec.is_regression else np.argmax(outputs, -1).tolist()

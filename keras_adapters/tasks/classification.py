"""One experiment: train a task model on a split, evaluate it, export it, record the result.

Shared by `experiments/run_glue.py`, `experiments/run_classification.py` and the sweeps, so
that every method (adapters, LayerNorm-only, top-k, full fine-tuning) runs the same code.

A run's folder records what defines the run (`run.json`: the task, a fingerprint of its
training data and of the base encoder, every setting that changes what is learnt), so that
rerunning into it resumes or returns that same run, and anything else is refused with the
settings that differ. Everything is checked before the first step: the settings, the data,
that the base can serve them, that the folders can be written.
"""

import dataclasses
import hashlib
import itertools
import json
import math
import numbers
import os
import time
from typing import Any, Dict, List, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import task_export
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import parameter_summary
from keras_adapters.models import saving
from keras_adapters.models import tuning as tuning_lib
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import features
from keras_adapters.data import metrics as metrics_lib
from keras_adapters.training import distribution
from keras_adapters.training import optimization
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import precision
from keras_adapters.utils import run_lock

RESULTS_FILE = "results.json"
RUN_FILE = "run.json"
_RUN_FORMAT_VERSION = 1
# RunConfig fields that say how a run executes, not what it learns: a run may resume under
# other values (resumption is exact whatever the checkpoint interval).
EXECUTION_FIELDS = ("strategy", "tpu", "checkpoint_every_steps")
# RunConfig fields added after runs were first recorded, with the value every run recorded
# before them had.
_FIELDS_ADDED_LATER = dict(mixed_precision="float32", jit_compile=False)


class RunSettingsError(ValueError):
  """A run folder holds a run with other settings; the message names them."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """How one model is trained. Field names match the command-line flags.

  Every value is checked when the config is made; a bad one is a `ValueError` naming the
  field, e.g. `epochs=nan`.
  """
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
  # `None` is what the strategy implies: bfloat16 and XLA on TPUs (the Model Garden's TPU
  # recipe), float32 and no XLA elsewhere.
  mixed_precision: Optional[str] = None
  jit_compile: Optional[bool] = None
  # `AdapterConfig` fields beyond the ones above (placement, residual and LayerNorm options
  # under AdapterHub's names, activation, reduction_factor, leave_out).
  adapter_config: Optional[Dict[str, Any]] = None

  def __post_init__(self):
    if self.tuning != "adapters" and self.adapter_size is not None:
      # Baselines have no adapters: one config field, not a contradiction to resolve later.
      object.__setattr__(self, "adapter_size", None)
    _check_choice("tuning", self.tuning, tuning_lib.TUNING_POLICIES)
    _check_choice("pooling", self.pooling, classifier.POOLINGS)
    _check_choice("strategy", str(self.strategy).lower(), distribution.STRATEGIES)
    on_tpu = str(self.strategy).lower() == "tpu"
    if self.mixed_precision is None:
      object.__setattr__(self, "mixed_precision", "bfloat16" if on_tpu else "float32")
    _check_choice("mixed_precision", self.mixed_precision, precision.PRECISIONS)
    if self.jit_compile is None:
      object.__setattr__(self, "jit_compile", on_tpu)
    if not isinstance(self.jit_compile, bool):
      raise ValueError(f"jit_compile must be True or False, got {self.jit_compile!r}.")
    for name in ("learning_rate", "epochs"):
      _check_number(name, getattr(self, name), above=0.0)
    _check_adapter_init_stddev(self.adapter_init_stddev)
    _check_number("weight_decay", self.weight_decay, at_least=0.0)
    _check_number("warmup_fraction", self.warmup_fraction, at_least=0.0, below=1.0)
    _check_integer("batch_size", self.batch_size, 1)
    _check_integer("max_seq_length", self.max_seq_length, compatibility.MIN_SEQ_LENGTH)
    _check_integer("seed", self.seed, 0)
    _check_integer("checkpoint_every_steps", self.checkpoint_every_steps, 1)
    if self.tuning == "adapters" or self.adapter_size is not None:
      _check_integer("adapter_size", self.adapter_size, 1)
    if self.top_k is not None:
      _check_integer("top_k", self.top_k, 1)
    self.adapter_settings()  # Raises on fields AdapterConfig refuses.

  @property
  def static_shapes(self) -> bool:
    """Whether every batch has one shape: XLA compiles a program per shape, and TPUs compile
    every step. Training pads to `max_seq_length` and drops the last partial batch;
    evaluation pads its last batch with padding rows."""
    return self.jit_compile or str(self.strategy).lower() == "tpu"

  def adapter_settings(self):
    """The run's `AdapterConfig`: the adapter fields above with `adapter_config`'s."""
    extra = dict(self.adapter_config or {})
    repeated = sorted(set(extra) & set(_ADAPTER_FIELDS.values()))
    if repeated:
      flags = [name for name, field in _ADAPTER_FIELDS.items() if field in repeated]
      raise ValueError(f"adapter_config={extra} sets {repeated}, which have their own settings: "
                       f"give them as {flags}.")
    own = {field: getattr(self, name) for name, field in _ADAPTER_FIELDS.items()}
    try:
      return adapter_config.AdapterConfig.from_dict({**own, **extra})
    except (TypeError, ValueError) as e:
      raise ValueError(f"adapter_config={extra}: {e}") from None


# RunConfig fields that are AdapterConfig fields, by their AdapterConfig names.
_ADAPTER_FIELDS = dict(adapter_size="adapter_size", adapter_init_stddev="init_stddev",
                       tuning="tuning", top_k="top_k")


def _check_choice(name, value, choices):
  if value not in choices:
    raise ValueError(f"{name}={value!r}: choose one of {', '.join(choices)}.")


def _check_number(name, value, *, above=None, at_least=None, below=None):
  if above == 0 and at_least is None and below is None:
    expected = "must be positive and finite"
  else:
    bounds = [f"above {above:g}" if above is not None else None,
              f"at least {at_least:g}" if at_least is not None else None,
              f"below {below:g}" if below is not None else None]
    expected = f"must be a finite number {' and '.join(b for b in bounds if b)}"
  if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
      or (above is not None and value <= above) or (at_least is not None and value < at_least)
      or (below is not None and value >= below)):
    raise ValueError(f"{name}={value!r}: {expected}.")


def _check_integer(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
    raise ValueError(f"{name}={value!r}: must be a whole number of at least {minimum}.")


def _check_adapter_init_stddev(value):
  """`AdapterConfig`'s rule for the value it receives (0, exact identity adapters, is
  allowed), named as the flag."""
  try:
    adapter_config.AdapterConfig(init_stddev=value)
  except ValueError as e:
    raise ValueError(f"adapter_init_stddev={value!r}: {e}") from None


def run_task(spec: examples_lib.TaskSpec,
             splits: Mapping[str, examples_lib.TextExamples],
             config: RunConfig,
             model_dir: str,
             export_dir: Optional[str] = None,
             progress_bar: bool = True) -> Dict[str, Any]:
  """Trains on `splits["train"]`, scores every other labelled split, optionally exports.

  Rerunning with the same `model_dir` and settings resumes an interrupted run; on a finished
  one it trains nothing: it returns the recorded results, after scoring the splits they lack
  and exporting to an `export_dir` they do not record, from the final checkpoint. Other
  settings (another task, training data, base or hyper-parameter) are refused.

  Args:
    spec: The task.
    splits: Split name → examples; `"train"` is required. Unlabelled splits (a GLUE test set)
      get predictions instead of metrics.
    config: The run's hyper-parameters.
    model_dir: Folder for `run.json`, checkpoints, logs and `results.json`.
    export_dir: If set, receives `saved_model/` (strings in, probabilities out) and
      `adapters/` (the adapter-only artifact).
    progress_bar: Whether to show the training progress bar.

  Returns:
    The results dict also written to `model_dir/results.json`: metrics per split, predictions
    of unlabelled splits, parameter counts, timings and the config.

  Raises:
    RunSettingsError: `model_dir` holds a run with other settings.
    run_lock.ModelDirBusyError: Another run is using `model_dir`.
    ValueError: Bad data (no training split, one class, labels out of range), a base that
      cannot serve `config` (`max_seq_length`, vocabulary), or a preprocessing model that is
      none; the message names the argument.
    PermissionError: `model_dir` or `export_dir` cannot be written.
    trainer_lib.TrainingInterrupted: SIGTERM or Ctrl-C stopped training (at a checkpoint).
  """
  check_splits(spec, splits)
  # First: a multi-worker cluster or a TPU is set up before TensorFlow runs anything.
  strategy = distribution.get_strategy(config.strategy, tpu=config.tpu)
  base = hub_encoder.read_hub_encoder(config.hub_handle)
  compatibility.check_seq_length(config.max_seq_length, base.config)
  preprocessor = compatibility.load_preprocessor(config.preprocess_handle)
  compatibility.check_preprocessor(preprocessor, base.config, encoder_tokenizer=base.tokenizer,
                                   handle=config.preprocess_handle)
  compatibility.check_unknown_tokens(
      preprocessor, itertools.chain.from_iterable(zip(*splits["train"].texts)), base.config,
      base.tokenizer, hub_handle=config.hub_handle, preprocess_handle=config.preprocess_handle)
  definition = run_definition(spec, splits["train"], config, base.fingerprint)
  _check_definition(model_dir, definition)
  if export_dir:
    _check_export_dir(export_dir)
  atomic_io.make_writable_dir(model_dir, "model_dir")
  # One run per folder: a second one would resume from this one's checkpoints, and both
  # would write them. Only the chief writes model_dir, so only the chief holds it.
  with run_lock.hold(model_dir, enabled=strategy.extended.should_checkpoint), \
      precision.policy_scope(config.mixed_precision):
    return _run_in_locked_dir(spec, splits, config, model_dir, export_dir, progress_bar,
                              strategy, preprocessor, definition)


def _run_in_locked_dir(spec, splits, config, model_dir, export_dir, progress_bar, strategy,
                       preprocessor, definition):
  """`run_task` once everything is checked and `model_dir` is this run's."""
  is_chief = strategy.extended.should_checkpoint
  results_path = os.path.join(model_dir, RESULTS_FILE)
  if is_chief:
    atomic_io.remove_leftovers(model_dir)
    if not tf.io.gfile.exists(os.path.join(model_dir, RUN_FILE)):
      atomic_io.write_json(os.path.join(model_dir, RUN_FILE), definition)
  results = atomic_io.read_json(results_path)
  evaluated = {name: split for name, split in splits.items() if name != "train"}
  fingerprints = {name: data_fingerprint(split) for name, split in evaluated.items()}
  if results is not None:
    to_score = [name for name in evaluated if not _scored(results, name, fingerprints[name])]
    to_export = bool(export_dir) and not (results.get("export_dir") == export_dir
                                           and _export_complete(export_dir))
    if not to_score and not to_export:
      return results
  else:
    to_score, to_export = list(evaluated), bool(export_dir)

  train = splits["train"]
  steps_per_epoch = features.num_batches(len(train), config.batch_size,
                                         drop_remainder=config.static_shapes)
  num_train_steps = max(1, round(config.epochs * steps_per_epoch))

  def train_data(shuffle_seed):
    return features.make_dataset(
        train, preprocessor, max_seq_length=config.max_seq_length,
        batch_size=config.batch_size, shuffle=True, seed=shuffle_seed,
        dynamic_padding=not config.static_shapes, drop_remainder=config.static_shapes)

  def model_fn():
    encoder = adapted_bert.AdaptedBert(config.hub_handle,
                                       adapter_config=config.adapter_settings())
    return classifier.build_classifier(encoder, spec.num_classes, pooling=config.pooling)

  trainer = trainer_lib.Trainer(
      model_fn, _loss_fn(spec), train_data,
      num_train_steps=num_train_steps, learning_rate=config.learning_rate,
      model_dir=model_dir, warmup_fraction=config.warmup_fraction,
      weight_decay=config.weight_decay, strategy=strategy,
      checkpoint_every_steps=config.checkpoint_every_steps, seed=config.seed,
      log_every_steps=max(1, min(50, num_train_steps // 10)), progress_bar=progress_bar,
      jit_compile=config.jit_compile)
  if results is not None and trainer.finished_result() is None:
    raise ValueError(
        f"{model_dir} holds the results of a finished run but not its final checkpoint, so "
        "it cannot score new splits or export. Use a new model_dir=<folder>, or pass the "
        "splits and export_dir it was run with.")
  start = time.time()
  train_result = trainer.train()
  model = trainer.model
  if model is None:  # Finished earlier: restore the final weights.
    with strategy.scope():
      model = model_fn()
    tf.train.Checkpoint(model=model).restore(train_result.checkpoint_path).expect_partial()

  if results is None:
    steps_run = max(train_result.step - train_result.start_step, 1)
    results = dict(
        task=spec.name, config=dataclasses.asdict(config),
        train_examples=len(train), num_train_steps=num_train_steps,
        train_seconds=train_result.wall_time_s,
        seconds_per_epoch=train_result.wall_time_s / steps_run * steps_per_epoch,
        examples_per_second=train_result.examples_per_sec,
        parameters=_parameter_counts(model), metrics={}, predictions={},
        split_fingerprints={})
  for name in to_score:
    split = evaluated[name]
    scores = predict(model, split, preprocessor, config)
    if split.labels is None:
      results["metrics"].pop(name, None)
      results["predictions"][name] = dict(ids=list(split.ids), values=_prediction_values(
          spec, scores))
    else:
      results["predictions"].pop(name, None)
      results["metrics"][name] = metrics_lib.compute_metrics(
          spec, split.labels, _prediction_values(spec, scores))
    results.setdefault("split_fingerprints", {})[name] = fingerprints[name]
  if to_export:
    _export(model, preprocessor, spec, config, export_dir)
    results["export_dir"] = export_dir
  results["total_seconds"] = results.get("total_seconds", 0.0) + time.time() - start
  if is_chief:
    atomic_io.write_json(results_path, results)
  return results


def check_splits(spec: examples_lib.TaskSpec,
                 splits: Mapping[str, examples_lib.TextExamples]) -> None:
  """Raises a `ValueError` for data a run cannot learn from or score.

  Args:
    spec: The task.
    splits: Split name → examples, with "train".
  """
  if "train" not in splits:
    raise ValueError(f"run_task needs a 'train' split; got {sorted(splits)}.")
  if not len(splits["train"]):
    raise ValueError(f"The training split of task {spec.name!r} is empty.")
  if not spec.is_regression and spec.num_classes < 2:
    raise ValueError(f"Task {spec.name!r} has the classes {list(spec.label_names)}: a "
                     "classifier needs at least two.")
  for name, split in splits.items():
    if len(split.texts) != len(spec.text_fields):
      raise ValueError(
          f"Split {name!r} has {len(split.texts)} text fields; task {spec.name!r} reads "
          f"{len(spec.text_fields)} ({', '.join(spec.text_fields)}).")
    if split.labels is None:
      continue
    labels = np.asarray(split.labels)
    if spec.is_regression:
      bad = ~np.isfinite(labels.astype(np.float64))
      if bad.any():
        raise ValueError(f"Split {name!r} of task {spec.name!r} has a score that is not a "
                         f"finite number: example {split.ids[int(np.argmax(bad))]!r}.")
      continue
    if not np.issubdtype(labels.dtype, np.integer):
      raise ValueError(f"Split {name!r} of task {spec.name!r} has labels of dtype "
                       f"{labels.dtype}; a classification task needs integer class ids.")
    outside = (labels < 0) | (labels >= spec.num_classes)
    if outside.any():
      raise ValueError(
          f"Split {name!r} of task {spec.name!r} has the label {labels[outside][0]} (example "
          f"{split.ids[int(np.argmax(outside))]!r}), outside the class ids 0..."
          f"{spec.num_classes - 1} of {list(spec.label_names)}.")
  if spec.is_regression:
    return
  train_labels = np.asarray(splits["train"].labels)
  present = np.unique(train_labels)
  if len(present) < 2:
    raise ValueError(
        f"The training split of task {spec.name!r} has examples of one class only, "
        f"{spec.label_names[present[0]]!r} ({len(train_labels)} examples): a classifier learns "
        "nothing from it. Check that the labels are read from the right column and that the "
        "data holds every class.")
  absent = [spec.label_names[i] for i in range(spec.num_classes) if i not in set(present)]
  if absent:
    logging.warning("The training split of task %r has no example of the classes %s: the "
                    "model will never predict them.", spec.name, absent)


def data_fingerprint(examples: examples_lib.TextExamples) -> str:
  """SHA-256 of the examples' ids, texts and labels, in their order."""
  labels = None if examples.labels is None else np.asarray(examples.labels).tolist()
  record = [list(examples.ids), [list(field) for field in examples.texts], labels]
  return "sha256:" + hashlib.sha256(json.dumps(record).encode("ascii")).hexdigest()


def run_definition(spec: examples_lib.TaskSpec, train: examples_lib.TextExamples,
                   config: RunConfig, base_fingerprint: str) -> Dict[str, Any]:
  """What defines a run, as recorded in its folder's `run.json`: two runs with the same
  definition learn the same model."""
  return dict(
      format_version=_RUN_FORMAT_VERSION, task=spec.name, text_fields=list(spec.text_fields),
      label_names=None if spec.is_regression else list(spec.label_names),
      train_examples=len(train), train_fingerprint=data_fingerprint(train),
      base_fingerprint=base_fingerprint,
      config={name: value for name, value in dataclasses.asdict(config).items()
              if name not in EXECUTION_FIELDS})


def check_run_dir(spec: examples_lib.TaskSpec,
                  splits: Mapping[str, examples_lib.TextExamples],
                  config: RunConfig, model_dir: str) -> None:
  """Raises `RunSettingsError` if `model_dir` holds a run with other settings than these.

  `run_task` checks this itself; calling it first lets a series of runs (a comparison, a
  sweep) stop before the first one trains.
  """
  check_splits(spec, splits)
  base = hub_encoder.read_hub_encoder(config.hub_handle)
  _check_definition(model_dir, run_definition(spec, splits["train"], config, base.fingerprint))


def _check_definition(model_dir: str, definition: Mapping[str, Any]) -> None:
  """Raises unless `model_dir` is new or holds a run of `definition`."""
  recorded = atomic_io.read_json(os.path.join(model_dir, RUN_FILE))
  if recorded is None:
    results = atomic_io.read_json(os.path.join(model_dir, RESULTS_FILE))
    if results is not None:
      # Finished before runs recorded their definition: compared on what results.json
      # holds (not the data's fingerprint, which it lacks).
      recorded = dict(definition, task=results.get("task"),
                      train_examples=results.get("train_examples"),
                      config={name: results["config"].get(name)
                              for name in definition["config"]})
    elif tf.train.latest_checkpoint(model_dir) is not None:
      raise RunSettingsError(
          f"{model_dir} holds checkpoints but no {RUN_FILE} recording their settings, so they "
          "cannot be resumed safely. Use a new model_dir=<folder>.")
    else:
      return
  differences = _differences(recorded, definition)
  if differences:
    raise RunSettingsError(
        f"{model_dir} holds a run with other settings: {'; '.join(differences)}. Use a new "
        "model_dir=<folder> for the new settings, or the recorded ones to resume or reuse "
        "that run.")


def _differences(recorded: Mapping[str, Any], asked: Mapping[str, Any]) -> List[str]:
  """The settings in which two run definitions differ, each as `name=recorded there,
  name=asked now`."""
  differences = []
  for name in ("task", "text_fields", "label_names"):
    if recorded.get(name) != asked[name]:
      differences.append(f"{name.replace('_', ' ')} {recorded.get(name)!r} there, "
                         f"{asked[name]!r} now")
  if (recorded.get("train_examples"), recorded.get("train_fingerprint")) != (
      asked["train_examples"], asked["train_fingerprint"]):
    differences.append(
        f"training data of {recorded.get('train_examples')} examples "
        f"({str(recorded.get('train_fingerprint'))[:19]}) there, {asked['train_examples']} "
        f"({asked['train_fingerprint'][:19]}) now")
  if recorded.get("base_fingerprint") != asked["base_fingerprint"]:
    differences.append("another base encoder (its weights differ)")
  recorded_config = recorded.get("config", {})
  for name, value in asked["config"].items():
    if recorded_setting(recorded_config, name) != value:
      differences.append(f"{name}={recorded_setting(recorded_config, name)!r} there, "
                         f"{name}={value!r} now")
  return differences


def recorded_setting(recorded_config: Mapping[str, Any], name: str) -> Any:
  """The value of RunConfig field `name` in a recorded config; for a field added after that
  record was written, the value every run had then."""
  return recorded_config.get(name, _FIELDS_ADDED_LATER.get(name))


def _scored(results: Mapping[str, Any], name: str, fingerprint: str) -> bool:
  """Whether `results` hold the scores or predictions of split `name` with this data."""
  recorded = results.get("split_fingerprints")
  if recorded is None:  # Results of a run from before fingerprints: trusted by name.
    return name in results["metrics"] or name in results["predictions"]
  return recorded.get(name) == fingerprint


def _check_export_dir(export_dir: str) -> None:
  """Refuses, before training, export targets that would replace a user's folder."""
  atomic_io.make_writable_dir(export_dir, "export_dir")
  for name, marker in (("saved_model", "saved_model.pb"),
                       ("adapters", adapter_artifact.CONFIG_FILE)):
    target = os.path.join(export_dir, name)
    if (tf.io.gfile.isdir(target) and tf.io.gfile.listdir(target)
        and not tf.io.gfile.exists(os.path.join(target, marker))):
      raise ValueError(
          f"export_dir={export_dir!r} holds a folder {name}/ that is not an export; exporting "
          "would replace it. Pass another export_dir, or move that folder away.")
  # Nor is another kind of export (a multi-task one) replaced by this task's.
  task_export.check_export_dir(os.path.join(export_dir, "saved_model"),
                               task_export.TASK_EXPORT, RunSettingsError, fix=(
                                   "Pass another export_dir, or move that folder away."))


def _export_complete(export_dir: str) -> bool:
  return (tf.io.gfile.exists(os.path.join(export_dir, "saved_model", "saved_model.pb")) and
          tf.io.gfile.exists(os.path.join(export_dir, "adapters", adapter_artifact.CONFIG_FILE)))


def _export(model, preprocessor, spec, config, export_dir):
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


def predict(model, examples, preprocessor, config):
  """Logits (or scores) of `model` on `examples`, in example order, as a numpy array."""
  dataset = features.make_dataset(
      examples, preprocessor, max_seq_length=config.max_seq_length,
      batch_size=max(config.batch_size, 64), shuffle=False,
      dynamic_padding=not config.static_shapes, pad_last_batch=config.static_shapes)

  @tf.function(reduce_retracing=True, autograph=False, jit_compile=config.jit_compile)
  def call(inputs):
    return model(inputs, training=False)

  outputs = [call(batch[0] if isinstance(batch, tuple) else batch).numpy()
             for batch in dataset]
  # Without the padding rows of a static-shape last batch.
  return np.concatenate(outputs, axis=0)[:len(examples)]


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

"""A text classification run on Keras 3, from the Keras 2 runner's settings and splits.

`run_task(spec, splits, config, model_dir)` does what `keras_adapters.tasks.classification.
run_task` does, on the backend `KERAS_BACKEND` names: it converts the TF Hub base
(`from_tf_hub`), packs the text with its TF Hub preprocessor's vocabulary
(`preprocessor_from_tf_hub`), puts in the method of `config.model` (`adapt`), trains with
the Keras 2 path's optimiser (AdamW, decay 0.01 without LayerNorms and biases, gradients
clipped to norm 1, linear warmup then linear decay to 0), scores the other labelled splits,
and writes the library's adapter artifact and, on TensorFlow, the serving SavedModel. It
checkpoints as it trains (`checkpoints`): a stopped run resumes where it stopped, and a
rerun of a finished one trains nothing, as the Keras 2 runner's.

On JAX with more than one device, the steps run data parallel (`keras.distribution.
DataParallel`: each device takes its slice of every batch, the weights are replicated);
`config.runtime.mixed_precision` picks Keras 3's dtype policy (`bfloat16`:
`mixed_bfloat16`: variables, LayerNorms and logits stay float32).
"""

import contextlib
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_adapters.data import metrics as metrics_lib
from keras_adapters.data import split_checks
from keras_adapters.hub import adapter_artifact
# The package's `adapt` function hides the module's name: its names are imported.
# pylint: disable=g-importing-member
from keras_adapters.keras3.adapt import adapt
from keras_adapters.keras3.adapt import check_config as check_method_config
from keras_adapters.keras3 import artifacts
from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import checkpoints
from keras_adapters.keras3 import serving
from keras_adapters.keras3 import tf_hub_bert
from keras_adapters.keras3 import tokenizer
from keras_adapters.utils import atomic_io
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import errors
from keras_adapters.utils import run_lock
from keras_adapters.utils import stop_requests

RESULTS_FILE = "results.json"
# What defines a Keras 3 run (`run_definition`): a rerun with other settings is refused.
RUN_FILE = "keras3_run.json"
# The Keras 2 run records a Keras 3 run does not write: a folder holding them is another run.
_KERAS2_RUN_FILE = "run.json"
# `config.runtime.mixed_precision` → Keras 3's dtype policy.
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                  "float16": "mixed_float16"}
# Variables AdamW does not decay, by name: LayerNorms' and biases, as the Model Garden's.
_NOT_DECAYED = ("gamma", "beta", "bias")
_EVAL_BATCH_SIZE = 64
_TOKENIZE_BATCH = 1024
# Tracing the preprocessor into a tf.data pipeline takes seconds, about what calling it batch
# by batch takes for a few thousand texts: fewer are packed by those calls.
EAGER_TEXTS = 2048


def run_task(spec, splits, config, model_dir, export_dir=None):
  """Trains on `splits["train"]`, scores every other labelled split, optionally exports;
  resumable, as the Keras 2 runner.

  The run checkpoints in `model_dir` every `config.trainer.checkpoint_every_steps` steps and
  at the end (`checkpoints`). Rerunning into the folder of a stopped run resumes it from its
  last checkpoint; on a finished one nothing trains: the recorded results come back, after
  the evaluations they lack and an export they do not record, from the final checkpoint. A
  folder holding a run with other settings is refused, naming them.

  Args:
    spec: The task (`keras_adapters.data.examples.TaskSpec`).
    splits: Split name → `TextExamples`, with `"train"`.
    config: The run's `ExperimentConfig`, as the Keras 2 runner takes it; settings the
      Keras 3 path lacks are refused (`check_config`).
    model_dir: Folder of the run's record (`keras3_run.json`), checkpoint and results
      (`results.json`).
    export_dir: Folder of the adapter artifact (`adapters/`) and, on the TensorFlow backend,
      the serving SavedModel (`saved_model/`); `None`: no export.

  Returns:
    The results also written to `model_dir/results.json`: metrics per labelled split,
    predictions of the unlabelled ones, the training losses, parameter counts and timings.

  Raises:
    UsageError: A setting the Keras 3 path does not support, data a run cannot learn from,
      a batch the devices cannot share, or a `model_dir` holding a Keras 2 run or a run
      with other settings.
  """
  check_config(config)
  split_checks.check_splits(spec, splits)
  if tf.io.gfile.exists(os.path.join(model_dir, _KERAS2_RUN_FILE)):
    raise errors.UsageError(
        f"model_dir={model_dir!r} holds a Keras 2 run (run.json); a Keras 3 run would mix its "
        "records with it: pass another model_dir.")
  atomic_io.check_output_dir(model_dir, "model_dir")
  distribution = data_parallel(config.trainer.batch_size)
  start = time.time()
  # The base's dropout draws from seeds made as it is built: the same in every run.
  keras.utils.set_random_seed(config.trainer.seed)
  base = tf_hub_bert.from_tf_hub(config.model.hub_handle)
  if base.max_sequence_length < config.data.max_seq_length:
    raise errors.UsageError(
        f"max_seq_length={config.data.max_seq_length} is more than the base's "
        f"{base.max_sequence_length} positions: give at most {base.max_sequence_length}.")
  definition = run_definition(spec, splits, config, base_weights.fingerprint(base))
  check_run_dir(model_dir, definition)
  results = atomic_io.read_json(os.path.join(model_dir, RESULTS_FILE))
  pending = [name for name, split in splits.items() if name != "train" and (
      (results or {}).get("split_fingerprints", {}).get(name)
      != split_checks.data_fingerprint(split))]
  to_export = export_dir is not None and not _exported(results, export_dir)
  if results is not None and not pending and not to_export:
    return results
  if results is not None and not tf.io.gfile.exists(
      os.path.join(model_dir, checkpoints.CHECKPOINT_FILE)):
    raise errors.UsageError(
        f"{model_dir} holds the results of a finished run but not its final checkpoint, so "
        "it cannot evaluate again or export: use a new model_dir, or pass the data and "
        "export_dir it was run with.")
  atomic_io.make_writable_dir(model_dir, "model_dir")
  with run_lock.hold(model_dir):
    atomic_io.remove_leftovers(model_dir)
    if not tf.io.gfile.exists(os.path.join(model_dir, RUN_FILE)):
      atomic_io.write_json(os.path.join(model_dir, RUN_FILE), definition)
    preprocessor = tokenizer.preprocessor_from_tf_hub(config.model.preprocess_handle)
    preprocessor.sequence_length = config.data.max_seq_length
    with scope(distribution):
      base_size = sum(int(np.prod(w.shape)) for w in base.weights)
      model = task_model(base, spec.num_classes, config, distributed=distribution is not None)
      trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
      train_start = time.time()
      needed = {name: splits[name] for name in ("train", *pending)}
      features = tokenize_splits(preprocessor, needed)
      losses = fit(model, features["train"], splits["train"].labels,
                   config.trainer, regression=spec.is_regression,
                   jit_compile=config.runtime.jit_compile, checkpoint_dir=model_dir)
      if results is None:
        results = dict(
            task=spec.name, keras=3, backend=keras.backend.backend(),
            devices=len(distribution.device_mesh.devices.flatten()) if distribution else 1,
            config=config.settings(), train_losses=losses,
            train_seconds=time.time() - train_start,
            parameters=dict(trainable=trainable, base=base_size,
                            trainable_percent_of_base=100.0 * trainable / base_size),
            metrics={}, predictions={}, split_fingerprints={})
      for name in pending:
        split = splits[name]
        outputs = predict(model, features[name], distribution)
        values = (outputs[:, 0] if spec.is_regression else np.argmax(outputs, -1)).tolist()
        if split.labels is None:
          results["metrics"].pop(name, None)
          results["predictions"][name] = dict(ids=list(split.ids), values=values)
        else:
          results["predictions"].pop(name, None)
          results["metrics"][name] = metrics_lib.compute_metrics(spec, split.labels, values)
        results["split_fingerprints"][name] = split_checks.data_fingerprint(split)
    if to_export:
      export(model, spec, config, export_dir)
      results["export_dir"] = export_dir
    results["total_seconds"] = results.get("total_seconds", 0.0) + time.time() - start
    atomic_io.write_json(os.path.join(model_dir, RESULTS_FILE), results)
  return results


def run_definition(spec, splits, config, base_fingerprint):
  """What defines a run (`keras3_run.json`): the task, its training data, the base and
  every setting that changes what is learnt (`config.definition()`)."""
  train = splits["train"]
  return dict(keras=3, task=spec.name, text_fields=list(spec.text_fields),
              label_names=None if spec.is_regression else list(spec.label_names),
              train_examples=len(train), train_fingerprint=split_checks.data_fingerprint(train),
              base_fingerprint=base_fingerprint, config=config.definition())


def check_run_dir(model_dir, definition):
  """Raises a one-line `UsageError` unless `model_dir` is new or holds the run of
  `definition` (`run_definition`), naming the settings that differ."""
  recorded = atomic_io.read_json(os.path.join(model_dir, RUN_FILE))
  if recorded is None:
    if tf.io.gfile.exists(os.path.join(model_dir, checkpoints.CHECKPOINT_FILE)):
      raise errors.UsageError(
          f"{model_dir} holds a checkpoint but no {RUN_FILE} recording its settings, so it "
          "cannot be resumed safely: use a new model_dir.")
    return
  differences = []
  for name, value in definition.items():
    there = recorded.get(name)
    if name == "config" or there == value:
      continue
    differences.append(f"another {name[:-len('_fingerprint')]} (it differs)"
                       if name.endswith("_fingerprint") else
                       f"{name.replace('_', ' ')} {there!r} there, {value!r} now")
  recorded_config = recorded.get("config", {})
  differences += [f"{name}={recorded_config.get(name)!r} there, {name}={value!r} now"
                  for name, value in definition["config"].items()
                  if recorded_config.get(name) != value]
  if differences:
    raise errors.UsageError(
        f"{model_dir} holds a run with other settings: {'; '.join(differences)}. Use a new "
        "model_dir for the new settings, or the recorded ones to resume or reuse that run.")


def _exported(results, export_dir):
  """Whether `results` record an export to `export_dir` that is there."""
  if not results or results.get("export_dir") != export_dir:
    return False
  files = [("adapters", adapter_artifact.CONFIG_FILE)]
  if results.get("backend") == "tensorflow":
    files.append(("saved_model", "saved_model.pb"))
  return all(tf.io.gfile.exists(os.path.join(export_dir, *path)) for path in files)


def check_config(config):
  """Raises a one-line `UsageError` for a setting of `config` the Keras 3 path lacks: a
  method or method setting `adapt` does not take (`original_ln_after=False`, a baseline's
  tuning), a `tf.distribute` strategy or TPU, or attention recomputation."""
  runtime = config.runtime
  if runtime.strategy != "default" or runtime.tpu:
    raise errors.UsageError(
        f"strategy={runtime.strategy!r} is a tf.distribute strategy, which Keras 3 runs do "
        "not use: leave strategy at 'default' (on JAX, several devices train data parallel "
        "by themselves).")
  if config.model.recompute_attention not in ("auto", "never"):
    raise errors.UsageError(
        f"recompute_attention={config.model.recompute_attention!r} is not supported on "
        "Keras 3 yet: leave it at 'auto'.")
  if runtime.mixed_precision not in DTYPE_POLICIES:
    raise errors.UsageError(
        f"mixed_precision={runtime.mixed_precision!r}: choose one of {list(DTYPE_POLICIES)}.")
  if keras.backend.backend() == "tensorflow":  # JAX computes with XLA's kernels, not oneDNN's.
    cpu_kernels.check_sixteen_bit(runtime.mixed_precision)
  check_method_config(config.model.set_config)


def data_parallel(batch_size):
  """A `keras.distribution.DataParallel` over every device when the backend is JAX and it
  sees more than one, else `None`.

  Raises:
    UsageError: `batch_size` is not a multiple of the device count.
  """
  if keras.backend.backend() != "jax":
    return None
  devices = keras.distribution.list_devices()
  if len(devices) < 2:
    return None
  if batch_size % len(devices):
    raise errors.UsageError(
        f"batch_size={batch_size} cannot be split evenly over the {len(devices)} JAX devices "
        f"that train data parallel: give a multiple of {len(devices)}, e.g. batch_size="
        f"{max(len(devices), batch_size - batch_size % len(devices))}.")
  return keras.distribution.DataParallel(devices=devices)


def scope(distribution):
  """The scope of `distribution` (`data_parallel`'s), or an empty one for `None`."""
  return distribution.scope() if distribution else contextlib.nullcontext()


def task_model(base, num_classes, config, distributed=False, dropout_rate=0.1):
  """The classifier a run trains: `base` in the run's dtype policy, adapted with the
  config's method, under `build_classifier`'s head (pooling `config.model.pooling`).

  A copy of `base` is trained when the policy is not float32 or the run is `distributed`
  (its variables are then created in the distribution's layout); call it in the
  distribution's scope. The new weights start from `config.trainer.seed`.
  """
  policy = DTYPE_POLICIES[config.runtime.mixed_precision]
  backbone = base
  if policy != "float32" or distributed:
    backbone = type(base).from_config({**base.get_config(), "dtype": policy})
    backbone.set_weights(base.get_weights())
    if getattr(base, "tf_hub_handle", None):
      backbone.tf_hub_handle = base.tf_hub_handle
  # The method's and the head's first weights from the run's seed, copy or no copy.
  keras.utils.set_random_seed(config.trainer.seed)
  adapt(backbone, config.model.set_config)
  return artifacts.build_classifier(backbone, num_classes, dropout_rate=dropout_rate,
                                    pooling=config.model.pooling)


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """The Keras 2 path's schedule (`training.optimization`): a linear rise from 0 to
  `peak` over `warmup_steps`, then `peak · (1 - step / total_steps)`, 0 from `total_steps`
  on."""

  def __init__(self, peak, total_steps, warmup_steps):
    self.peak = float(peak)
    self.total_steps = int(total_steps)
    self.warmup_steps = int(warmup_steps)

  def __call__(self, step):
    step = keras.ops.cast(step, "float32")
    decayed = self.peak * (1.0 - keras.ops.minimum(step, self.total_steps) / self.total_steps)
    warming = self.peak * step / max(self.warmup_steps, 1)
    return keras.ops.where(step < self.warmup_steps, warming, decayed)

  def get_config(self):
    return dict(peak=self.peak, total_steps=self.total_steps, warmup_steps=self.warmup_steps)


def create_optimizer(trainer, total_steps):
  """AdamW as the Keras 2 path's (`training.optimization.create_optimizer`), from the
  trainer settings (`config.trainer`)."""
  optimizer = keras.optimizers.AdamW(
      learning_rate=WarmupLinearDecay(trainer.learning_rate, total_steps,
                                      int(total_steps * trainer.warmup_fraction)),
      weight_decay=trainer.weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
      global_clipnorm=1.0)
  optimizer.exclude_from_weight_decay(var_names=list(_NOT_DECAYED))
  return optimizer


def fit(model, features, labels, trainer, regression=False, jit_compile=False,
        checkpoint_dir=None):
  """Trains `model` on the packed `features` (`tokenize`) and `labels` for
  `trainer.epochs` (whole steps: the epochs times the batches in one, rounded up), each
  batch `trainer.batch_size` examples in the order `epoch_order` draws.

  With `checkpoint_dir`, training goes on from the checkpoint there (`checkpoints`), if
  any, and saves one every `trainer.checkpoint_every_steps` steps and at the end: the
  batches after the checkpoint's step are those an unstopped run would have taken.

  Returns:
    The mean training loss of each epoch (the last one may be shorter).

  Raises:
    stop_requests.TrainingInterrupted: With `checkpoint_dir`, SIGTERM or Ctrl-C came: the
      step under way was saved first.
  """
  num_examples = len(labels)
  batch_size = min(trainer.batch_size, num_examples)
  total_steps = max(1, math.ceil(trainer.epochs * num_examples / batch_size))
  epochs = max(1, math.ceil(trainer.epochs))
  # Every batch full, across epochs: the devices of a data parallel run share each evenly.
  steps_per_epoch = math.ceil(total_steps / epochs)
  loss = (keras.losses.MeanSquaredError() if regression else
          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  # JAX always compiles the steps; TensorFlow with XLA when asked.
  model.compile(optimizer=create_optimizer(trainer, steps_per_epoch * epochs), loss=loss,
                jit_compile="auto" if keras.backend.backend() == "jax" else jit_compile)
  state = checkpoints.restore(model, checkpoint_dir) if checkpoint_dir else None
  labels = np.asarray(labels)
  # SIGTERM and Ctrl-C stop a checkpointed fit after the step under way, once it is saved.
  with stop_requests.requested(enabled=checkpoint_dir is not None) as stop:
    tracker = checkpoints.StepCheckpoints(
        checkpoint_dir, trainer.checkpoint_every_steps, steps_per_epoch * epochs,
        steps_per_epoch, state or checkpoints.TrainingState(), stop)
    while tracker.state.step < steps_per_epoch * epochs:
      epoch, done = divmod(tracker.state.step, steps_per_epoch)
      # One fit per epoch, on that epoch's batches from the step training is at.
      order = epoch_order(num_examples, steps_per_epoch * batch_size, trainer.seed, epoch)
      batches = tf.data.Dataset.from_tensor_slices(
          ({key: value[order] for key, value in features.items()}, labels[order])
      ).batch(batch_size, drop_remainder=True).skip(done)
      model.fit(batches, initial_epoch=epoch, epochs=epoch + 1,
                steps_per_epoch=steps_per_epoch - done, callbacks=[tracker], shuffle=False,
                verbose=0)
  return tracker.state.epoch_losses


def epoch_order(num_examples, count, seed, epoch):
  """The `count` example indices epoch `epoch` trains on, in order: shuffles of every
  example, one after the other, drawn from (`seed`, `epoch`) alone, so that a resumed run
  takes the batches of one that was not stopped, on any backend."""
  rng = np.random.default_rng([seed, epoch])
  return np.concatenate([rng.permutation(num_examples)
                         for _ in range(math.ceil(count / num_examples))])[:count]


def tokenize(preprocessor, examples):
  """The keras-hub inputs of `examples` (`token_ids`, `segment_ids`, `padding_mask`) as
  NumPy arrays, packed by `preprocessor` (one text field or a pair)."""
  return tokenize_splits(preprocessor, {None: examples})[None]


def tokenize_splits(preprocessor, splits):
  """`tokenize` of each split of `splits` (name → examples of one task), in one pass: the
  preprocessor is traced into the pipeline once, not once per split (seconds each); up to
  `EAGER_TEXTS` texts it is not traced, but called batch by batch."""
  # Each text field, every split's texts after the other's.
  texts = tuple(tf.constant([text for part in field for text in part], tf.string)
                for field in zip(*(split.texts for split in splits.values())))
  # `x=`: a tuple given by position would be read as (texts, labels).
  pack = lambda *fields: preprocessor(x=fields[0] if len(fields) == 1 else fields)
  if len(texts[0]) <= EAGER_TEXTS:
    batches = [pack(*(field[start:start + _TOKENIZE_BATCH] for field in texts))
               for start in range(0, len(texts[0]), _TOKENIZE_BATCH)]
  else:
    batches = list(tf.data.Dataset.from_tensor_slices(texts).batch(_TOKENIZE_BATCH)
                   .map(pack).as_numpy_iterator())
  packed = {key: np.concatenate([keras.ops.convert_to_numpy(batch[key]) for batch in batches]
                                ).astype("int32")
            for key in ("token_ids", "segment_ids", "padding_mask")}
  ends = np.cumsum([len(split) for split in splits.values()])
  return {name: {key: value[end - len(split):end] for key, value in packed.items()}
          for (name, split), end in zip(splits.items(), ends)}


def predict(model, features, distribution=None):
  """`model`'s outputs on `features`, in order, in batches every device takes a share of
  (the last one padded)."""
  devices = len(distribution.device_mesh.devices.flatten()) if distribution else 1
  batch_size = math.ceil(_EVAL_BATCH_SIZE / devices) * devices
  count = len(features["token_ids"])
  padding = -count % batch_size
  padded = {key: np.pad(value, [(0, padding), (0, 0)]) for key, value in features.items()}
  return np.asarray(model.predict(padded, batch_size=batch_size, verbose=0),
                    np.float32)[:count]


def export(model, spec, config, export_dir):
  """Writes the task's adapter artifact to `export_dir/adapters` and, on the TensorFlow
  backend, its serving SavedModel to `export_dir/saved_model`, as the Keras 2 runner."""
  label_names = None if spec.is_regression else list(spec.label_names)
  seq_length = config.data.max_seq_length
  preprocessing = artifacts.PreprocessingConfig(config.model.preprocess_handle,
                                                tuple(spec.text_fields), seq_length)
  artifacts.save_adapters(
      model, os.path.join(export_dir, "adapters"), label_names=label_names,
      preprocessing=preprocessing,
      metadata=dict(task=spec.name, text_fields=list(spec.text_fields),
                    label_names=label_names, max_seq_length=seq_length))
  if keras.backend.backend() == "tensorflow":
    serving.export_task(model, os.path.join(export_dir, "saved_model"),
                        preprocessing=preprocessing, label_names=label_names)

"""One SavedModel serving many tasks on one base, built from the tasks' adapter artifacts.

The SavedModel holds the base encoder's variables once and, stacked along a task axis, each
task's adapters, LayerNorms and head. It answers

- one signature per task, named after it: raw strings in (the task's text fields, e.g.
  `text`, or `sentence1` and `sentence2`), the task's outputs out, exactly as the task's own
  `export_task` SavedModel gives them (`probabilities`, or `scores` for regression);
- `routed` (also `serving_default`): a batch mixing tasks. Inputs: `task` (each row's task
  name), `text` (each row's first text) and, when some task reads a pair, `text_pair` (the
  second text of a pair task's row; ignored for single-text tasks). Each row is tokenized
  and truncated as its task's preprocessing says, then the whole batch goes through the
  shared encoder in one pass, every example with its own task's adapter and LayerNorm
  parameters (gathered by task id), and through its own task's head. Outputs: `label` (the
  predicted class name; empty for a regression row), `probabilities` `[batch, most classes]`
  (a row's own classes first, then zeros; all zeros for a regression row) when some task
  classifies, and `scores` `[batch]` (0 for a classification row) when some task regresses.

The SavedModel also holds `task_names` and `label_names` (`[tasks, most classes]`, padded
with empty strings). Serving needs TensorFlow and tensorflow-text only.
"""

import collections
import functools
import os
import re

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import task_export
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import task_routing
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import atomic_io

ROUTED_SIGNATURE = "routed"
_RESERVED_NAMES = (ROUTED_SIGNATURE, "serving_default")
_TASK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# What a `build_classifier` head reads, in the order of `HeadConfig.pooling`'s values.
_POOLINGS = ("cls", "mean", "first_token")


class MultitaskExportError(ValueError):
  """Tasks that cannot be served together from one SavedModel; the message says why."""


def export_multitask(base_handle, tasks, export_dir, *, preprocess_handle=None,
                     overwrite=False):
  """Writes one SavedModel that serves every task of `tasks` on one copy of the base.

  Example:
  ```python
  keras_adapters.export_multitask(
      keras_adapters.default_hub_handle(),
      {"airline": "runs/airline/export/adapters", "bbc_news": "runs/bbc_news/export/adapters"},
      "multitask_savedmodel")
  loaded = tf.saved_model.load("multitask_savedmodel")
  loaded.signatures["airline"](text=tf.constant(["great flight"]))["probabilities"]
  loaded.signatures["routed"](task=tf.constant(["airline", "bbc_news"]),
                              text=tf.constant(["great flight", "Shares fell today."]))
  ```

  Args:
    base_handle: The shared base encoder (TF Hub handle or local path); every artifact must
      have been trained on it (fingerprints are checked).
    tasks: Task name (letters, digits, `_`; it names the task's signature) → its adapter
      artifact folder, as `save_adapters` writes it with a head and preprocessing (the
      `run_classification.py` / `run_glue.py` exports do), trained with tuning `adapters`
      or `layer_norm` (the others change the base, which then is not shared).
    export_dir: Folder to write, replaced atomically if it holds a multi-task SavedModel;
      another non-empty folder (a single-task SavedModel included) is refused unless
      `overwrite=True`.
    preprocess_handle: The TF Hub preprocessing model of every task, in place of the
      recorded ones (another machine, a moved cache).
    overwrite: Replace a non-empty folder that is not a multi-task SavedModel.

  Returns:
    `export_dir`.

  Raises:
    MultitaskExportError: A task name or artifact that cannot be served here.
    AdapterArtifactError: An artifact is missing, corrupt or of format 1.
  """
  export_dir = os.fspath(export_dir)
  if not overwrite:
    task_export.check_export_dir(export_dir, task_export.MULTITASK_EXPORT,
                                 MultitaskExportError)
  base = hub_encoder.read_hub_encoder(base_handle)
  specs = [_TaskSpec.read(name, directory, base.fingerprint, preprocess_handle)
           for name, directory in _checked_tasks(tasks).items()]
  _check_shared_arguments(specs, base.config)
  # Loaded once per process (`load_preprocessor`): the checks and the SavedModel use the same.
  preprocessors = {handle: compatibility.load_preprocessor(handle)
                   for handle in sorted({spec.preprocessing.handle for spec in specs})}
  for handle, preprocessor in preprocessors.items():
    compatibility.check_preprocessor(preprocessor, base.config,
                                     encoder_tokenizer=base.tokenizer, handle=handle)
  encoder = adapted_bert_encoder.AdaptedBertEncoder(
      **base.config, adapter_size=None, name="bert_encoder")
  hub_encoder.copy_weights(encoder, base)
  module = _MultitaskModule(encoder, specs, preprocessors, base.config["layer_norm_epsilon"])
  signatures = {spec.name: module.task_signature(index) for index, spec in enumerate(specs)}
  signatures[ROUTED_SIGNATURE] = signatures["serving_default"] = module.routed_signature()
  with atomic_io.atomic_directory(export_dir, marker="saved_model.pb") as staging:
    tf.saved_model.save(module, staging, signatures=signatures)
  return export_dir


class _TaskSpec:
  """One task as its artifact describes it, with its weights split into set and head."""

  def __init__(self, name, config, tensors, preprocessing):
    self.name = name
    self.config = config
    self.head = config["head"]
    self.preprocessing = preprocessing
    self.label_names = adapter_artifact.label_names(self.head)
    self.adapter_weights = {k: v for k, v in tensors.items() if not k.startswith("head/")}
    self.head_weights = {k: v for k, v in tensors.items() if k.startswith("head/")}

  @property
  def adapter_activation(self):
    """The adapters' nonlinearity, `None` for a task without adapters."""
    adapter_config = self.config["adapter_config"]
    return adapter_config["activation"] if adapter_config.get("adapter_size") else None

  @property
  def adapter_options(self):
    """How the adapters join their sub-layers (AdapterHub's options other than which
    sub-layers have one; artifacts without them have Houlsby's), `None` without adapters."""
    if not self.adapter_activation:
      return None
    return {name: self.config["adapter_config"].get(name, default)
            for name, default in adapter_lib.ADAPTER_OPTIONS.items()
            if name not in ("mh_adapter", "output_adapter")}

  @property
  def hidden_layers(self):
    """The head's dense layers before its logits (0 for heads recorded without them)."""
    return self.head.get("hidden_layers", 0)

  def head_layer(self, index):
    """The kernel and bias of the head's dense layer `index` (the last gives the logits)."""
    return (self.head_weights[f"head/{2 * index}/kernel"],
            self.head_weights[f"head/{2 * index + 1}/bias"])

  @classmethod
  def read(cls, name, directory, fingerprint, preprocess_handle):
    config = adapter_artifact.read_adapter_config(directory)
    adapter_artifact.require_task_description(config, directory, "export_multitask")
    if adapter_artifact.base_fingerprint(config) != fingerprint:
      raise MultitaskExportError(
          f"Task {name!r} ({directory!r}) was trained on another base than the one given "
          f"(saved from {adapter_artifact.base_handle(config)!r}): serve it with its own base.")
    changed = adapter_artifact.changed_base_weights(config)
    if changed:
      raise MultitaskExportError(
          f"Task {name!r} was trained with tuning={config['adapter_config']['tuning']!r}, "
          f"which changes the base ({len(changed)} weights, e.g. {changed[0]!r}), so it cannot "
          "share one: export it alone with export_task, or train it with tuning 'adapters' or "
          "'layer_norm'.")
    head = config["head"]
    head_keys = {key for key in config["tensors"] if key.startswith("head/")}
    layers = head.get("hidden_layers", 0) + 1
    expected = {f"head/{2 * i + j}/{part}" for i in range(layers)
                for j, part in enumerate(("kernel", "bias"))}
    if head.get("kind") != "classifier" or head_keys != expected:
      raise MultitaskExportError(
          f"Task {name!r} has a {head.get('kind')!r} head; export_multitask serves "
          "build_classifier heads.")
    preprocessing = adapter_artifact.preprocessing_config(config, directory, preprocess_handle)
    return cls(name, config, adapter_artifact.read_tensors(directory), preprocessing)


def _checked_tasks(tasks):
  if not tasks:
    raise MultitaskExportError("export_multitask needs at least one task (name → artifact).")
  for name in tasks:
    if not isinstance(name, str) or not _TASK_NAME.fullmatch(name) or name in _RESERVED_NAMES:
      raise MultitaskExportError(
          f"Task name {name!r} cannot name a signature: use letters, digits and '_', starting "
          f"with a letter, other than {list(_RESERVED_NAMES)}.")
  return dict(tasks)


def _check_shared_arguments(specs, base_config):
  """Raises unless every task was trained on the base's activation and LayerNorm epsilon (as
  read from the base and proven by parity) and the tasks agree on their adapters'
  activation, since one graph runs them all."""
  for what, key in (("base activation", "activation"),
                    ("layer_norm_epsilon", "layer_norm_epsilon")):
    by_task = {s.name: s.config["base"][key] for s in specs}
    if set(by_task.values()) != {base_config[key]}:
      raise MultitaskExportError(
          f"The tasks record the {what} {by_task}, but the base has {base_config[key]!r}; "
          "export each task with the base it was trained on.")
  for what, by_task in (
      ("adapter activation", {s.name: s.adapter_activation for s in specs
                              if s.adapter_activation}),
      ("head hidden_activation", {s.name: s.head.get("hidden_activation")
                                  for s in specs if s.hidden_layers})):
    if len(set(by_task.values())) > 1:
      raise MultitaskExportError(
          f"The tasks differ in their {what} ({by_task}); one SavedModel runs them in one "
          "graph, so they must agree.")


def _same_row_counts(task, text, text_pair):
  """Assertions that the routed inputs have one entry per row each: else a row would be
  answered with another row's text, or dropped, without a word."""
  checks = []
  for name, values in (("text", text), ("text_pair", text_pair)):
    if values is not None:
      checks.append(tf.debugging.Assert(tf.equal(tf.size(task), tf.size(values)), [
          "routed: `task` has", tf.size(task), f"rows but `{name}` has", tf.size(values),
          "; give one task name and one text (and text_pair) per row."]))
  return checks


class _MultitaskModule(tf.Module):
  """The shared encoder, the stacked task parameters and heads, and the serving functions."""

  def __init__(self, encoder, specs, preprocessors, layer_norm_epsilon):
    super().__init__(name="multitask")
    self._encoder = task_export.keras_model_in_module(self, encoder)
    self.specs = specs
    self.adapters = task_routing.StackedAdapters(
        [spec.adapter_weights for spec in specs], encoder.num_layers,
        activation=next((s.adapter_activation for s in specs if s.adapter_activation), "relu"),
        layer_norm_epsilon=layer_norm_epsilon,
        adapter_options=[spec.adapter_options for spec in specs],
        set_configs=[spec.config["adapter_config"] for spec in specs])
    self.preprocessors = list(preprocessors.values())
    self._preprocessor_index = {handle: index for index, handle in enumerate(preprocessors)}
    # Tasks that pack their text alike share one packing graph, one per group, so the
    # SavedModel's graphs (and the memory they take once loaded) do not grow with the tasks.
    self.packings = sorted({_packing(spec) for spec in specs})
    self._task_packing = [self.packings.index(_packing(spec)) for spec in specs]
    self.packing_of_task = tf.constant(self._task_packing)
    num_classes = [spec.head["num_classes"] for spec in specs]
    most = max(num_classes)
    kernels = np.zeros([len(specs), encoder.hidden_size, most], np.float32)
    biases = np.zeros([len(specs), most], np.float32)
    names = np.full([len(specs), most], "", dtype=object)
    for index, spec in enumerate(specs):
      classes = num_classes[index]
      kernels[index, :, :classes], biases[index, :classes] = spec.head_layer(spec.hidden_layers)
      if spec.label_names is not None:
        names[index, :classes] = spec.label_names
    self.head_kernels = tf.Variable(kernels, trainable=False, name="head_kernels")
    self.head_biases = tf.Variable(biases, trainable=False, name="head_biases")
    self.num_classes = tf.constant(num_classes, tf.int32)
    self.pooling = tf.constant([_POOLINGS.index(spec.head["pooling"]) for spec in specs])
    self.hidden_layers = _stack_hidden_layers(specs, encoder.hidden_size)
    self.hidden_activation = keras.activations.get(next(
        (s.head["hidden_activation"] for s in specs if s.hidden_layers), "tanh"))
    self.regression = tf.constant([spec.label_names is None for spec in specs])
    self.task_names = tf.Variable([spec.name for spec in specs], trainable=False,
                                  name="task_names")
    self.label_names = tf.Variable(names.astype(bytes), trainable=False, name="label_names")
    # Every task signature calls its packing's function (the task a tensor), so the
    # SavedModel holds one graph of the encoder per packing and one routed, however many
    # tasks it serves. No autograph in any of them: they branch on Python values only, and
    # converting the encoder's source was most of an export's tracing.
    self.packed_task_logits = [
        tf.function(functools.partial(self._packed_task_logits, packing), autograph=False,
                    input_signature=[
            [tf.TensorSpec([None], tf.string)] * packing.num_texts,
            tf.TensorSpec([], tf.int32)])
        for packing in self.packings]
    self.task_ids = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([spec.name for spec in specs]),
            tf.range(len(specs), dtype=tf.int32)), default_value=-1)

  def _pack(self, packing, texts):
    preprocessor = self.preprocessors[self._preprocessor_index[packing.handle]]
    return task_export.pack_texts(preprocessor, texts, packing.seq_length)

  def _packed_task_logits(self, packing, texts, task_id):
    return self._logits(self._pack(packing, texts), task_id)

  def _logits(self, inputs, task_ids):
    """Logits `[batch, most classes]` of one task (`task_ids` a scalar) or of each example's
    own task (`task_ids` `[batch]`): shared encoder, the tasks' adapters, pooling and head."""
    outputs = self._encoder(inputs, adapters=self.adapters.encoder_adapters(task_ids))
    pooled = tf.stack([
        outputs["pooled_output"],
        adapted_bert_encoder.masked_mean(outputs["sequence_output"], inputs["input_mask"]),
        outputs["sequence_output"][:, 0]], axis=1)
    pooling = tf.gather(self.pooling, task_ids)
    pooled = tf.gather(pooled, pooling + tf.zeros(tf.shape(pooled)[:1], tf.int32),
                       batch_dims=1)
    for kernels, biases, present in self.hidden_layers:
      kernels = tf.gather(kernels, task_ids)
      equation = "bd,dc->bc" if kernels.shape.rank == 2 else "bd,bdc->bc"
      hidden = self.hidden_activation(tf.einsum(equation, pooled, kernels)
                                      + tf.gather(biases, task_ids))
      pooled = tf.where(tf.reshape(tf.gather(present, task_ids), [-1, 1]), hidden, pooled)
    kernels = tf.gather(self.head_kernels, task_ids)
    equation = "bd,dc->bc" if kernels.shape.rank == 2 else "bd,bdc->bc"
    return tf.einsum(equation, pooled, kernels) + tf.gather(self.head_biases, task_ids)

  def predict_task(self, index, texts):
    """One task's outputs for its texts, as its `export_task` SavedModel gives them."""
    spec = self.specs[index]
    logits = self.packed_task_logits[self._task_packing[index]](
        texts, tf.constant(index, tf.int32))
    return task_export.task_outputs(logits[:, :spec.head["num_classes"]],
                                    spec.label_names is None)

  def predict_routed(self, task, text, text_pair=None):
    """Every row answered by its own task, in one pass of the encoder."""
    task_ids = self.task_ids.lookup(task)
    with tf.control_dependencies(_same_row_counts(task, text, text_pair) + [
        tf.debugging.assert_non_negative(
            task_ids, message="Unknown task name in `task`; this model serves "
            f"{[spec.name for spec in self.specs]}.")]):
      task_ids = tf.identity(task_ids)
    longest = max(packing.seq_length for packing in self.packings)
    packing_ids = tf.gather(self.packing_of_task, task_ids)
    rows, packed = [], []
    for index, packing in enumerate(self.packings):
      positions = tf.cast(tf.where(tf.equal(packing_ids, index))[:, 0], tf.int32)
      texts = [tf.gather(text, positions)]
      if packing.num_texts == 2:
        texts.append(tf.gather(text_pair, positions))
      inputs = self._pack(packing, texts)
      padding = [[0, 0], [0, longest - packing.seq_length]]
      rows.append(positions)
      packed.append({key: tf.pad(value, padding) for key, value in inputs.items()})
    inputs = {key: tf.dynamic_stitch(rows, [p[key] for p in packed])
              for key in adapted_bert_encoder.INPUT_KEYS}
    logits = self._logits(inputs, task_ids)
    regression = tf.gather(self.regression, task_ids)
    valid = (tf.range(tf.shape(logits)[1])[tf.newaxis]
             < tf.gather(self.num_classes, task_ids)[:, tf.newaxis])
    probabilities = tf.nn.softmax(tf.where(valid, logits, -np.inf), axis=-1)
    probabilities = tf.where(valid & ~regression[:, tf.newaxis], probabilities, 0.0)
    predicted = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    result = {"label": tf.gather_nd(self.label_names, tf.stack([task_ids, predicted], axis=1))}
    if not all(spec.label_names is None for spec in self.specs):
      result["probabilities"] = probabilities
    if any(spec.label_names is None for spec in self.specs):
      result["scores"] = tf.where(regression, logits[:, 0], 0.0)
    return result

  def task_signature(self, index):
    fields = self.specs[index].preprocessing.text_fields
    function = tf.function(lambda **texts: self.predict_task(index, [texts[f] for f in fields]),
                           autograph=False)
    return function.get_concrete_function(
        **{field: tf.TensorSpec([None], tf.string, name=field) for field in fields})

  def routed_signature(self):
    specs = dict(task=tf.TensorSpec([None], tf.string, name="task"),
                 text=tf.TensorSpec([None], tf.string, name="text"))
    if any(len(spec.preprocessing.text_fields) == 2 for spec in self.specs):
      specs["text_pair"] = tf.TensorSpec([None], tf.string, name="text_pair")
    return tf.function(self.predict_routed, autograph=False).get_concrete_function(**specs)


class _Packing(collections.namedtuple("_Packing", "handle seq_length num_texts")):
  """How a task turns its texts into encoder inputs: tasks alike share one graph."""


def _packing(spec):
  return _Packing(spec.preprocessing.handle, spec.preprocessing.seq_length,
                  len(spec.preprocessing.text_fields))


def _stack_hidden_layers(specs, hidden_size):
  """Per hidden head layer: `[tasks, hidden, hidden]` kernels, `[tasks, hidden]` biases and
  which tasks' heads have that layer (the others pass their input through)."""
  layers = []
  for layer in range(max(spec.hidden_layers for spec in specs)):
    kernels = np.zeros([len(specs), hidden_size, hidden_size], np.float32)
    biases = np.zeros([len(specs), hidden_size], np.float32)
    for index, spec in enumerate(specs):
      if layer < spec.hidden_layers:
        kernels[index], biases[index] = spec.head_layer(layer)
    layers.append((tf.Variable(kernels, trainable=False, name=f"head_hidden_{layer}_kernels"),
                   tf.Variable(biases, trainable=False, name=f"head_hidden_{layer}_biases"),
                   tf.constant([layer < spec.hidden_layers for spec in specs])))
  return layers

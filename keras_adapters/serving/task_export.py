"""One self-contained SavedModel per task: raw strings in, probabilities or scores out.

Also what every export of this package checks before it replaces a folder (`export_kind`,
`check_export_dir`): a folder holding another kind of export, or other files, is kept.
"""

import contextlib
import functools
import os

import tensorflow as tf
import tensorflow_hub as hub
from tensorflow.core.protobuf import saved_model_pb2

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.models import merging
from keras_adapters.models import saving
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

# The kinds of SavedModel this package writes, told apart by their signatures.
TASK_EXPORT = "single-task"
MULTITASK_EXPORT = "multi-task"
QA_EXPORT = "question-answering"
_REPLACE_FIX = "Pick another folder, or pass overwrite=True to replace it."


class _TaskModule(tf.Module):
  """Preprocessing, encoder with adapters and head, traced into one serving graph."""

  def __init__(self, model, preprocessor, text_fields, seq_length, label_names):
    super().__init__(name="task")
    self._model = keras_model_in_module(self, model)
    self.preprocessor = preprocessor
    self.text_fields = tuple(text_fields)
    self.seq_length = seq_length
    self.is_regression = label_names is None
    # Saved with the model so a server can map class ids back to names without our code.
    self.label_names = tf.Variable(list(label_names or []), dtype=tf.string, trainable=False,
                                   shape=[None], name="label_names")

  def predict(self, texts):
    inputs = pack_texts(self.preprocessor, texts, self.seq_length)
    return task_outputs(self._model(inputs), self.is_regression)


def keras_model_in_module(module, model):
  """`model` in inference mode, to call from `module`'s serving functions, with only its
  weights tracked by `module` (`module.model_weights`, what the SavedModel must hold).

  A Keras model tracked itself is written the way Keras saves models: every layer's call
  functions traced and stored beside their metadata. That was most of an export's time (and
  part of every load's) for graphs no signature calls.
  """
  module.model_weights = list(model.weights)
  return functools.partial(model, training=False)


def pack_texts(preprocessor, texts, seq_length):
  """Tokenizes one or two string tensors (segments) and packs them into BERT inputs.

  Args:
    preprocessor: An object with `tokenize` and `bert_pack_inputs` (a TF Hub BERT
      preprocessing model).
    texts: A list of one or two `[batch]` string tensors.
    seq_length: Length to pack to.

  Returns:
    The TF Hub BERT input dict, int32 `[batch, seq_length]` each.
  """
  segments = [preprocessor.tokenize(t) for t in texts]
  return preprocessor.bert_pack_inputs(segments, tf.constant(seq_length, tf.int32))


def task_outputs(logits, is_regression):
  """What a task's SavedModel returns for its logits: `scores` `[batch]` for a regression
  task, `probabilities` `[batch, classes]` otherwise."""
  if is_regression:
    return {"scores": logits[:, 0]}
  return {"probabilities": tf.nn.softmax(logits, axis=-1)}


def export_task(model, preprocessor, export_dir, *, text_fields=("text",), seq_length=128,
                label_names=None, overwrite=False, merge=True):
  """Writes a SavedModel that serves a trained task model on raw text.

  The SavedModel has a `serving_default` signature with one string input per text field
  (e.g. `sentence1`, `sentence2`) returning `probabilities` `[batch, classes]` (or `scores`
  `[batch]` for regression), and a `__call__` for `hub.KerasLayer(export_dir)`: a string
  tensor (one text field) or a list of string tensors (pairs). Preprocessing is inside, so
  serving needs TensorFlow and tensorflow-text only, no code of this package.

  Args:
    model: The trained Keras model mapping BERT input dicts to logits (or one score).
    preprocessor: An object with `tokenize` and `bert_pack_inputs`, such as a loaded TF Hub
      BERT preprocessing SavedModel or `preprocessing.create_preprocessor(...)`.
    export_dir: Folder to write, replaced atomically if it holds a single-task export;
      another non-empty folder is refused unless `overwrite=True`.
    text_fields: Names of the text inputs, one or two.
    seq_length: Length sequences are packed to; at most the encoder's position embeddings.
    label_names: Class names in logit order, one per logit, or `None` for a regression task
      (one output).
    overwrite: Replace a non-empty folder that is not a single-task export.
    merge: Fold LoRA and (IA)³ into the frozen kernels for the export (`keras_adapters.merge`,
      undone afterwards): the SavedModel has the base's own graph and cost. `False` keeps
      them as separate layers.

  Returns:
    `export_dir`.

  Raises:
    ValueError: `label_names` do not match the model's logits, `seq_length` is more than the
      encoder's position embeddings, or the preprocessor does not fit the encoder.
  """
  if not 1 <= len(text_fields) <= 2:
    raise ValueError(f"A task takes one or two text fields, got {list(text_fields)}.")
  _check_outputs(model, label_names)
  if not overwrite:
    check_export_dir(export_dir, TASK_EXPORT)
  encoders = [layer for layer in model.submodules
              if isinstance(layer, adapted_bert_encoder.AdaptedBertEncoder)]
  encoder_config = encoders[0].get_config() if len(encoders) == 1 else None
  if encoder_config:
    compatibility.check_seq_length(seq_length, encoder_config, argument="seq_length")
  compatibility.check_preprocessor(
      preprocessor, encoder_config,
      encoder_tokenizer=getattr(encoders[0], "hub_tokenizer", None) if encoder_config else None)
  with (merging.merged_if_any(model) if merge else contextlib.nullcontext()):
    _save_task_module(_TaskModule(model, preprocessor, text_fields, seq_length, label_names),
                      export_dir)
  return export_dir


def _save_task_module(module, export_dir):
  """Traces `module`'s serving functions and writes it to `export_dir`, atomically."""
  string_spec = tf.TensorSpec([None], tf.string)
  if len(module.text_fields) == 1:
    module.__call__ = tf.function(lambda text: module.predict([text]),
                                  input_signature=[string_spec])
  else:
    module.__call__ = tf.function(lambda texts: module.predict(texts),
                                  input_signature=[[string_spec] * len(module.text_fields)])
  serving = tf.function(
      lambda **texts: module.predict([texts[field] for field in module.text_fields]),
      input_signature=None).get_concrete_function(
          **{field: tf.TensorSpec([None], tf.string, name=field) for field in module.text_fields})
  with atomic_io.atomic_directory(export_dir, marker="saved_model.pb") as staging:
    tf.saved_model.save(module, staging, signatures={"serving_default": serving})


def export_kind(directory):
  """The kind of export `directory` holds, read from `saved_model.pb` without loading it.

  Returns:
    `TASK_EXPORT`, `MULTITASK_EXPORT` or `QA_EXPORT`; "another SavedModel" for a SavedModel
    of none of these kinds; `None` without a SavedModel.
  """
  path = os.path.join(directory, "saved_model.pb")
  if not tf.io.gfile.exists(path):
    return None
  saved_model = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(path, "rb") as f:
    saved_model.ParseFromString(f.read())
  signatures = saved_model.meta_graphs[0].signature_def if saved_model.meta_graphs else {}
  outputs = (set(signatures["serving_default"].outputs) if "serving_default" in signatures
             else set())
  if "routed" in signatures:  # multitask_export.ROUTED_SIGNATURE; that module imports this.
    return MULTITASK_EXPORT
  if "answer" in outputs:
    return QA_EXPORT
  if outputs and outputs <= {"probabilities", "scores"}:
    return TASK_EXPORT
  return "another SavedModel"


def check_export_dir(export_dir, kind, error=errors.UsageError, fix=_REPLACE_FIX):
  """Raises `error` if `export_dir` is a non-empty folder that is not an export of `kind`:
  writing a `kind` export there would delete what it holds.

  Args:
    export_dir: The folder an export is about to replace.
    kind: The kind of that export (`TASK_EXPORT`, ...).
    error: The exception type to raise.
    fix: What the message tells the user to do.
  """
  if not tf.io.gfile.isdir(export_dir) or not tf.io.gfile.listdir(export_dir):
    return
  held = export_kind(export_dir)
  if held == kind:
    return
  what = {None: "other files", "another SavedModel": "another SavedModel"}.get(
      held, f"a {held} export")
  raise error(f"{export_dir!r} holds {what}, not a {kind} export; exporting there would "
              f"delete it. {fix}")


def _check_outputs(model, label_names):
  """Raises unless `label_names` name the model's logits one to one (or it has one score)."""
  outputs = model.output_shape[-1] if hasattr(model, "output_shape") else None
  if label_names is None:
    if outputs not in (None, 1):
      raise ValueError(f"label_names=None exports a regression task's one score, but the model "
                       f"has {outputs} outputs: pass label_names= naming each of them.")
    return
  if isinstance(label_names, (str, bytes)) or not all(
      isinstance(name, str) for name in label_names):
    raise ValueError(f"label_names={label_names!r}: give a list of class names (strings).")
  if outputs is not None and len(label_names) != outputs:
    raise ValueError(f"label_names={list(label_names)} names {len(label_names)} classes, but the "
                     f"model has {outputs} logits: give one name per logit, in logit order.")


def export_task_from_artifact(directory, export_dir, *, base_handle=None,
                              preprocess_handle=None):
  """Writes the task's single-task SavedModel (`export_task`) from its artifact alone.

  Args:
    directory: An artifact with a head and preprocessing (format 2).
    export_dir: Folder of the SavedModel.
    base_handle: The base encoder, if not at the recorded handle.
    preprocess_handle: The preprocessing model, if not at the recorded handle.

  Returns:
    `export_dir`.
  """
  model = saving.load_task_model(directory, base_handle=base_handle)
  config = adapter_artifact.read_adapter_config(directory)
  preprocessing = adapter_artifact.preprocessing_config(config, directory, preprocess_handle)
  return export_task(
      model, hub.load(preprocessing.handle), export_dir,
      text_fields=preprocessing.text_fields, seq_length=preprocessing.seq_length,
      label_names=model.head_config.label_names)

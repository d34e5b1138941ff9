"""What a task's raw-text SavedModel is, on either stack: the serving module (the TF Hub
preprocessing model, the task model and its head's outputs) and how it is written, and the
export kinds every export of the package checks before it replaces a folder.
"""

import functools
import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

# The kinds of SavedModel this package writes, told apart by their signatures.
TASK_EXPORT = "single-task"
MULTITASK_EXPORT = "multi-task"
QA_EXPORT = "question-answering"
_REPLACE_FIX = "Pick another folder, or pass overwrite=True to replace it."


class TaskModule(tf.Module):
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


def save_task_module(module, export_dir):
  """Traces `module`'s serving functions and writes it to `export_dir`, atomically."""
  fields = module.text_fields
  # The serving functions branch on Python values only: without autograph, converting the
  # model's source (most of an export's tracing) is not needed.
  serving = tf.function(
      lambda **texts: module.predict([texts[field] for field in fields]),
      autograph=False).get_concrete_function(
          **{field: tf.TensorSpec([None], tf.string, name=field) for field in fields})
  # `__call__` calls the serving graph instead of tracing the model a second time (the save
  # traces the module's own functions again: a call is cheap to trace, the model is not).
  string_spec = tf.TensorSpec([None], tf.string)
  if len(fields) == 1:
    module.__call__ = tf.function(lambda text: serving(**{fields[0]: text}),
                                  input_signature=[string_spec], autograph=False)
  else:
    module.__call__ = tf.function(lambda texts: serving(**dict(zip(fields, texts))),
                                  input_signature=[[string_spec] * len(fields)], autograph=False)
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


def check_outputs(model, label_names):
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

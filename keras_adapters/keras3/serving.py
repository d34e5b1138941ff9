"""A Keras 3 task as a self-contained SavedModel: raw strings in, probabilities or scores out.

The SavedModel is the Keras 2 path's (`keras_adapters.serving.text_task`): the TF Hub BERT
preprocessing model packs the text, the task model (its backbone with the adapters, and
its head) computes the logits. It needs the TensorFlow backend, as SavedModels are
TensorFlow graphs; serving it needs TensorFlow and tensorflow-text only.
"""

import keras
import tensorflow as tf

from keras_adapters.keras3 import artifacts
from keras_adapters.serving import text_task
from keras_adapters.utils import errors

# The TF Hub BERT inputs the preprocessing model packs → a keras-hub backbone's inputs.
_BACKBONE_INPUTS = {"input_word_ids": "token_ids", "input_type_ids": "segment_ids",
                    "input_mask": "padding_mask"}
# `export_task`'s default label names: those the model was loaded with.
_RECORDED = object()


def export_task(model, export_dir, *, preprocessing=None, label_names=_RECORDED,
                overwrite=False):
  """Writes a SavedModel that serves a Keras 3 task model on raw text.

  Its `serving_default` signature takes one string tensor per text field (`text`, or e.g.
  `sentence1` and `sentence2`) and returns `probabilities` `[batch, classes]` (or `scores`
  `[batch]` for a regression task), as `keras_adapters.export_task`'s do; `export_multitask`
  serves the task's artifact beside others.

  Example:
  ```python
  model = kak.load_task_model("runs/airline/export/adapters", kak.from_tf_hub())
  kak.export_task(model, "airline_savedmodel")
  tf.saved_model.load("airline_savedmodel").signatures["serving_default"](
      text=tf.constant(["great flight"]))["probabilities"]
  ```

  Args:
    model: A task model on a keras-hub backbone taking `token_ids`, `segment_ids` and
      `padding_mask` (`kak.load_task_model`, `kak.build_classifier`, a keras-hub
      `BertTextClassifier` without its preprocessor).
    export_dir: Folder to write, replaced atomically if it holds a single-task export;
      another non-empty folder is refused unless `overwrite=True`.
    preprocessing: A `PreprocessingConfig` (the TF Hub preprocessing model, text fields,
      sequence length); default the one the model was loaded with (`load_task_model`).
    label_names: Class names in logit order, or `None` for a regression task's one score;
      default the names the model was loaded with.
    overwrite: Replace a non-empty folder that is not a single-task export.

  Returns:
    `export_dir`.

  Raises:
    UsageError: Another backend than TensorFlow, no preprocessing, label names that do not
      fit the logits, or a folder holding something else.
  """
  if keras.backend.backend() != "tensorflow":
    raise errors.UsageError(
        f"kak.export_task writes a TensorFlow SavedModel, which needs the TensorFlow backend; "
        f"Keras runs on {keras.backend.backend()!r}: run with KERAS_BACKEND=tensorflow.")
  preprocessing = preprocessing or getattr(model, "preprocessing_config", None)
  if preprocessing is None:
    raise errors.UsageError(
        "kak.export_task needs the task's preprocessing: pass preprocessing="
        "kak.PreprocessingConfig(<TF Hub BERT preprocessing handle>, text_fields, seq_length).")
  if label_names is _RECORDED:
    label_names = (getattr(model, "head_config", None) or {}).get("label_names")
  try:
    text_task.check_outputs(model, label_names)
  except ValueError as error:
    raise errors.UsageError(str(error)) from None
  if not overwrite:
    text_task.check_export_dir(export_dir, text_task.TASK_EXPORT)
  inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in _BACKBONE_INPUTS}
  on_hub_inputs = keras.Model(
      inputs, model({key: inputs[name] for name, key in _BACKBONE_INPUTS.items()}))
  module = text_task.TaskModule(on_hub_inputs, tf.saved_model.load(preprocessing.handle),
                                preprocessing.text_fields, preprocessing.seq_length,
                                label_names)
  text_task.save_task_module(module, export_dir)
  return export_dir

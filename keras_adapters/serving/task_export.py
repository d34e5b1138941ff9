"""One self-contained SavedModel per task: raw strings in, probabilities or scores out.

The serving module and what every export of this package checks before it replaces a folder
(`export_kind`, `check_export_dir`) are `text_task`'s, which the Keras 3 path shares.
"""

import contextlib

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.models import merging
from keras_adapters.models import saving
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.serving import text_task
# What the package's other exports, its CLIs and users take from here.
from keras_adapters.serving.text_task import MULTITASK_EXPORT  # pylint: disable=unused-import
from keras_adapters.serving.text_task import QA_EXPORT  # pylint: disable=unused-import
from keras_adapters.serving.text_task import TASK_EXPORT
from keras_adapters.serving.text_task import check_export_dir
from keras_adapters.serving.text_task import export_kind  # pylint: disable=unused-import
from keras_adapters.serving.text_task import keras_model_in_module  # pylint: disable=unused-import
from keras_adapters.serving.text_task import pack_texts  # pylint: disable=unused-import
from keras_adapters.serving.text_task import task_outputs  # pylint: disable=unused-import


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
  text_task.check_outputs(model, label_names)
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
    text_task.save_task_module(text_task.TaskModule(model, preprocessor, text_fields, seq_length, label_names),
                      export_dir)
  return export_dir


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
      model, compatibility.load_preprocessor(preprocessing.handle), export_dir,
      text_fields=preprocessing.text_fields, seq_length=preprocessing.seq_length,
      label_names=model.head_config.label_names)

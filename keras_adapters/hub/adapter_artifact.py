"""Adapter-only artifacts: a task's trained weights without the shared base, as in peft.

An artifact is a folder with `adapter_config.json` (the `AdaptedBert` configuration, the base
handle and the base's fingerprint, every stored tensor's name and shape) and
`adapter_model.safetensors` (the task's trained variables: adapters, LayerNorms and head under
the paper's tuning). safetensors holds raw tensors only, so loading an artifact executes no
code. Re-attaching checks the fingerprint: an artifact trained on another base is refused.
"""

import json
import os

import numpy as np
from safetensors import numpy as safetensors_numpy

from keras_adapters.models import adapted_bert as adapted_bert_lib
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import atomic_io

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
FORMAT_VERSION = 1


class AdapterArtifactError(ValueError):
  """An artifact that is missing, corrupt, or does not fit the model it is loaded into."""


def save_adapters(model, directory, metadata=None):
  """Writes `model`'s trained variables and configuration to `directory`, atomically.

  Args:
    model: A Keras model containing exactly one `AdaptedBert`.
    directory: Folder to write (replaced if it exists).
    metadata: Optional JSON-serialisable dict stored with the config (task name, labels...).

  Returns:
    `directory`.
  """
  bert = _the_adapted_bert(model)
  tensors = {key: variable.numpy() for key, variable in _trainable_by_key(model, bert).items()}
  config = dict(
      format_version=FORMAT_VERSION,
      adapted_bert=bert.get_config(),
      base_fingerprint=bert.base_fingerprint,
      tensors={key: list(value.shape) for key, value in tensors.items()},
      metadata=metadata or {})
  with atomic_io.atomic_directory(directory) as staging:
    atomic_io.write_bytes(os.path.join(staging, WEIGHTS_FILE), safetensors_numpy.save(tensors))
    atomic_io.write_json(os.path.join(staging, CONFIG_FILE), config)
  return directory


def read_adapter_config(directory):
  """Returns the parsed `adapter_config.json` of an artifact, or raises a clear error."""
  path = os.path.join(os.fspath(directory), CONFIG_FILE)
  if not os.path.isfile(path):
    raise AdapterArtifactError(
        f"No adapter artifact at {directory!r}: {CONFIG_FILE} is missing. Pass a folder "
        "written by save_adapters().")
  try:
    with open(path, encoding="utf-8") as f:
      config = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
    raise AdapterArtifactError(
        f"{path} is corrupt ({error}); save the adapters again.") from None
  if config.get("format_version") != FORMAT_VERSION:
    raise AdapterArtifactError(
        f"{path} has format_version {config.get('format_version')!r}; this version of "
        f"keras_adapters reads {FORMAT_VERSION}.")
  return config


def load_adapters(model, directory):
  """Loads an artifact written by `save_adapters` into a model of the same layout.

  Args:
    model: A Keras model built like the saved one, around the same base encoder.
    directory: The artifact folder.

  Raises:
    AdapterArtifactError: The artifact is missing or corrupt, was trained on another base, or
      its tensors do not fit the model's trainable variables.
  """
  config = read_adapter_config(directory)
  bert = _the_adapted_bert(model)
  if config["base_fingerprint"] != bert.base_fingerprint:
    raise AdapterArtifactError(
        f"The adapters at {directory!r} were trained on another base model (saved from "
        f"{config['adapted_bert'].get('handle')!r}, fingerprint "
        f"{config['base_fingerprint'][:12]}...); this model wraps {bert.handle!r} "
        f"({bert.base_fingerprint[:12]}...). Attach them to the base they were trained on.")
  weights_path = os.path.join(os.fspath(directory), WEIGHTS_FILE)
  try:
    tensors = safetensors_numpy.load_file(weights_path)
  except Exception as error:  # pylint: disable=broad-except
    raise AdapterArtifactError(
        f"Cannot read {weights_path} ({error}): the artifact is corrupt or incomplete; "
        "save the adapters again.") from None
  targets = _trainable_by_key(model, bert)
  if set(tensors) != set(targets):
    missing, extra = sorted(set(targets) - set(tensors)), sorted(set(tensors) - set(targets))
    raise AdapterArtifactError(
        f"The artifact at {directory!r} does not fit this model: the model needs {missing} "
        f"and the artifact has unexpected {extra}. Build the model with the same adapter "
        f"configuration and head as when saving ({config['adapted_bert']}).")
  for key, variable in targets.items():
    if tuple(variable.shape) != tensors[key].shape:
      raise AdapterArtifactError(
          f"Tensor {key!r} of {directory!r} has shape {tensors[key].shape}, the model's has "
          f"{tuple(variable.shape)}: the model is built with another configuration.")
  for key, variable in targets.items():
    variable.assign(np.asarray(tensors[key]))


def _the_adapted_bert(model):
  found = [m for m in [model] + list(model.submodules)
           if isinstance(m, adapted_bert_lib.AdaptedBert)]
  if len(found) != 1:
    raise AdapterArtifactError(
        f"Adapter artifacts need a model with exactly one AdaptedBert; found {len(found)}.")
  return found[0]


def _trainable_by_key(model, bert):
  """Stable keys: Model Garden names inside the encoder, `head/<i>/<name>` outside it.

  Head layers get Keras auto-names ("dense_3") that differ between processes, so outside the
  encoder the position among the trainable variables identifies a tensor.
  """
  encoder_ids = {id(w) for w in bert.weights}
  keyed, head_index = {}, 0
  for variable in model.trainable_variables:
    if id(variable) in encoder_ids:
      key = adapted_bert_encoder.canonical_variable_name(variable.name)
    else:
      key = f"head/{head_index}/{variable.name.split(':')[0].rsplit('/', 1)[-1]}"
      head_index += 1
    keyed[key] = variable
  return keyed

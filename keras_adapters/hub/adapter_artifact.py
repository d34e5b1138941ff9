"""The adapter artifact format: a task's trained weights without the shared base, as in peft.

An artifact is a folder with `adapter_config.json` and `adapter_model.safetensors`. The config
(format 2) says everything needed to rebuild the task around its base:

- `base`: the base encoder's handle and fingerprint (SHA-256 of its weights) and the
  `AdaptedBert` arguments weights cannot reveal (activation, dropout, LayerNorm epsilon);
- `adapter_config`: the `AdapterConfig` of the adapter set (with its AdapterHub placement
  options; artifacts without them have Houlsby's), and `adapter_name`, its name;
- `head`: the task head (`kind`, `num_classes`, `pooling`, `dropout_rate`, `label_names`,
  `hidden_layers`, `hidden_activation`; a head recorded without the last two has no hidden
  layer), or `null` for a model not built by `build_classifier`;
- `preprocessing`: how text becomes encoder inputs (`handle`, `text_fields`, `seq_length`),
  or `null`;
- `tensors`: every stored tensor's name and shape; `metadata`: the caller's;
- `checksums`: the SHA-256 of each weights file, so that a weights file swapped with another
  artifact's of the same layout is refused instead of served under this config's labels
  (artifacts saved before checksums load with a warning).

The safetensors file holds raw tensors only (the set's adapters and LayerNorms, the head,
and for `top_k`/`full` tuning the base weights that trained), so loading executes no code.
This module reads and writes the format; `keras_adapters.models.saving` saves models to it
and rebuilds them from it. Format 1 (no base arguments, head or preprocessing) is still
read by `load_adapters`; rebuilding a whole model needs format 2.
"""

import dataclasses
import hashlib
import json
import os
import re
from typing import Optional, Tuple

from absl import logging
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters import methods  # pylint: disable=unused-import  (registers them)
from keras_adapters.methods import registry
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# Tensors every adapter set holds (its LayerNorms) and the head's; with each registered
# method's (`registry.Method.artifact_keys`), the task's. Anything else an artifact stores is
# a base weight that its tuning changed.
_SET_TENSOR = (r"head/", r"embeddings/layer_norm/",
               r"transformer/layer_\d+/(self_attention_layer_norm|output_layer_norm)/")


def _is_task_tensor(key):
  """Whether tensor `key` is the task's own (its set's or its head's), not the base's."""
  patterns = _SET_TENSOR + tuple(pattern for method in registry.methods()
                                 for pattern in method.artifact_keys)
  return any(re.match(pattern, key) for pattern in patterns)


class AdapterArtifactError(errors.UsageError):
  """An artifact that is missing, corrupt, or does not fit the model it is loaded into."""


@dataclasses.dataclass(frozen=True)
class PreprocessingConfig:
  """How a task's raw text becomes encoder inputs, as recorded in its artifact.

  Attributes:
    handle: TF Hub BERT preprocessing SavedModel (handle or path) matching the base.
    text_fields: Names of the task's text inputs, one or two (a pair).
    seq_length: Length sequences are packed to.
  """
  handle: str
  text_fields: Tuple[str, ...] = ("text",)
  seq_length: int = 128

  def __post_init__(self):
    object.__setattr__(self, "handle", os.fspath(self.handle))
    fields = self.text_fields
    if isinstance(fields, str) or not 1 <= len(fields) <= 2:
      raise ValueError(f"text_fields must name one or two text inputs, got {fields!r}.")
    object.__setattr__(self, "text_fields", tuple(fields))
    if (isinstance(self.seq_length, bool) or not isinstance(self.seq_length, int)
        or self.seq_length < 2):
      raise ValueError(f"seq_length must be an integer >= 2, got {self.seq_length!r}.")

  def to_dict(self):
    return dict(handle=self.handle, text_fields=list(self.text_fields),
                seq_length=self.seq_length)

  @classmethod
  def from_dict(cls, values):
    return cls(values["handle"], tuple(values["text_fields"]), values["seq_length"])


def write_artifact(directory, config, tensors, overwrite=False):
  """Writes an artifact folder atomically.

  Args:
    directory: Folder to write. An existing artifact there is replaced; a folder holding
      files of another kind is refused unless `overwrite`, so a wrong path never replaces a
      user's files. Files the artifact does not consist of stay.
    config: The config dict (without `format_version` and `tensors`, which are added).
    tensors: Name → numpy array.
    overwrite: Write into a folder that holds files of another kind.

  Returns:
    `directory`.
  """
  check_output_folder(directory, ARTIFACT, overwrite)
  weights = safetensors_numpy.save(tensors)
  config = dict(config, format_version=FORMAT_VERSION,
                tensors={key: list(value.shape) for key, value in tensors.items()},
                checksums={WEIGHTS_FILE: _sha256(weights)})
  with atomic_io.atomic_directory(directory, marker=CONFIG_FILE) as staging:
    atomic_io.write_bytes(os.path.join(staging, WEIGHTS_FILE), weights)
    atomic_io.write_json(os.path.join(staging, CONFIG_FILE), config)
  return directory


def read_adapter_config(directory):
  """Returns the parsed `adapter_config.json` of an artifact, or raises a clear error."""
  path = os.path.join(os.fspath(directory), CONFIG_FILE)
  try:
    config = atomic_io.read_json(path)
  except (tf.errors.OpError, UnicodeDecodeError, json.JSONDecodeError) as error:
    raise AdapterArtifactError(
        f"{path} is corrupt ({error}); save the adapters again.") from None
  if config is None:
    tilde = (" (its leading ~ is taken literally, as a folder named ~: pass "
             f"{os.path.expanduser(os.fspath(directory))!r})"
             if os.fspath(directory).startswith("~") else "")
    raise AdapterArtifactError(
        f"No adapter artifact at {directory!r}{tilde}: {CONFIG_FILE} is missing. Pass a "
        "folder written by save_adapters().")
  check_input_folder(directory, ARTIFACT, config)
  if not isinstance(config, dict) or config.get("format_version") not in _READABLE_VERSIONS:
    version = config.get("format_version") if isinstance(config, dict) else None
    raise AdapterArtifactError(
        f"{path} has format_version {version!r}; this version of keras_adapters reads "
        f"{list(_READABLE_VERSIONS)}.")
  return config


# What AdapterHub's `save_adapter` writes beside its `adapter_config.json`, and the keys of
# that file (`config` holds the adapter's options, `name` its name).
_ADAPTERHUB_FILES = ("adapter.safetensors", "pytorch_adapter.bin", "head_config.json")
_ADAPTERHUB_KEYS = ("config", "hidden_size", "model_class", "model_type", "version")
# The kinds of folder `folder_kind` tells apart.
EMPTY = "empty"
ARTIFACT = "artifact"
PEFT = "peft"
ADAPTERHUB = "adapterhub"
OTHER = "other"
_KIND_NAMES = {ARTIFACT: "an adapter artifact of this library", PEFT: "a peft adapter",
               ADAPTERHUB: "an AdapterHub adapter", OTHER: "other files"}


def folder_kind(directory, config=None):
  """What `directory` holds: `EMPTY` (nothing, or no folder), `ARTIFACT` (this library's
  adapter artifact), `PEFT` (peft's `save_pretrained`), `ADAPTERHUB` (AdapterHub's
  `save_adapter`) or `OTHER`; `config`: its parsed `adapter_config.json`, if read."""
  directory = os.fspath(directory)
  if not tf.io.gfile.isdir(directory) or not tf.io.gfile.listdir(directory):
    return EMPTY
  if config is None:
    try:
      config = atomic_io.read_json(os.path.join(directory, CONFIG_FILE))
    except (tf.errors.OpError, UnicodeDecodeError, json.JSONDecodeError):
      config = None
  if isinstance(config, dict) and "format_version" in config:
    return ARTIFACT
  if isinstance(config, dict) and "peft_type" in config:
    return PEFT
  if ((isinstance(config, dict) and sum(key in config for key in _ADAPTERHUB_KEYS) >= 2)
      or any(tf.io.gfile.exists(os.path.join(directory, name)) for name in _ADAPTERHUB_FILES)):
    return ADAPTERHUB
  return OTHER


def check_output_folder(directory, kind, overwrite, error=AdapterArtifactError):
  """Refuses to write a `kind` folder into `directory` when it holds files of another kind,
  unless `overwrite`: a wrong path, or a conversion into its own source, must not replace a
  user's files. (Writers replace only the files they write; see `atomic_io`.)

  Args:
    directory: The folder about to be written.
    kind: What the writer writes (`ARTIFACT`, `PEFT` or `ADAPTERHUB`).
    overwrite: The caller's permission to write over files of another kind.
    error: The exception type to raise.
  """
  held = folder_kind(directory)
  if overwrite or held in (EMPTY, kind):
    return
  raise error(f"{os.fspath(directory)!r} holds {_KIND_NAMES[held]}, not {_KIND_NAMES[kind]}; "
              f"writing there would replace its files. Pick another folder, or pass "
              f"overwrite=True (--overwrite on the command line) to write there anyway.")


# How each kind of adapter folder is read.
_LOADERS = {ARTIFACT: "keras_adapters.load_task_model", PEFT: "keras_adapters.load_peft",
            ADAPTERHUB: "keras_adapters.load_adapterhub"}


def check_input_folder(directory, kind, config=None, error=AdapterArtifactError):
  """Refuses to read `directory` as a `kind` folder when it holds another kind of adapter,
  naming what reads it: its loader and the conversion of `experiments/convert_adapterhub.py`
  (whose flags are `--from_<kind>` and `--to_<kind>`).

  Args:
    directory: The folder about to be read.
    kind: What the reader reads (`ARTIFACT`, `PEFT` or `ADAPTERHUB`).
    config: Its parsed `adapter_config.json`, if read.
    error: The exception type to raise.
  """
  held = folder_kind(directory, config)
  if held not in _LOADERS or held == kind:
    return  # The reader's own checks name what is missing or wrong.
  directory = os.fspath(directory)
  # The script converts to and from artifacts only.
  target = kind if ARTIFACT in (held, kind) else ARTIFACT
  command = (f"`python experiments/convert_adapterhub.py --from_{held}={directory} "
             f"--to_{target}=<folder>`")
  fix = (f"convert it with {command} and pass that folder, or load it with {_LOADERS[held]}"
         if kind == ARTIFACT else
         f"load it with {_LOADERS[held]}, or convert it with {command}")
  raise error(f"{directory!r} is {_KIND_NAMES[held]}, not {_KIND_NAMES[kind]}: {fix}.")


def read_tensors(directory):
  """The artifact's tensors, name → numpy array, or a clear error.

  The weights file must have the checksum its config records (every reader of artifacts
  comes through here); an artifact saved before checksums loads with a warning.
  """
  path = os.path.join(os.fspath(directory), WEIGHTS_FILE)
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      data = f.read()
  except tf.errors.OpError as error:
    raise AdapterArtifactError(
        f"Cannot read {path} ({error}): the artifact is incomplete; save the adapters "
        "again.") from None
  _check_checksum(directory, data)
  try:
    return safetensors_numpy.load(data)
  except Exception as error:  # pylint: disable=broad-except
    raise AdapterArtifactError(
        f"Cannot read {path} ({error}): the artifact is corrupt or incomplete; "
        "save the adapters again.") from None


def _check_checksum(directory, data):
  """Raises unless `data`, the weights file of `directory`, is the one its config records."""
  config_path = os.path.join(os.fspath(directory), CONFIG_FILE)
  weights_path = os.path.join(os.fspath(directory), WEIGHTS_FILE)
  recorded = read_adapter_config(directory).get("checksums", {}).get(WEIGHTS_FILE)
  if recorded is None:
    logging.warning("%s records no checksum of %s (saved before checksums): its weights "
                    "cannot be tied to it. Save the adapters again to record one.",
                    config_path, weights_path)
    return
  actual = _sha256(data)
  if actual != recorded:
    raise AdapterArtifactError(
        f"{weights_path} (SHA-256 {actual[7:19]}...) is not the weights file {config_path} "
        f"was saved with ({recorded[7:19]}...): it was swapped, modified or is corrupt. Put "
        "back the weights file saved with that config, or save the adapters again.")


def _sha256(data):
  return "sha256:" + hashlib.sha256(data).hexdigest()


def base_fingerprint(config):
  """The fingerprint of the base an artifact (of any readable format) was trained on."""
  if config["format_version"] == 1:
    return config["base_fingerprint"]
  return config["base"]["fingerprint"]


def base_handle(config):
  """The handle of the base an artifact was saved from."""
  if config["format_version"] == 1:
    return config["adapted_bert"].get("handle")
  return config["base"]["handle"]


def changed_base_weights(config):
  """The base weights an artifact replaces (its tuning trained them), by name; none for the
  `adapters` and `layer_norm` tunings, whose tasks can share one base."""
  return sorted(key for key in config["tensors"] if not _is_task_tensor(key))


def require_task_description(config, directory, what):
  """Raises unless the artifact says how to rebuild its task (format 2 with a head).

  Args:
    config: The artifact's config.
    directory: Its folder, for the message.
    what: What needs the description, for the message (e.g. "load_task_model").
  """
  if config["format_version"] < 2:
    raise AdapterArtifactError(
        f"The artifact at {directory!r} has format_version {config['format_version']}, which "
        f"does not record its head or preprocessing, so {what} cannot rebuild its task. Build "
        "the model as it was trained and attach the weights with load_adapters(model, "
        "directory), then save_adapters(model, directory, label_names=..., preprocessing=...) "
        "writes it in the current format.")
  if config.get("head") is None:
    raise AdapterArtifactError(
        f"The artifact at {directory!r} does not describe its head (its model was not built "
        f"by build_classifier), so {what} cannot rebuild it. Build the model and attach the "
        "weights with load_adapters(model, directory).")


def preprocessing_config(config, directory, handle=None):
  """The artifact's `PreprocessingConfig`, with `handle` in place of the recorded one if given.

  Raises:
    AdapterArtifactError: The artifact records no preprocessing.
  """
  if config.get("preprocessing") is None:
    raise AdapterArtifactError(
        f"The artifact at {directory!r} records no preprocessing; save it with "
        "save_adapters(..., preprocessing=PreprocessingConfig(handle, text_fields, "
        "seq_length)).")
  preprocessing = PreprocessingConfig.from_dict(config["preprocessing"])
  return dataclasses.replace(preprocessing, handle=handle) if handle else preprocessing


def label_names(head) -> Optional[Tuple[str, ...]]:
  """The class names of a recorded head; class ids as names when none were recorded, `None`
  for a regression head (one score)."""
  if head["num_classes"] == 1 and not head.get("label_names"):
    return None
  return tuple(head.get("label_names") or (str(i) for i in range(head["num_classes"])))


def weights_fingerprint(weights):
  """SHA-256 of a name → array mapping, independent of the mapping's order: a base's
  fingerprint, over its weights under their Model Garden names, on either stack."""
  digest = hashlib.sha256()
  for name in sorted(weights):
    value = np.ascontiguousarray(weights[name])
    digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def task_config(*, base, adapter_name, adapter_config, head, preprocessing, metadata):
  """The config an artifact records (without what `write_artifact` adds).

  Args:
    base: The base's record: `handle`, `fingerprint`, `activation`, `dropout_rate`,
      `attention_dropout_rate`, `layer_norm_epsilon`.
    adapter_name: The adapter set's name.
    adapter_config: Its config (`AdapterConfig`, `LoRAConfig`, `IA3Config`).
    head: The head's fields as a dict (`HeadConfig`'s), or `None`.
    preprocessing: A `PreprocessingConfig`, or `None`.
    metadata: The caller's JSON-serialisable dict, or `None`.
  """
  return dict(
      base={key: base[key] for key in _BASE_KEYS}, adapter_name=adapter_name,
      adapter_config=adapter_config.to_dict(), head=None if head is None else _head(head),
      preprocessing=None if preprocessing is None else preprocessing.to_dict(),
      metadata=metadata or {})


_BASE_KEYS = ("handle", "fingerprint", "activation", "dropout_rate", "attention_dropout_rate",
              "layer_norm_epsilon")


def _head(head):
  values = dict(head)
  if values.get("label_names") is not None:
    values["label_names"] = list(values["label_names"])
  if not values.get("hidden_layers"):
    # A single dense layer is recorded as before hidden layers existed: readers of either
    # version rebuild it.
    values.pop("hidden_layers", None)
    values.pop("hidden_activation", None)
  return values


def check_base(config, directory, fingerprint, handle):
  """Raises unless the artifact was trained on the base of `fingerprint` (at `handle`)."""
  recorded = base_fingerprint(config)
  if recorded != fingerprint:
    raise AdapterArtifactError(
        f"The adapters at {directory!r} were trained on another base model (saved from "
        f"{base_handle(config)!r}, fingerprint {recorded[:12]}...); this model wraps "
        f"{handle!r} ({fingerprint[:12]}...). Attach them to the base they were trained on.")


def check_tensors_fit(config, directory, tensors, shapes):
  """Raises unless the artifact's `tensors` are exactly the model's, of its `shapes` (key →
  shape tuple)."""
  if set(tensors) != set(shapes):
    missing, extra = sorted(set(shapes) - set(tensors)), sorted(set(tensors) - set(shapes))
    raise AdapterArtifactError(
        f"The artifact at {directory!r} does not fit this model: the model needs {missing} "
        f"and the artifact has unexpected {extra}. Build the model with the same adapter "
        f"configuration and head as when saving ({config.get('adapter_config')}).")
  for key, shape in shapes.items():
    if tuple(shape) != tensors[key].shape:
      raise AdapterArtifactError(
          f"Tensor {key!r} of {directory!r} has shape {tensors[key].shape}, the model's has "
          f"{tuple(shape)}: the model is built with another configuration.")

"""Reads a TF Hub BERT encoder SavedModel: its weights and the configuration they imply.

A TF Hub SavedModel is an opaque restored graph: nothing can be inserted inside it. What can be
read are its variables, whose Model Garden names (`transformer/layer_0/self_attention/query/
kernel`, ...) and shapes determine the architecture. The encoder is then rebuilt in Keras, with
adapters, and every Hub variable is copied in by name.
"""

import dataclasses
import functools
import hashlib
import os
import re

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import errors

# Variables a Hub BERT export may carry beside the encoder, for its other signatures (the
# masked-LM head of `.../bert_en_uncased_L-12_H-768_A-12/4`'s `mlm` subobject). They have no
# counterpart in an encoder and are left out on purpose, not by accident.
_NON_ENCODER_PREFIXES = ("masked_lm/", "mlm/", "cls/")

_LAYER_PATTERN = re.compile(r"^transformer/layer_(\d+)/")


class HubEncoderError(errors.UsageError):
  """A Hub handle that cannot be read as a BERT encoder; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class HubEncoderWeights:
  """What a TF Hub BERT encoder holds.

  Attributes:
    handle: The handle or path it was read from.
    config: `AdaptedBertEncoder` arguments inferred from the variable shapes.
    weights: Model Garden variable name → numpy value.
    fingerprint: SHA-256 over names, shapes and values; identifies the base model.
  """
  handle: str
  config: dict
  weights: dict
  fingerprint: str


def read_hub_encoder(handle):
  """Loads a TF Hub BERT encoder SavedModel and returns its weights and configuration.

  Args:
    handle: A TF Hub handle (URL, resolved by `tensorflow_hub` and its cache) or the path of a
      local SavedModel folder.

  Returns:
    A `HubEncoderWeights`.

  Raises:
    HubEncoderError: The handle does not exist or cannot be downloaded, or the SavedModel is
      not a BERT encoder with Model Garden variable names.
  """
  handle = os.fspath(handle)
  saved_model_pb = os.path.join(handle, "saved_model.pb")
  # Several models around one base read it once per process; the modification time keys the
  # cache so a SavedModel rewritten in place is read again.
  stamp = os.path.getmtime(saved_model_pb) if os.path.isfile(saved_model_pb) else None
  return _read_hub_encoder(handle, stamp)


@functools.lru_cache(maxsize=2)
def _read_hub_encoder(handle, stamp):
  del stamp  # Only part of the cache key.
  loaded = _load(handle)
  weights = {}
  # A restored object lists its variables only if it was saved as a tf.Module (Hub models
  # are); anything else is no encoder, and the config check below says so.
  for variable in getattr(loaded, "variables", ()):
    name = adapted_bert_encoder.canonical_variable_name(variable.name)
    if name.startswith(_NON_ENCODER_PREFIXES):
      continue
    if name in weights:
      raise HubEncoderError(f"The SavedModel at {handle!r} has two variables named {name!r}.")
    weights[name] = variable.numpy()
  return HubEncoderWeights(
      handle=handle,
      config=_infer_config(handle, weights),
      weights=weights,
      fingerprint=fingerprint(weights))


def fingerprint(weights):
  """SHA-256 of a name → array mapping, independent of the mapping's order."""
  digest = hashlib.sha256()
  for name in sorted(weights):
    value = np.ascontiguousarray(weights[name])
    digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def _load(handle):
  is_url = "://" in handle
  if not is_url and not os.path.isdir(handle):
    raise HubEncoderError(
        f"No TF Hub encoder at {handle!r}: it is neither a URL nor an existing folder. Pass a "
        "TF Hub handle such as https://tfhub.dev/tensorflow/bert_en_uncased_L-12_H-768_A-12/4, "
        "a local SavedModel folder, or keras_adapters.default_hub_handle().")
  if not is_url and not tf.saved_model.contains_saved_model(handle):
    raise HubEncoderError(
        f"The folder {handle!r} holds no SavedModel (no saved_model.pb). Point the handle at "
        "the folder that contains saved_model.pb and variables/.")
  try:
    return hub.load(handle)
  except Exception as error:  # pylint: disable=broad-except
    hint = ("It could not be downloaded: without network access, download it elsewhere and "
            "pass the local folder, or set TFHUB_CACHE_DIR to a cache that holds it."
            if is_url else "The SavedModel could not be loaded.")
    raise HubEncoderError(f"Cannot load TF Hub encoder {handle!r}. {hint} ({error})") from None


def _infer_config(handle, weights):
  """Reads the encoder architecture off the variable shapes."""
  required = ("word_embeddings/embeddings", "position_embedding/embeddings",
              "type_embeddings/embeddings", "transformer/layer_0/self_attention/query/kernel",
              "transformer/layer_0/intermediate/kernel")
  missing = [name for name in required if name not in weights]
  if missing:
    sample = sorted(weights)[:5] or "nothing"
    raise HubEncoderError(
        f"{handle!r} is not a BERT encoder with Model Garden variable names (BertEncoder / "
        f"BertEncoderV2, as the official TF Hub BERTs): it lacks {missing}. Its variables "
        f"start {sample}. Pass a BERT encoder handle, not a preprocessing model or another "
        "network.")
  layer_ids = {int(m.group(1)) for m in map(_LAYER_PATTERN.match, weights) if m}
  num_layers = max(layer_ids) + 1
  if layer_ids != set(range(num_layers)):
    raise HubEncoderError(
        f"{handle!r} has Transformer layers {sorted(layer_ids)}: they should be numbered "
        f"0..{num_layers - 1} without gaps.")
  vocab_size, hidden_size = weights["word_embeddings/embeddings"].shape
  _, num_heads, _ = weights["transformer/layer_0/self_attention/query/kernel"].shape
  return dict(
      vocab_size=int(vocab_size),
      hidden_size=int(hidden_size),
      num_layers=num_layers,
      num_attention_heads=int(num_heads),
      intermediate_size=int(weights["transformer/layer_0/intermediate/kernel"].shape[1]),
      max_sequence_length=int(weights["position_embedding/embeddings"].shape[0]),
      type_vocab_size=int(weights["type_embeddings/embeddings"].shape[0]))


def copy_weights(encoder, hub_weights):
  """Assigns every Hub variable to the encoder variable of the same name.

  Args:
    encoder: An `AdaptedBertEncoder` of the inferred configuration.
    hub_weights: A `HubEncoderWeights`.

  Raises:
    HubEncoderError: A Hub variable has no counterpart, a counterpart has another shape, or
      an encoder base variable received no value.
  """
  targets = encoder.hub_variable_map()
  unused = sorted(set(hub_weights.weights) - set(targets))
  if unused:
    raise HubEncoderError(
        f"Hub variables with no place in the rebuilt encoder: {unused}. The SavedModel has "
        "parts this BERT layout does not know; it is not a supported BERT encoder.")
  unset = sorted(set(targets) - set(hub_weights.weights))
  if unset:
    raise HubEncoderError(
        f"The Hub encoder {hub_weights.handle!r} has no values for {unset}.")
  for name, variable in targets.items():
    value = hub_weights.weights[name]
    if tuple(variable.shape) != value.shape:
      raise HubEncoderError(
          f"Hub variable {name!r} has shape {value.shape}, the rebuilt encoder expects "
          f"{tuple(variable.shape)}.")
    variable.assign(value)

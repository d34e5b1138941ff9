"""`from_tf_hub`: a TF Hub or Model Garden BERT encoder as a keras-hub `BertBackbone`.

The encoder's variables (read with TensorFlow, no Keras 2) carry its sizes and weights; what
they cannot show, its feed-forward activation and LayerNorm epsilon, is found by probing:
the backbone is built with each candidate and kept only where its outputs on a padded
two-segment batch equal the TF Hub model's.
"""

import dataclasses
import os
import random
import re

import keras
import numpy as np

from keras_adapters.hub import proofs
from keras_adapters.hub import read_cache
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import tf_hub
from keras_adapters.utils import errors

# The largest difference between the backbone's outputs and the TF Hub model's, relative to
# the outputs' scale, that counts as the same encoder. Float32 sums in another order differ
# by about 1e-6; the exact and the tanh GELU by about 5e-3 on the embedded default.
TOLERANCE = 1e-5
# Tried in this order; the activation is the one whose outputs come closest.
_CANDIDATE_EPSILONS = (1e-12, 1e-6)
SUPPORTED = ("BERT encoders exported by the Model Garden's export_tfhub_lib (BertEncoder, "
             "BertEncoderV2: the TF Hub and Kaggle BERTs) and those keras_adapters converts")

# Everything from a Model Garden root on is a variable's name, whatever scopes enclose it.
_ROOT = re.compile(r"(?:^|/)((?:word_embeddings|position_embedding|type_embeddings|"
                   r"embeddings/layer_norm|embedding_projection|transformer/layer_\d+|"
                   r"pooler_transform)/.*?)(?::\d+)?$")
_LAYER = re.compile(r"^transformer/layer_(\d+)/")
# Variables of an export's other signatures (the masked-LM head), not of the encoder.
_NON_ENCODER_PREFIXES = ("masked_lm/", "mlm/", "cls/")


def from_tf_hub(handle=None, dropout=0.1):
  """A keras-hub `BertBackbone` (a `backbones.HubBertBackbone`) that computes what a TF Hub
  BERT encoder computes, with its weights, activation and epsilon.

  Example:
  ```python
  backbone = kak.from_tf_hub()  # the embedded all-MiniLM-L6-v2, exact GELU
  kak.adapt(backbone, kak.LoRAConfig(r=8))
  ```

  Args:
    handle: A TF Hub BERT encoder: a local SavedModel folder, a TF Hub or Kaggle URL, or
      `None` for the embedded default base.
    dropout: The backbone's dropout rate while training (the export does not record it).

  Returns:
    The backbone, in float32, its outputs within `TOLERANCE` of the encoder's.

  Raises:
    UsageError: The handle holds no BERT encoder this can convert, or no candidate
      activation and epsilon reproduces it; the message names what to pass instead.
  """
  folder = tf_hub.local_folder(handle, "hub")
  base = _bases.get(folder, _read)
  backbone = backbones.HubBertBackbone(**base.architecture, activation=base.activation,
                                       layer_norm_epsilon=base.epsilon, dropout=dropout,
                                       dtype="float32")
  _assign(folder, backbone, base.weights)
  # What artifacts record as the base (`keras3.artifacts`): the handle as given.
  backbone.tf_hub_handle = folder if handle is None else os.fspath(handle)
  return backbone


@dataclasses.dataclass(eq=False)
class _ConvertedBase:
  """What a TF Hub BERT encoder is as a `HubBertBackbone`: its sizes, activation, epsilon
  and Model Garden-named weights."""
  architecture: dict
  activation: str
  epsilon: float
  weights: dict


def _read(folder):
  """The `_ConvertedBase` of the SavedModel at `folder`: as an earlier read of the same files
  found it (`proofs`), its weights read from the checkpoint; else restored and probed."""
  digest = proofs.key(folder, "keras3_tf_hub_bert")
  record = proofs.recall(digest)
  if record is not None:
    return _ConvertedBase(record["architecture"], record["activation"], record["epsilon"],
                          _encoder_weights(folder, proofs.checkpoint_variables(folder)))
  base = _probed(folder)
  proofs.remember(digest, dict(architecture=base.architecture, activation=base.activation,
                               epsilon=base.epsilon))
  return base


def _probed(folder):
  """The `_ConvertedBase` of the SavedModel at `folder`, its candidates probed.

  The probes' backbones draw no seeds: Python's random state is put back after them, so that
  the backbone built from a read, new or kept, is seeded alike.
  """
  folder, loaded = tf_hub.load(folder, "hub", "TF Hub BERT encoder")
  if hasattr(loaded, "tokenize") and hasattr(loaded, "bert_pack_inputs"):
    raise errors.UsageError(
        f"{folder!r} is a BERT preprocessing model, not an encoder: pass it to "
        "kak.tokenizer_from_tf_hub, and the encoder here.")
  weights = _encoder_weights(
      folder, ((v.name, v.numpy()) for v in getattr(loaded, "variables", ())))
  architecture = _architecture(folder, weights)
  inputs = _probe_inputs(architecture)
  expected = _hub_outputs(folder, loaded, inputs)
  del loaded
  seeds = random.getstate()
  try:
    measured = []
    for epsilon in _CANDIDATE_EPSILONS:
      tried = []
      for activation in backbones.ACTIVATIONS:
        backbone = backbones.HubBertBackbone(**architecture, activation=activation,
                                             layer_norm_epsilon=epsilon, dtype="float32")
        _assign(folder, backbone, weights)
        tried.append((_difference(expected, backbone(inputs, training=False)), activation))
        measured.append(f"{activation}, epsilon {epsilon:g}: {tried[-1][0]:.2g}")
      difference, activation = min(tried, key=lambda pair: pair[0])
      if difference <= TOLERANCE:
        return _ConvertedBase(architecture, activation, epsilon, weights)
  finally:
    random.setstate(seeds)
  raise errors.UsageError(
      f"No keras-hub BertBackbone reproduces the encoder at {folder!r} (relative differences "
      f"{'; '.join(measured)}; tolerance {TOLERANCE:g}). Supported: {SUPPORTED}.")


# Each task of a run, and every backbone of a process, converts a base once.
_bases = read_cache.ReadCache()


def _encoder_weights(folder, named_values):
  """Model Garden name → numpy value of every encoder variable of `(name, value)` pairs."""
  weights = {}
  for saved_name, value in named_values:
    match = _ROOT.search(saved_name)
    if match is None:
      continue  # The exporter's `do_lower_case` flag and the like: not weights.
    name = match.group(1)
    if name.startswith(_NON_ENCODER_PREFIXES) or saved_name.startswith(_NON_ENCODER_PREFIXES):
      continue
    if name in weights:
      raise errors.UsageError(f"The SavedModel at {folder!r} has two variables named "
                              f"{name!r}; it is not one BERT encoder. Supported: {SUPPORTED}.")
    weights[name] = value
  return weights


def _architecture(folder, weights):
  """`HubBertBackbone`'s sizes, read off the variable shapes."""
  required = ("word_embeddings/embeddings", "position_embedding/embeddings",
              "type_embeddings/embeddings", "transformer/layer_0/self_attention/query/kernel",
              "transformer/layer_0/intermediate/kernel", "pooler_transform/kernel")
  missing = [name for name in required if name not in weights]
  if missing:
    raise errors.UsageError(
        f"{folder!r} is not a BERT encoder with Model Garden variable names (it lacks "
        f"{missing}; ALBERT's shared layer and text-embedding modules are not BERTs). "
        f"Supported: {SUPPORTED}.")
  layers = {int(m.group(1)) for m in map(_LAYER.match, weights) if m}
  vocabulary_size, embedding_dim = weights["word_embeddings/embeddings"].shape
  hidden_dim, num_heads, _ = weights["transformer/layer_0/self_attention/query/kernel"].shape
  return dict(
      vocabulary_size=int(vocabulary_size), num_layers=max(layers) + 1,
      num_heads=int(num_heads), hidden_dim=int(hidden_dim),
      intermediate_dim=int(weights["transformer/layer_0/intermediate/kernel"].shape[1]),
      max_sequence_length=int(weights["position_embedding/embeddings"].shape[0]),
      num_segments=int(weights["type_embeddings/embeddings"].shape[0]),
      embedding_dim=int(embedding_dim))


def _assign(folder, backbone, weights):
  targets = base_weights.model_garden_weights(backbone)
  unplaced = sorted(set(weights) - set(targets))
  unfilled = sorted(set(targets) - set(weights))
  misshapen = [name for name in set(weights) & set(targets)
               if tuple(weights[name].shape) != tuple(targets[name].shape)]
  if unplaced or unfilled or misshapen:
    raise errors.UsageError(
        f"The encoder at {folder!r} does not fit a BertBackbone (variables with no place: "
        f"{unplaced[:3]}, left without a value: {unfilled[:3]}, of another shape: "
        f"{sorted(misshapen)[:3]}). Supported: {SUPPORTED}.")
  for name, variable in targets.items():
    variable.assign(weights[name])


def _probe_inputs(architecture, batch_size=3, seq_length=12):
  """A seeded batch, keras-hub's input names: row 0 full, the others ending in padding,
  segment 1 on the second half of each row's tokens."""
  seq_length = min(seq_length, architecture["max_sequence_length"])
  rng = np.random.default_rng(0)
  ids = rng.integers(0, architecture["vocabulary_size"], size=(batch_size, seq_length))
  lengths = np.maximum(2, seq_length - np.arange(batch_size) * (seq_length // 3))
  positions = np.arange(seq_length)[np.newaxis]
  mask = (positions < lengths[:, np.newaxis]).astype("int32")
  segments = ((positions >= lengths[:, np.newaxis] // 2) & (mask > 0)).astype("int32")
  return dict(token_ids=(ids * mask).astype("int32"),
              segment_ids=np.minimum(segments, architecture["num_segments"] - 1),
              padding_mask=mask)


def hub_inputs(inputs):
  """keras-hub's backbone inputs under a TF Hub BERT encoder's names."""
  return dict(input_word_ids=inputs["token_ids"], input_mask=inputs["padding_mask"],
              input_type_ids=inputs["segment_ids"])


def _hub_outputs(folder, loaded, inputs):
  try:
    return loaded(hub_inputs(inputs), training=False)
  except Exception as error:  # pylint: disable=broad-except
    raise errors.UsageError(
        f"{folder!r} cannot be called as a TF Hub BERT encoder (a dict of input_word_ids, "
        f"input_mask, input_type_ids): {str(error).splitlines()[0][:200]}. Supported: "
        f"{SUPPORTED}.") from None


def _difference(expected, actual):
  """The largest difference of the sequence and pooled outputs, relative to their scale."""
  worst = 0.0
  for key in ("sequence_output", "pooled_output"):
    e = np.asarray(expected[key], np.float64)
    a = np.asarray(keras.ops.convert_to_numpy(actual[key]), np.float64)
    worst = max(worst, float(np.max(np.abs(e - a)) / max(1.0, float(np.max(np.abs(e))))))
  return worst

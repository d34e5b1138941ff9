"""Reads a TF Hub BERT encoder SavedModel: its weights, its architecture, and parity.

A TF Hub SavedModel is an opaque restored graph: nothing can be inserted inside it. What can be
read are its variables, whose Model Garden names (`transformer/layer_0/self_attention/query/
kernel`, ...) and shapes determine the architecture, and the layer configs Keras stored beside
them (`keras_metadata.pb`), which say what the weights cannot: the feed-forward activation
(the Model Garden's "gelu" is the tanh approximation), the LayerNorm epsilon, the attention
options. The encoder is then rebuilt in Keras and every Hub variable copied in by name; before
anything uses it, the rebuilt encoder is run beside the Hub model on a padded two-segment batch
and must give the same outputs, or the handle is refused naming what differs. What that proof
found is kept on disk (`proofs`): a later read of the same files reads only the checkpoint.
"""

import concurrent.futures
import dataclasses
import itertools
import os
import re
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import proofs
from keras_adapters.hub import read_cache
from keras_adapters.hub import saved_model_facts
from keras_adapters.networks import adapted_bert_encoder

# Variables a Hub BERT export may carry beside the encoder, for its other signatures (the
# masked-LM head of `.../bert_en_uncased_L-12_H-768_A-12/4`'s `mlm` subobject). They have no
# counterpart in an encoder and are left out on purpose, not by accident.
_NON_ENCODER_PREFIXES = ("masked_lm/", "mlm/", "cls/")

_LAYER_PATTERN = re.compile(r"^transformer/layer_(\d+)/")

# How a SavedModel's layer configs name a feed-forward activation → this library's name.
# The Model Garden registers its tanh-approximated GELU as "Text>gelu"; Keras' own "gelu"
# is exact.
_ACTIVATIONS = {
    "Text>gelu": "gelu_approximate",
    "gelu": "gelu",
    "relu": "relu",
    "keras_adapters>gelu_exact": "gelu",
    "keras_adapters>gelu_approximate": "gelu_approximate",
    "gelu_approximate": "gelu_approximate",
}
# Tried in turn, against the Hub model, when a SavedModel records no layer configs.
_CANDIDATE_ACTIVATIONS = ("gelu", "gelu_approximate", "relu")
_CANDIDATE_EPSILONS = (1e-12, 1e-6)
# Options of a Model Garden block or encoder that the rebuilt post-LayerNorm BERT block
# reproduces only at these values. (Head and output widths need no entry: the variable
# shapes carry them, and copying checks every shape.)
_BERT_LAYOUT = dict(norm_first=False, use_bias=True, output_range=None,
                    use_query_residual=True, diff_q_kv_att_layer_norm=False)
_ENCODER_CLASSES = ("Text>BertEncoder", "Text>BertEncoderV2", "keras_adapters>AdaptedBertEncoder")
_BLOCK_CLASS = "Text>TransformerEncoderBlock"

# The largest difference between the rebuilt encoder's outputs and the Hub model's, relative
# to the outputs' scale, that counts as parity. Float32 sums in another order differ by about
# 1e-6, more in deep and wide encoders; the tanh and erf GELUs differ by about 1e-3 on a real
# BERT, and far more on the probe's random weights.
PARITY_TOLERANCE = 1e-4

SUPPORTED = ("BERT-family encoders exported by the Model Garden's export_tfhub_lib "
             "(BertEncoder, BertEncoderV2; the TF Hub and Kaggle BERTs, small BERTs and "
             "experts) and those this library converts")


class HubEncoderError(ValueError):
  """A Hub handle that cannot be read as a BERT encoder; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class EncoderTokenizer:
  """The tokenizer a Hub encoder ships with (`vocab_file` or `sp_model_file` asset).

  Attributes:
    kind: `"wordpiece"` or `"sentencepiece"`.
    path: The asset's path.
    digest: SHA-256 of the asset's bytes.
    lower_case: The encoder's `do_lower_case`, or `None` where it records none.
  """
  kind: str
  path: str
  digest: str
  lower_case: Optional[bool]


@dataclasses.dataclass(frozen=True)
class HubEncoderWeights:
  """What a TF Hub BERT encoder holds.

  Attributes:
    handle: The handle or path it was read from.
    config: `AdaptedBertEncoder` arguments: the architecture from the variable shapes, the
      activation and LayerNorm epsilon from the SavedModel (proven by parity).
    weights: Model Garden variable name → numpy value.
    fingerprint: SHA-256 over names, shapes and values; identifies the base model.
    tokenizer: The `EncoderTokenizer` the encoder ships with, or `None`.
    parity: The largest difference measured between the rebuilt encoder and the Hub model.
  """
  handle: str
  config: dict
  weights: dict
  fingerprint: str
  tokenizer: Optional[EncoderTokenizer] = None
  parity: Optional[float] = None

  def without_weights(self) -> "HubEncoderWeights":
    """What the base is besides its weights: enough to check data against it and name it,
    at a few kilobytes to hold for a whole run."""
    return dataclasses.replace(self, weights={})


def read_hub_encoder(handle):
  """Loads a TF Hub BERT encoder SavedModel and returns its weights and configuration.

  Args:
    handle: A TF Hub handle (tfhub.dev or Kaggle URL, resolved by `tensorflow_hub` and its
      cache) or the path of a local SavedModel folder.

  Returns:
    A `HubEncoderWeights` whose rebuilt encoder has been checked against the Hub model: now,
    or by an earlier read of the same files with this library and TensorFlow (`proofs`), in
    which case the SavedModel is not restored, only its checkpoint read.

  Raises:
    HubEncoderError: The handle does not exist or cannot be downloaded; the SavedModel is not
      a BERT-family encoder with Model Garden variable names; or the rebuilt encoder does not
      reproduce it.
  """
  return _bases.get(os.fspath(handle), _read_outside_any_strategy)


def _read_outside_any_strategy(handle):
  if not tf.distribute.has_strategy():
    return _read_hub_encoder(handle)
  # Inside a distribution scope the SavedModel's variables would be created distributed and
  # calling it (the parity check) would run cross-worker ops. The scope holds for its own
  # thread only: read in a thread of its own, which yields plain values.
  with concurrent.futures.ThreadPoolExecutor(1) as pool:
    return pool.submit(_read_hub_encoder, handle).result()


# Its old path, for reading only: `read_cache.SMALL_BASE_BYTES` is the size up to which a
# base's read stays kept.
SMALL_BASE_BYTES = read_cache.SMALL_BASE_BYTES
_bases = read_cache.ReadCache()


def clear_cache():
  """Forgets every base read, so that the next `read_hub_encoder` reads it again."""
  _bases.clear()


def _read_hub_encoder(handle):
  folder = _local_folder(handle)
  digest = proofs.key(folder, "hub_encoder")
  remembered = _remembered_read(handle, folder, proofs.recall(digest))
  if remembered is not None:
    return remembered
  read = _proven_read(handle, folder)
  proofs.remember(digest, _record(folder, read))
  return read


def _record(folder, read):
  """What `_remembered_read` needs besides the variables' values: JSON-ready."""
  tokenizer = read.tokenizer and dict(
      kind=read.tokenizer.kind, asset=os.path.relpath(read.tokenizer.path, folder),
      lower_case=read.tokenizer.lower_case)
  return dict(config=read.config, parity=read.parity, fingerprint=read.fingerprint,
              variables=sorted(read.weights), tokenizer=tokenizer)


def _remembered_read(handle, folder, record):
  """The read a proof `record` of the SavedModel at `folder` gives, its values taken from the
  checkpoint; `None` without a record."""
  if record is None:
    return None
  names = set(record["variables"])
  weights = {}
  for name, value in proofs.checkpoint_variables(folder):
    name = adapted_bert_encoder.canonical_variable_name(name)
    if name in names:
      weights[name] = value
  tokenizer = record["tokenizer"]
  if tokenizer:
    path = os.path.join(folder, tokenizer["asset"])
    tokenizer = EncoderTokenizer(
        kind=tokenizer["kind"], path=path, lower_case=tokenizer["lower_case"],
        digest=saved_model_facts.vocabulary_digest(path, tokenizer["kind"]))
  return HubEncoderWeights(handle=handle, config=record["config"], weights=weights,
                           fingerprint=record["fingerprint"], tokenizer=tokenizer,
                           parity=record["parity"])


def _proven_read(handle, folder):
  loaded = _restore(handle, folder)
  layer_configs = saved_model_facts.layer_configs(folder)
  _refuse_other_models(handle, loaded, layer_configs)
  weights = _encoder_weights(handle, loaded)
  architecture = _infer_config(handle, weights)
  inputs = probe_inputs(architecture)
  expected = _hub_outputs(handle, loaded, inputs)
  tokenizer = _tokenizer(loaded)
  # The Hub model's variables are not needed past here: freed before the probe's encoder is
  # built, so that reading a base holds two copies of it at most, not three.
  del loaded
  config, parity = _prove_parity(handle, inputs, expected, architecture, weights,
                                 _recorded_facts(handle, layer_configs))
  return HubEncoderWeights(
      handle=handle,
      config=config,
      weights=weights,
      fingerprint=fingerprint(weights),
      tokenizer=tokenizer,
      parity=parity)


def _encoder_weights(handle, loaded):
  """Model Garden variable name → numpy value of every encoder variable of `loaded`."""
  lower_case = getattr(loaded, "do_lower_case", None)
  weights = {}
  for variable in saved_model_facts.variables(loaded):
    if variable is lower_case:
      continue
    name = adapted_bert_encoder.canonical_variable_name(variable.name)
    if name.startswith(_NON_ENCODER_PREFIXES):
      continue
    if name in weights:
      raise HubEncoderError(f"The SavedModel at {handle!r} has two variables named {name!r}.")
    weights[name] = variable.numpy()
  return weights


# SHA-256 of a name → array mapping: the base's fingerprint, defined with the artifact format.
fingerprint = adapter_artifact.weights_fingerprint


def _local_folder(handle):
  """The SavedModel folder of `handle`: itself, or a URL's folder in the TF Hub cache."""
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
    # A URL resolves to its folder in the TF Hub cache (TFHUB_CACHE_DIR): the same code path
    # as a local folder from there on.
    return hub.resolve(handle)
  except Exception as error:  # pylint: disable=broad-except
    raise HubEncoderError(
        f"Cannot load TF Hub encoder {handle!r}. It could not be downloaded: without network "
        "access, download it elsewhere and pass the local folder, or set TFHUB_CACHE_DIR to a "
        f"cache that holds it. ({error})") from None


def _restore(handle, folder):
  """The restored SavedModel."""
  try:
    return hub.load(folder)
  except Exception as error:  # pylint: disable=broad-except
    raise HubEncoderError(f"Cannot load TF Hub encoder {handle!r}. The SavedModel could not be "
                          f"loaded. ({error})") from None


def _refuse_other_models(handle, loaded, layer_configs):
  """Names the kind of model a handle holds when it is plainly not a BERT encoder."""
  if hasattr(loaded, "tokenize") and hasattr(loaded, "bert_pack_inputs"):
    raise HubEncoderError(
        f"{handle!r} is a BERT preprocessing model (it has tokenize and bert_pack_inputs), "
        "not an encoder: pass it as the preprocessing handle (preprocess_handle) and the "
        "encoder as the Hub handle.")
  if "Text>AlbertEncoder" in {name for name, _ in layer_configs}:
    raise HubEncoderError(
        f"{handle!r} is an ALBERT encoder: one Transformer layer shared across depth, which "
        f"adapters per layer cannot be put into. Supported: {SUPPORTED}.")


def _infer_config(handle, weights):
  """Reads the encoder architecture off the variable shapes."""
  required = ("word_embeddings/embeddings", "position_embedding/embeddings",
              "type_embeddings/embeddings", "transformer/layer_0/self_attention/query/kernel",
              "transformer/layer_0/intermediate/kernel")
  missing = [name for name in required if name not in weights]
  if missing:
    shared = any(name.startswith("transformer/self_attention/") for name in weights)
    found = ("it has one Transformer layer shared across depth (ALBERT's layout)" if shared
             else f"its variables start {sorted(weights)[:5]}" if weights
             else "it has no variables")
    raise HubEncoderError(
        f"{handle!r} is not a BERT encoder with Model Garden variable names: it lacks "
        f"{missing}; {found}. Supported: {SUPPORTED}. Pass such an encoder, not a "
        "text-embedding module or a preprocessing model; a TF1 BERT checkpoint converts with "
        "the Model Garden's tf2_bert_encoder_checkpoint_converter and export_tfhub.")
  layer_ids = {int(m.group(1)) for m in map(_LAYER_PATTERN.match, weights) if m}
  num_layers = max(layer_ids) + 1
  if layer_ids != set(range(num_layers)):
    raise HubEncoderError(
        f"{handle!r} has Transformer layers {sorted(layer_ids)}: they should be numbered "
        f"0..{num_layers - 1} without gaps.")
  vocab_size, embedding_width = weights["word_embeddings/embeddings"].shape
  hidden_size, num_heads, _ = weights["transformer/layer_0/self_attention/query/kernel"].shape
  return dict(
      vocab_size=int(vocab_size),
      hidden_size=int(hidden_size),
      num_layers=num_layers,
      num_attention_heads=int(num_heads),
      intermediate_size=int(weights["transformer/layer_0/intermediate/kernel"].shape[1]),
      max_sequence_length=int(weights["position_embedding/embeddings"].shape[0]),
      type_vocab_size=int(weights["type_embeddings/embeddings"].shape[0]),
      embedding_width=int(embedding_width))


def _recorded_facts(handle, layer_configs):
  """The activation and LayerNorm epsilon that `layer_configs` (the SavedModel's) record, or
  `None` where it records none.

  Raises:
    HubEncoderError: The configs record an activation or an attention layout the rebuilt
      BERT block does not have.
  """
  activations, epsilons, departures = set(), set(), {}
  for class_name, config in layer_configs:
    if class_name in (_BLOCK_CLASS,) + _ENCODER_CLASSES:
      for key, expected in _BERT_LAYOUT.items():
        if key in config and config[key] != expected:
          departures[key] = config[key]
    if class_name == _BLOCK_CLASS:
      activations.add(_activation_name(config.get("inner_activation")))
      epsilons.add(config.get("norm_epsilon"))
    elif class_name == "keras_adapters>AdaptedBertEncoder":
      activations.add(_activation_name(config.get("activation")))
      epsilons.add(config.get("layer_norm_epsilon"))
    elif class_name == "LayerNormalization":
      epsilons.add(config.get("epsilon"))
  if departures:
    raise HubEncoderError(
        f"{handle!r} is a Transformer encoder with options a BERT block does not have: "
        f"{departures} (BERT has {({k: _BERT_LAYOUT[k] for k in departures})}). Supported: "
        f"{SUPPORTED}.")
  epsilons.discard(None)
  if not activations:
    return None
  unknown = sorted(str(a) for a in activations if not isinstance(a, str) or a.startswith("?"))
  if unknown or len(activations) > 1 or len(epsilons) > 1:
    raise HubEncoderError(
        f"{handle!r} records feed-forward activations {sorted(map(str, activations))} and "
        f"LayerNorm epsilons {sorted(epsilons)}; the rebuilt encoder needs one of "
        f"{sorted(set(_ACTIVATIONS.values()))} and one epsilon for every layer.")
  return dict(activation=activations.pop(), layer_norm_epsilon=epsilons.pop() if epsilons
              else 1e-12)


def _activation_name(serialized):
  """This library's name of a serialised Keras activation; unknown ones start with "?"."""
  if isinstance(serialized, dict):  # Keras' newer format: {"config": "gelu", ...}.
    serialized = serialized.get("config")
  return _ACTIVATIONS.get(serialized, f"?{serialized}")


def _prove_parity(handle, inputs, expected, architecture, weights, facts):
  """Rebuilds the encoder and compares it with the Hub model's outputs on the probe batch.

  With recorded facts, they are the one candidate; without, each known activation and
  epsilon is tried and the one with parity kept.

  Returns:
    (config, difference): the `AdaptedBertEncoder` arguments and the largest relative
    difference measured.

  Raises:
    HubEncoderError: No candidate reproduces the Hub model; names what differs.
  """
  candidates = ([facts] if facts else
                [dict(activation=a, layer_norm_epsilon=e) for a, e in
                 itertools.product(_CANDIDATE_ACTIVATIONS, _CANDIDATE_EPSILONS)])
  measured = []
  for candidate in candidates:
    config = {**architecture, **candidate}
    with tf.variable_creator_scope(_from_zeros):
      # In float32 whatever the global policy: the Hub model computes in float32, and a mixed
      # precision encoder differs from it by far more than the tolerance.
      encoder = adapted_bert_encoder.AdaptedBertEncoder(**config, dtype="float32",
                                                        name="bert_encoder")
      copy_weights(encoder, HubEncoderWeights(handle, config, weights, fingerprint=""))
    output, difference = max_difference(expected, encoder(inputs, training=False))
    if difference <= PARITY_TOLERANCE:
      return config, difference
    measured.append(f"{candidate}: {output} differs by {difference:.2g}")
  source = ("with the activation and epsilon its layer configs record" if facts else
            "with any known activation and epsilon (it records no layer configs)")
  raise HubEncoderError(
      f"The encoder rebuilt from {handle!r} {source} does not reproduce the Hub model "
      f"(tolerance {PARITY_TOLERANCE:g}, relative): {'; '.join(measured)}. Refusing it "
      f"rather than serving a near-miss. Supported: {SUPPORTED}.")


def _from_zeros(next_creator, **kwargs):
  """A variable creator that starts every variable at zeros rather than its initializer.

  The probe's encoder gets the Hub weights at once; drawing its random initial values would
  advance the seed generator (`keras.utils.set_random_seed`), so a model built after reading
  a base would start from other weights than one built with the base already read.
  """
  if kwargs.get("shape") is not None and kwargs.get("dtype") is not None:
    kwargs["initial_value"] = tf.zeros(kwargs["shape"], kwargs["dtype"])
  return next_creator(**kwargs)


def probe_inputs(config, batch_size=2, seq_length=8):
  """A seeded padded batch with two segments that fits `config`'s vocabulary and positions.

  Row 0 fills every position; the others end in padding. Segment 0 covers the first half of
  the real tokens, segment 1 the rest.
  """
  seq_length = min(seq_length, config["max_sequence_length"])
  rng = np.random.default_rng(0)
  ids = rng.integers(0, config["vocab_size"], size=(batch_size, seq_length))
  lengths = np.maximum(2, seq_length - np.arange(batch_size) * max(1, seq_length // 3))
  positions = np.arange(seq_length)[np.newaxis]
  mask = (positions < lengths[:, np.newaxis]).astype(np.int32)
  types = ((positions >= lengths[:, np.newaxis] // 2) & (mask > 0)).astype(np.int32)
  types = np.minimum(types, config["type_vocab_size"] - 1)
  return dict(input_word_ids=tf.constant(ids * mask, tf.int32),
              input_mask=tf.constant(mask), input_type_ids=tf.constant(types))


def _hub_outputs(handle, loaded, inputs):
  try:
    return loaded(inputs, training=False)
  except Exception as error:  # pylint: disable=broad-except
    raise HubEncoderError(
        f"{handle!r} cannot be called as a TF Hub BERT encoder (a dict of input_word_ids, "
        f"input_mask, input_type_ids): {str(error).splitlines()[0][:300]}. Supported: "
        f"{SUPPORTED}.") from None


def max_difference(expected, actual):
  """(output name, largest difference relative to the outputs' scale) between two TF Hub
  BERT output dicts, over `sequence_output`, `pooled_output` and every `encoder_outputs`
  entry."""
  pairs = [("sequence_output", expected["sequence_output"], actual["sequence_output"]),
           ("pooled_output", expected["pooled_output"], actual["pooled_output"])]
  pairs += [(f"encoder_outputs[{i}]", e, a) for i, (e, a) in
            enumerate(zip(expected["encoder_outputs"], actual["encoder_outputs"]))]
  worst = ("", 0.0)
  for name, e, a in pairs:
    e, a = np.asarray(e, np.float64), np.asarray(a, np.float64)
    difference = float(np.max(np.abs(e - a)) / max(1.0, float(np.max(np.abs(e)))))
    worst = max(worst, (name, difference), key=lambda pair: pair[1])
  return worst


def _tokenizer(loaded):
  """The `EncoderTokenizer` of a Hub encoder's `vocab_file` or `sp_model_file`, or `None`."""
  for attribute, kind in (("vocab_file", "wordpiece"), ("sp_model_file", "sentencepiece")):
    asset = getattr(loaded, attribute, None)
    if isinstance(asset, tf.saved_model.Asset):
      path = asset.asset_path.numpy().decode()
      lower_case = getattr(loaded, "do_lower_case", None)
      return EncoderTokenizer(
          kind=kind, path=path, digest=saved_model_facts.vocabulary_digest(path, kind),
          lower_case=None if lower_case is None else bool(lower_case.numpy()))
  return None


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

"""Converts a Hugging Face-layout BERT folder into a TF Hub encoder SavedModel.

The weights are renamed to the Model Garden's names and laid out as its kernels, then the
Model Garden's own TF Hub exporter writes the SavedModel (`model_garden_export`), with the
vocab and lower-casing of the folder's tokenizer: the result is what `export_tfhub.py` would
have made of the same BERT.
"""

import json
import os
import re

import numpy as np
from safetensors import numpy as safetensors_numpy
import tf_keras as keras

from official.legacy.bert import configs

from keras_adapters.hub import model_garden_export

_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approximate",
                "gelu_pytorch_tanh": "gelu_approximate", "relu": "relu"}

# Hugging Face name (after an optional "bert." prefix) → Model Garden name and kernel layout.
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings.weight": "word_embeddings/embeddings",
    "embeddings.position_embeddings.weight": "position_embedding/embeddings",
    "embeddings.token_type_embeddings.weight": "type_embeddings/embeddings",
    "embeddings.LayerNorm.weight": "embeddings/layer_norm/gamma",
    "embeddings.LayerNorm.bias": "embeddings/layer_norm/beta",
    "pooler.dense.weight": "pooler_transform/kernel",
    "pooler.dense.bias": "pooler_transform/bias",
}
_LAYER_NAMES = {
    "attention.self.query": "self_attention/query",
    "attention.self.key": "self_attention/key",
    "attention.self.value": "self_attention/value",
    "attention.output.dense": "self_attention/attention_output",
    "attention.output.LayerNorm": "self_attention_layer_norm",
    "intermediate.dense": "intermediate",
    "output.dense": "output",
    "output.LayerNorm": "output_layer_norm",
}
_LAYER_PATTERN = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")
# Buffers, not weights.
_IGNORED = ("embeddings.position_ids",)


def read_huggingface_bert(model_dir):
  """Reads `config.json` and `model.safetensors` of a Hugging Face BERT.

  Args:
    model_dir: Folder with `config.json` and `model.safetensors` (as `BertModel` saves them).

  Returns:
    (encoder_config, weights): `AdaptedBertEncoder` arguments and Model Garden name → array.
  """
  model_dir = os.fspath(model_dir)
  for filename in ("config.json", "model.safetensors"):
    if not os.path.isfile(os.path.join(model_dir, filename)):
      raise FileNotFoundError(
          f"{model_dir!r} has no {filename}: a Hugging Face BERT folder needs config.json and "
          "model.safetensors (save it with `save_pretrained(..., safe_serialization=True)`).")
  with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
    hf_config = json.load(f)
  config = _encoder_config(model_dir, hf_config)
  tensors = safetensors_numpy.load_file(os.path.join(model_dir, "model.safetensors"))
  weights = {}
  for hf_name, value in tensors.items():
    name = hf_name.removeprefix("bert.")
    if name in _IGNORED:
      continue
    weights[_model_garden_name(model_dir, name)] = _to_keras_layout(name, value, config)
  return config, weights


def convert_huggingface_bert(model_dir, export_dir):
  """Writes a TF Hub BERT encoder SavedModel from a Hugging Face BERT folder.

  Args:
    model_dir: Hugging Face folder with `config.json`, `model.safetensors` and `vocab.txt`
      (`tokenizer_config.json`'s `do_lower_case` says the casing; uncased without it).
    export_dir: Folder for the SavedModel, written atomically.

  Returns:
    `export_dir`.
  """
  model_dir = os.fspath(model_dir)
  config, weights = read_huggingface_bert(model_dir)
  vocab_file = os.path.join(model_dir, "vocab.txt")
  if not os.path.isfile(vocab_file):
    raise FileNotFoundError(
        f"{model_dir!r} has no vocab.txt: a TF Hub encoder carries its wordpiece vocab. "
        "Save the tokenizer beside the model (`tokenizer.save_pretrained(model_dir)`).")
  if config["layer_norm_epsilon"] != 1e-12:
    raise ValueError(
        f"{model_dir!r} uses layer_norm_eps={config['layer_norm_epsilon']}; the Model "
        "Garden's BERT encoder, and so a TF Hub BERT, has 1e-12.")
  bert_config = configs.BertConfig(
      vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
      num_hidden_layers=config["num_layers"],
      num_attention_heads=config["num_attention_heads"],
      intermediate_size=config["intermediate_size"],
      max_position_embeddings=config["max_sequence_length"],
      type_vocab_size=config["type_vocab_size"],
      hidden_act=_MODEL_GARDEN_ACTIVATIONS[config["activation"]])
  return model_garden_export.export_encoder(
      export_dir, bert_config=bert_config, weights=weights, vocab_file=vocab_file,
      do_lower_case=_lower_case(model_dir))


# This library's activation names → the Model Garden's `hidden_act`, where the string "gelu"
# is the tanh approximation; Keras' function is the exact GELU.
_MODEL_GARDEN_ACTIVATIONS = {"gelu": keras.activations.gelu, "gelu_approximate": "gelu",
                             "relu": "relu"}


def _lower_case(model_dir):
  path = os.path.join(model_dir, "tokenizer_config.json")
  if not os.path.isfile(path):
    return True
  with open(path, encoding="utf-8") as f:
    return bool(json.load(f).get("do_lower_case", True))


def _encoder_config(model_dir, hf_config):
  if hf_config.get("model_type") != "bert":
    raise ValueError(
        f"{model_dir!r} holds a {hf_config.get('model_type')!r} model; only BERT "
        "(model_type 'bert') converts to a TF Hub BERT encoder.")
  activation = hf_config.get("hidden_act", "gelu")
  if activation not in _ACTIVATIONS:
    raise ValueError(
        f"{model_dir!r} uses hidden_act={activation!r}; supported: {sorted(_ACTIVATIONS)}.")
  return dict(
      vocab_size=hf_config["vocab_size"],
      hidden_size=hf_config["hidden_size"],
      num_layers=hf_config["num_hidden_layers"],
      num_attention_heads=hf_config["num_attention_heads"],
      intermediate_size=hf_config["intermediate_size"],
      max_sequence_length=hf_config["max_position_embeddings"],
      type_vocab_size=hf_config["type_vocab_size"],
      activation=_ACTIVATIONS[activation],
      layer_norm_epsilon=hf_config.get("layer_norm_eps", 1e-12))


def _model_garden_name(model_dir, name):
  if name in _EMBEDDING_NAMES:
    return _EMBEDDING_NAMES[name]
  match = _LAYER_PATTERN.match(name)
  if match and match.group(2) in _LAYER_NAMES:
    layer, part, kind = match.groups()
    leaf = {"weight": "gamma" if "LayerNorm" in part else "kernel",
            "bias": "beta" if "LayerNorm" in part else "bias"}[kind]
    return f"transformer/layer_{layer}/{_LAYER_NAMES[part]}/{leaf}"
  raise ValueError(
      f"{model_dir!r} has a tensor {name!r} that a BERT encoder does not have; the folder is "
      "not a plain BertModel checkpoint (task heads are not converted).")


def _to_keras_layout(name, value, config):
  """torch Linear weights are (out, in): Keras kernels are the transpose, split per head."""
  hidden = config["hidden_size"]
  heads = config["num_attention_heads"]
  per_head = (heads, hidden // heads)
  is_query_key_value = re.search(r"attention\.self\.(query|key|value)\.", name)
  if value.ndim == 2 and not name.startswith("embeddings."):
    kernel = np.ascontiguousarray(value.T)
    if is_query_key_value:
      return kernel.reshape((hidden,) + per_head)
    if "attention.output.dense" in name:
      return kernel.reshape(per_head + (hidden,))
    return kernel
  return value.reshape(per_head) if is_query_key_value else value

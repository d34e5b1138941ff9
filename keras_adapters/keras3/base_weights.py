"""A keras-hub BERT backbone's base weights by their Model Garden names, and its fingerprint.

The library identifies a base by the SHA-256 of its weights under their Model Garden names
(`word_embeddings/embeddings`, `transformer/layer_0/self_attention/query/kernel`, ...), the
names and shapes a TF Hub BERT encoder holds. keras-hub's `BertBackbone` holds the same
tensors in the same shapes, so the same base has the same fingerprint on both stacks and an
artifact's base check holds across them.
"""

import keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import layers

# A block's weights: Model Garden name inside `transformer/layer_<i>/` → the attribute path
# of the layer in a keras-hub `TransformerEncoder`.
_BLOCK_LAYERS = {
    "self_attention/query": ("_self_attention_layer", "_query_dense"),
    "self_attention/key": ("_self_attention_layer", "_key_dense"),
    "self_attention/value": ("_self_attention_layer", "_value_dense"),
    "self_attention/attention_output": ("_self_attention_layer", "_output_dense"),
    "self_attention_layer_norm": ("_self_attention_layer_norm",),
    "intermediate": ("_feedforward_intermediate_dense",),
    "output": ("_feedforward_output_dense",),
    "output_layer_norm": ("_feedforward_layer_norm",),
}


def model_garden_weights(backbone):
  """The base variables of a keras-hub `BertBackbone`, by Model Garden name.

  A projection that `adapt` wrapped gives its own frozen kernel and bias; the LayerNorms
  give their current values (which a config with `train_layer_norms` trains).
  """
  # RoBERTa and DistilBERT hold their token and position embeddings in one layer, and have
  # no segments and no pooler; ELECTRA (and a narrow `HubBertBackbone`) project embeddings.
  embeddings = getattr(backbone, "embeddings", backbone)
  named = {
      "word_embeddings/embeddings": embeddings.token_embedding.embeddings,
      "position_embedding/embeddings": embeddings.position_embedding.position_embeddings,
  }
  if hasattr(backbone, "segment_embedding"):
    named["type_embeddings/embeddings"] = backbone.segment_embedding.embeddings
  for name, attribute in (("pooler_transform", backbones.POOLER_ATTRIBUTE),
                          ("embedding_projection", "embeddings_projection")):
    if getattr(backbone, attribute, None) is not None:
      named.update(_parts(name, getattr(backbone, attribute)))
  named.update(_parts("embeddings/layer_norm", backbone.embeddings_layer_norm))
  for index, block in enumerate(backbone.transformer_layers):
    for name, path in _BLOCK_LAYERS.items():
      layer = block
      for attribute in path:
        layer = getattr(layer, attribute)
      named.update(_parts(f"transformer/layer_{index}/{name}", layer))
  return named


def base_projection(layer):
  """The base's own layer under the wrappers `adapt` put around a projection."""
  while isinstance(layer, (layers.AdaptedProjection, layers.SublayerInputTap)):
    layer = layer.projection
  return layer


def _parts(prefix, layer):
  layer = base_projection(layer)
  if isinstance(layer, layers.AdaptedLayerNorm):
    layer = layer.layer_norm
  if hasattr(layer, "gamma"):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}
  return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def fingerprint(backbone):
  """The library's fingerprint of the backbone's base weights (`weights_fingerprint`)."""
  return adapter_artifact.weights_fingerprint(
      {name: keras.ops.convert_to_numpy(variable)
       for name, variable in model_garden_weights(backbone).items()})


# The feed-forward activations' function names → the library's names, as the Keras 2 path
# records them: Keras' `gelu` (exact unless told otherwise) and keras-hub's
# `gelu_approximate` (tanh).
_ACTIVATION_NAMES = {"gelu_approximate": "gelu_approximate", "gelu": "gelu", "relu": "relu"}


def activation_name(backbone):
  """The name of the feed-forward activation of the backbone's blocks, as artifacts record
  it, or the function's own name for one the Keras 2 path does not know."""
  block = backbone.transformer_layers[0]
  dense = base_projection(block._feedforward_intermediate_dense)  # pylint: disable=protected-access
  name = getattr(dense.activation, "__name__", str(dense.activation))
  return _ACTIVATION_NAMES.get(name, name)

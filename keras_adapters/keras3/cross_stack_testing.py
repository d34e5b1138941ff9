"""keras-hub backbones holding a TF Hub encoder's weights, for tests that compare the Keras 3
path with the Keras 2 path on one base (it reads the encoder with the Keras 2 path's
reader)."""

import keras
import keras_hub
from keras_hub.src.utils.keras_utils import gelu_approximate

from keras_adapters.hub import hub_encoder
from keras_adapters.keras3 import base_weights


def backbone_of_hub_encoder(handle, activation=None):
  """A `BertBackbone` with the weights of the TF Hub encoder at `handle` and its
  feed-forward activation (or `activation`), without dropout."""
  hub_weights = hub_encoder.read_hub_encoder(handle)
  config = hub_weights.config
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=config["vocab_size"], num_layers=config["num_layers"],
      num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
      intermediate_dim=config["intermediate_size"],
      max_sequence_length=config["max_sequence_length"],
      num_segments=config["type_vocab_size"], dropout=0.0)
  for name, variable in base_weights.model_garden_weights(backbone).items():
    variable.assign(hub_weights.weights[name])
  activation = activation or config["activation"]
  function = (gelu_approximate if activation == "gelu_approximate"
              else keras.activations.get(activation))
  for block in backbone.transformer_layers:
    block._feedforward_intermediate_dense.activation = function  # pylint: disable=protected-access
  return backbone

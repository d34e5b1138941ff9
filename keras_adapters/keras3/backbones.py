"""The keras-hub backbones of the Keras 3 face: those `adapt` changes, and `HubBertBackbone`,
the `BertBackbone` that `from_tf_hub` fills with a TF Hub BERT's weights.

keras-hub builds BERT, RoBERTa, XLM-RoBERTa, DistilBERT and ELECTRA from one block,
`keras_hub.layers.TransformerEncoder` (post-LayerNorm), listed in `transformer_layers`, with
an `embeddings_layer_norm`: the attributes `adapt` changes are the same in each.
"""

import keras
import keras_hub

from keras_adapters.utils import errors

# The backbones `adapt` changes, with the keras-hub class each is (subclasses included).
ADAPTABLE = {
    "BertBackbone": keras_hub.models.BertBackbone,
    "RobertaBackbone": keras_hub.models.RobertaBackbone,
    "XLMRobertaBackbone": keras_hub.models.XLMRobertaBackbone,
    "DistilBertBackbone": keras_hub.models.DistilBertBackbone,
    "ElectraBackbone": keras_hub.models.ElectraBackbone,
}


# Where each projection of a keras-hub `TransformerEncoder` is: the attribute holding it, on
# the block's self-attention layer (a `MultiHeadAttention`) or on the block itself.
PROJECTION_ATTRIBUTES = {
    "query": ("_self_attention_layer", "_query_dense"),
    "key": ("_self_attention_layer", "_key_dense"),
    "value": ("_self_attention_layer", "_value_dense"),
    "attention_output": ("_self_attention_layer", "_output_dense"),
    "intermediate": (None, "_feedforward_intermediate_dense"),
    "output": (None, "_feedforward_output_dense"),
}
# The attribute of keras-hub's `BertBackbone` holding BERT's pooler projection (before its
# tanh), a layer of the backbone's functional graph; RoBERTa and DistilBERT have none.
POOLER_ATTRIBUTE = "pooled_dense"
# The dropout on each sub-layer's output, whose output is what the block adds to the residual
# and normalises: where a bottleneck adapter goes (Houlsby's placement).
ADAPTER_ATTRIBUTES = {"mh_adapter": "_self_attention_dropout",
                      "output_adapter": "_feedforward_dropout"}
# The projection of each sub-layer that reads the sub-layer's input `x` first (the block is
# post-LayerNorm, so `x` is the residual): where a parallel adapter takes `x` (`is_parallel`).
SUBLAYER_INPUT_PROJECTIONS = {"mh_adapter": "query", "output_adapter": "intermediate"}
# The LayerNorm after each sub-layer's residual add: where an adapter goes when the base's
# add and LayerNorm come before it too (`original_ln_before`, Pfeiffer's placement).
LAYER_NORM_ATTRIBUTES = {"mh_adapter": "_self_attention_layer_norm",
                         "output_adapter": "_feedforward_layer_norm"}


def check_adaptable(backbone):
  """Raises a one-line `UsageError` unless `backbone` is one of `ADAPTABLE`, built from
  post-LayerNorm `TransformerEncoder` blocks."""
  supported = ", ".join(ADAPTABLE)
  if not isinstance(backbone, tuple(ADAPTABLE.values())):
    raise errors.UsageError(
        f"keras_adapters.keras3 cannot adapt a {type(backbone).__name__}: it supports "
        f"keras-hub's {supported} (the encoders built from keras_hub.layers."
        "TransformerEncoder blocks).")
  if any(block.normalize_first for block in backbone.transformer_layers):
    raise errors.UsageError(
        f"This {type(backbone).__name__} has pre-LayerNorm blocks (normalize_first=True); "
        "keras_adapters.keras3 places adapters in post-LayerNorm blocks, as BERT has: build "
        "it with normalize_first=False.")


def gelu_approximate(x):
  """The tanh approximation of GELU, the Model Garden's "gelu" (and keras-hub BERT's)."""
  return keras.activations.gelu(x, approximate=True)


# A feed-forward activation by the name `HubBertBackbone` records.
ACTIVATIONS = {"gelu": keras.activations.gelu, "gelu_approximate": gelu_approximate,
               "relu": keras.activations.relu}


@keras.saving.register_keras_serializable(package="keras_adapters")
class HubBertBackbone(keras_hub.models.BertBackbone):
  """keras-hub's `BertBackbone` with the options a TF Hub BERT may have that keras-hub's
  hard-codes: the feed-forward activation (keras-hub's is the tanh-approximate GELU, Hugging
  Face BERTs use the exact one), the LayerNorm epsilon, and embeddings narrower than the
  blocks with a projection (the Model Garden's `embedding_width`, as ELECTRA has).

  Its layers, their names, inputs and outputs are `BertBackbone`'s, so keras-hub's BERT
  tasks and `adapt` take it as they take a `BertBackbone`.

  Example:
  ```python
  backbone = HubBertBackbone(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, activation="gelu", embedding_dim=8)
  ```

  Args:
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, dropout,
      max_sequence_length, num_segments, dtype: As `keras_hub.models.BertBackbone`'s.
    activation: The feed-forward activation, a name of `ACTIVATIONS`.
    layer_norm_epsilon: Epsilon of every LayerNorm.
    embedding_dim: Width of the embeddings; `None`: `hidden_dim`. When narrower, a Dense
      `embeddings_projection` takes them to `hidden_dim` after their LayerNorm.
    **kwargs: Standard `keras.Model` arguments such as `name`.
  """

  # pylint: disable=super-init-not-called,non-parent-init-called
  def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
               dropout=0.1, max_sequence_length=512, num_segments=2,
               activation="gelu_approximate", layer_norm_epsilon=1e-12, embedding_dim=None,
               dtype=None, **kwargs):
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}.")
    embedding_dim = embedding_dim or hidden_dim
    initializer = lambda: keras.initializers.TruncatedNormal(stddev=0.02)
    self.token_embedding = keras_hub.layers.ReversibleEmbedding(
        vocabulary_size, embedding_dim, embeddings_initializer=initializer(), dtype=dtype,
        name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        max_sequence_length, initializer=initializer(), dtype=dtype, name="position_embedding")
    self.segment_embedding = keras.layers.Embedding(
        num_segments, embedding_dim, embeddings_initializer=initializer(), dtype=dtype,
        name="segment_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
    self.embeddings_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm")
    self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=dtype,
                                                   name="embeddings_dropout")
    self.embeddings_projection = None
    if embedding_dim != hidden_dim:
      self.embeddings_projection = keras.layers.Dense(
          hidden_dim, kernel_initializer=initializer(), dtype=dtype,
          name="embeddings_projection")
    self.transformer_layers = [
        keras_hub.layers.TransformerEncoder(
            num_heads=num_heads, intermediate_dim=intermediate_dim,
            activation=ACTIVATIONS[activation], dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon, kernel_initializer=initializer(),
            dtype=dtype, name=f"transformer_layer_{i}")
        for i in range(num_layers)]
    self.pooled_dense = keras.layers.Dense(
        hidden_dim, kernel_initializer=initializer(), activation="tanh", dtype=dtype,
        name="pooled_dense")

    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    tokens = self.token_embedding(inputs["token_ids"])
    x = self.embeddings_add((tokens, self.position_embedding(tokens),
                             self.segment_embedding(inputs["segment_ids"])))
    x = self.embeddings_dropout(self.embeddings_layer_norm(x))
    if self.embeddings_projection is not None:
      x = self.embeddings_projection(x)
    for block in self.transformer_layers:
      x = block(x, padding_mask=inputs["padding_mask"])
    # `BertBackbone` builds the same graph, so its own `__init__` is skipped for the
    # functional model's.
    keras_hub.models.Backbone.__init__(
        self, inputs=inputs,
        outputs={"sequence_output": x, "pooled_output": self.pooled_dense(x[:, 0, :])},
        dtype=dtype, **kwargs)
    self.vocabulary_size = vocabulary_size
    self.num_layers = num_layers
    self.num_heads = num_heads
    self.hidden_dim = hidden_dim
    self.intermediate_dim = intermediate_dim
    self.dropout = dropout
    self.max_sequence_length = max_sequence_length
    self.num_segments = num_segments
    self.cls_token_index = 0
    self.activation = activation
    self.layer_norm_epsilon = layer_norm_epsilon
    self.embedding_dim = embedding_dim

  def get_config(self):
    return {**super().get_config(), "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon, "embedding_dim": self.embedding_dim}

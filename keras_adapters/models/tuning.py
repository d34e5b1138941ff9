"""Which parts of a BERT encoder train: the paper's transfer strategies, chosen by name."""

TUNING_POLICIES = ("adapters", "layer_norm", "top_k", "full")


def validate_tuning(tuning, top_k, num_layers, has_adapters):
  """Raises a clear error when a tuning choice cannot apply to the encoder.

  Args:
    tuning: One of `TUNING_POLICIES`.
    top_k: Number of top layers to train, for `"top_k"` only.
    num_layers: Transformer blocks in the encoder.
    has_adapters: Whether the encoder was built with adapters.
  """
  if tuning not in TUNING_POLICIES:
    raise ValueError(
        f"Unknown tuning policy {tuning!r}; choose one of {list(TUNING_POLICIES)}: 'adapters' "
        "(adapters + LayerNorms, the paper), 'layer_norm', 'top_k' (top k layers) or 'full'.")
  if tuning == "adapters" and not has_adapters:
    raise ValueError("tuning='adapters' needs adapters: pass adapter_size (e.g. 64).")
  if tuning == "top_k":
    if not isinstance(top_k, int) or not 1 <= top_k <= num_layers:
      raise ValueError(
          f"tuning='top_k' trains the top k of the {num_layers} layers: top_k must be an "
          f"integer in [1, {num_layers}], got {top_k!r}.")
  elif top_k is not None:
    raise ValueError(f"top_k is only used with tuning='top_k', not tuning={tuning!r}.")


def apply_tuning(encoder, tuning, top_k=None):
  """Sets the `trainable` flag of every sub-layer of `encoder` for a tuning policy.

  - `adapters`: adapters and every LayerNorm (the embedding one included) train; Houlsby et
    al.'s adapter tuning. The task head, outside the encoder, trains too.
  - `layer_norm`: only the LayerNorms train.
  - `top_k`: the top `top_k` Transformer blocks and the pooler train (variable fine-tuning).
  - `full`: everything trains.

  Args:
    encoder: An `AdaptedBertEncoder`.
    tuning: One of `TUNING_POLICIES`.
    top_k: Number of top blocks for `"top_k"`.
  """
  validate_tuning(tuning, top_k, encoder.num_layers, bool(encoder.adapters))
  first_trained_block = encoder.num_layers - top_k if tuning == "top_k" else None
  for layer in (encoder.word_embeddings, encoder.position_embedding, encoder.type_embeddings,
                encoder.pooler_transform):
    layer.trainable = tuning == "full" or (tuning == "top_k" and layer is encoder.pooler_transform)
  encoder.embedding_layer_norm.trainable = tuning in ("adapters", "layer_norm", "full")
  for index, block in enumerate(encoder.transformer_layers):
    block_trains = tuning == "full" or (tuning == "top_k" and index >= first_trained_block)
    for layer in (block.self_attention, block.intermediate, block.output_dense):
      layer.trainable = block_trains
    for layer in (block.self_attention_layer_norm, block.output_layer_norm):
      layer.trainable = block_trains or tuning in ("adapters", "layer_norm")
    for adapter in block.adapters:
      adapter.trainable = block_trains or tuning == "adapters"

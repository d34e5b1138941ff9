"""Which parts of a BERT encoder train: the paper's transfer strategies, chosen by name."""

from keras_adapters.methods.adapters import tuning as _policies

# The policies are defined with the adapters' config, which names one; applied here.
TUNING_POLICIES = _policies.TUNING_POLICIES
BASE_FROZEN_POLICIES = _policies.BASE_FROZEN_POLICIES
validate_tuning = _policies.validate_tuning


def apply_tuning(encoder, tuning, top_k=None, adapter_set=None, train_layer_norms=True,
                 layer_norms_frozen_below=0):
  """Sets the `trainable` flag of every sub-layer of `encoder` for a tuning policy.

  - `adapters`: adapters (and a method's layers: LoRA, (IA)³) and every LayerNorm (the
    embedding one included; with `layer_norms_frozen_below`, those from that block up)
    train; Houlsby et al.'s adapter tuning. The task head, outside the encoder, trains too.
  - `layer_norm`: only the LayerNorms train.
  - `top_k`: the top `top_k` Transformer blocks and the pooler train (variable fine-tuning).
  - `full`: everything trains.

  Args:
    encoder: An `AdaptedBertEncoder`.
    tuning: One of `TUNING_POLICIES`.
    top_k: Number of top blocks for `"top_k"`.
    adapter_set: The adapters and LayerNorms that train, an `EncoderAdapters` of layers, when
      they are not the encoder's own (another task's set on the same base; `adapters` and
      `layer_norm` only). The encoder's own adapters and LayerNorms then stay frozen.
    train_layer_norms: With `adapters`, whether the LayerNorms train too (peft and
      AdapterHub keep them frozen for LoRA and (IA)³).
    layer_norms_frozen_below: With `adapters`, the block below which the LayerNorms stay
      frozen, the embeddings' too (a config's `layer_norms_frozen_below`: AdapterDrop's
      training, where nothing below the lowest adapters trains); 0 freezes none.
  """
  own = encoder.own_adapters()
  trained = own if adapter_set is None else adapter_set
  trained_modules = [a for block in trained.blocks
                     for a in [block.attention_adapter, block.feedforward_adapter]
                     + _projection_layers(block) if a] + list(trained.pooler)
  validate_tuning(tuning, top_k, encoder.num_layers, bool(trained_modules))
  if adapter_set is not None and tuning not in BASE_FROZEN_POLICIES:
    raise ValueError(
        f"tuning={tuning!r} trains the shared base, so only the encoder's own adapter set can "
        f"use it; another set on the same base needs one of {list(BASE_FROZEN_POLICIES)}.")
  first_trained_block = encoder.num_layers - top_k if tuning == "top_k" else None
  for layer in (encoder.word_embeddings, encoder.position_embedding, encoder.type_embeddings,
                encoder.pooler_transform):
    layer.trainable = tuning == "full" or (tuning == "top_k" and layer is encoder.pooler_transform)
  own.embedding_layer_norm.trainable = tuning == "full"
  for index, (block, block_own) in enumerate(zip(encoder.transformer_layers, own.blocks)):
    block_trains = tuning == "full" or (tuning == "top_k" and index >= first_trained_block)
    for layer in (block.self_attention, block.intermediate, block.output_dense):
      layer.trainable = block_trains
    for layer in list(block_own.slots().values()) + _projection_layers(block_own):
      if layer is not None:
        layer.trainable = block_trains
  if adapter_set is not None:
    for layer in _layers(adapter_set):
      layer.trainable = False
  # What the set itself trains: its LayerNorms, and its adapters under the paper's policy.
  if tuning == "layer_norm" or (tuning == "adapters" and train_layer_norms):
    frozen_below = layer_norms_frozen_below if tuning == "adapters" else 0
    trained.embedding_layer_norm.trainable = frozen_below == 0
    for index, block in enumerate(trained.blocks):
      block.self_attention_layer_norm.trainable = index >= frozen_below
      block.output_layer_norm.trainable = index >= frozen_below
  if tuning == "adapters":
    for module in trained_modules:
      module.trainable = True


def _layers(adapters):
  """Every layer of an `EncoderAdapters`."""
  return [adapters.embedding_layer_norm] + [
      layer for block in adapters.blocks
      for layer in list(block.slots().values()) + _projection_layers(block)
      if layer is not None] + list(adapters.pooler)


def _projection_layers(block):
  return [layer for layers in block.projection_changes().values() for layer in layers]

"""Which parts of a BERT encoder train beside the bottleneck adapters: the paper's transfer
strategies, chosen by name in `AdapterConfig.tuning`. They are tunings of the base, not
methods of their own; `keras_adapters.models.tuning` applies them to an encoder."""

TUNING_POLICIES = ("adapters", "layer_norm", "top_k", "full")
# The policies that leave the base unchanged, so that several tasks can share it.
BASE_FROZEN_POLICIES = ("adapters", "layer_norm")


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
    raise ValueError("tuning='adapters' needs adapters (or LoRA, (IA)^3): pass adapter_size "
                     "(e.g. 64).")
  if tuning == "top_k":
    if not isinstance(top_k, int) or not 1 <= top_k <= num_layers:
      raise ValueError(
          f"tuning='top_k' trains the top k of the {num_layers} layers: top_k must be an "
          f"integer in [1, {num_layers}], got {top_k!r}.")
  elif top_k is not None:
    raise ValueError(f"top_k is only used with tuning='top_k', not tuning={tuning!r}.")

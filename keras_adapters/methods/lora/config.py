"""`LoRAConfig`: where LoRA goes and how it is scaled, as peft's `LoraConfig`."""

import dataclasses
from typing import Tuple

from keras_adapters.methods import method_config
from keras_adapters.methods.lora import dora
from keras_adapters.methods.lora import definition
from keras_adapters.utils import settings


@dataclasses.dataclass(frozen=True)
class LoRAConfig(method_config.MethodConfig):
  """LoRA (Hu et al. 2021) on chosen projections of every block: `W · x + s · B · A · x`.

  Passed to `AdaptedBert(handle, adapter_config=LoRAConfig(...))`; stored in adapter
  artifacts. The names follow peft's `LoraConfig` and AdapterHub's `LoRAConfig`: `r`,
  `alpha` (peft's `lora_alpha`), `use_rslora`, `dropout` (`lora_dropout`), `target_modules`
  (the block's projections: peft's `query`/`key`/`value`, AdapterHub's `attn_matrices`, the
  attention output and the feed-forward `intermediate` and `output`; and `pooler`, BERT's
  pooler projection, which peft's "dense" also wraps), `leave_out` (peft's
  `layers_to_transform`, inverted), `use_dora` (DoRA, Liu et al. 2024, computed as peft or
  AdapterHub does: `dora_variant`; see `dora.py`).

  Example:
  >>> config = LoRAConfig(r=4, target_modules=("query", "key", "value"))
  >>> LoRAConfig.from_dict(config.to_dict()) == config
  True
  """
  method = "lora"
  # The fields `keras_adapters.keras3.adapt` takes; any other must keep its default there.
  keras3_fields = ("r", "alpha", "use_rslora", "dropout", "target_modules", "leave_out",
                   "init_weights", "train_layer_norms", "use_dora", "dora_variant")

  r: int = settings.setting(8, "LoRA rank r of every update.")
  alpha: float = settings.setting(
      8.0, "LoRA alpha: the update is scaled by alpha / r (alpha / sqrt(r) with "
      "--lora_use_rslora).")
  use_rslora: bool = settings.setting(
      False, "Scale LoRA updates by alpha / sqrt(r) (rsLoRA) instead of alpha / r.")
  dropout: float = settings.setting(0.0, "Dropout on the input of each LoRA update while "
                                    "training.")
  target_modules: Tuple[str, ...] = settings.setting(
      ("query", "value"), "Projections of each block that get LoRA: query, key, value, "
      "attention_output, intermediate, output, and pooler: BERT's pooler projection, which "
      "peft's 'dense' also wraps (the LoRA paper and peft's default: query and value).")
  leave_out: Tuple[int, ...] = settings.setting(
      (), "Indices of the Transformer layers that get no LoRA.")
  init_weights: str = settings.setting(
      "lora", "How A and B start: lora (peft's and AdapterHub's default: A Kaiming-uniform, "
      "B zero), gaussian (peft: A normal with std 1/r, B zero) or bert (AdapterHub: both "
      "normal, std 0.02).", choices=definition.INITIALISATIONS)
  train_layer_norms: bool = settings.setting(
      False, "Train the base's LayerNorms with LoRA (peft and AdapterHub keep them frozen).")
  use_dora: bool = settings.setting(
      False, "DoRA (Liu et al. 2024): also learn each output feature's length, m * (W + s·B·A) "
      "/ ||W + s·B·A|| (peft's and AdapterHub's use_dora).")
  dora_variant: str = settings.setting(
      "peft", "Whose DoRA with --lora_use_dora: peft (the bias apart, the norm of W + s·B·A, "
      "a constant for gradients) or adapterhub (the bias rescaled too, the norm of W + B·A).",
      choices=dora.VARIANTS)

  def __post_init__(self):
    method_config.use_python_numbers(self)
    if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
      raise ValueError(f"r must be a whole number of at least 1 (LoRA uses 1 to 64), got "
                       f"{self.r!r}.")
    method_config.check_number("alpha", self.alpha, positive=True)
    method_config.check_number("dropout", self.dropout, below=1.0)
    if not isinstance(self.use_rslora, bool):
      raise ValueError(f"use_rslora must be True or False, got {self.use_rslora!r}.")
    if not isinstance(self.use_dora, bool):
      raise ValueError(f"use_dora must be True or False, got {self.use_dora!r}.")
    if self.dora_variant not in dora.VARIANTS:
      raise ValueError(f"dora_variant must be one of {list(dora.VARIANTS)}, got "
                       f"{self.dora_variant!r}.")
    if self.init_weights not in definition.INITIALISATIONS:
      raise ValueError(f"init_weights must be one of {list(definition.INITIALISATIONS)}, got "
                       f"{self.init_weights!r}.")
    self._check_common()

  def layer_options(self, target):
    del target  # Every projection alike.
    return dict(rank=self.r, alpha=self.alpha, use_rslora=self.use_rslora,
                dropout=self.dropout, init_weights=self.init_weights,
                use_dora=self.use_dora, dora_variant=self.dora_variant)

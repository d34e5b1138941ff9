"""LoRA in AdapterHub's LoRA family: `composition_mode="add"`, `x·W + b + (alpha/r)·x·Aᵀ·Bᵀ`,
with `use_dora` AdapterHub's own DoRA (`dora_variant="adapterhub"`).

`interop.adapterhub_lora` finds this module by the method's folder and reads and writes the
family's shared options (which modules, `leave_out`); the rest of the config, and the layout
of the method's tensors, are here.
"""

import numpy as np

from keras_adapters.methods.lora.config import LoRAConfig

COMPOSITION_MODE = "add"
# The method's weights → AdapterHub's names after `...loras.<adapter name>.`.
TENSORS = {"lora_a": "lora_A", "lora_b": "lora_B", "magnitude": "m.weight"}


def config_from_adapterhub(config, targets, leave_out):
  """The `LoRAConfig` of an AdapterHub "lora" config dict of this mode, putting LoRA on
  `targets` in every layer but `leave_out`."""
  init = config.get("init_weights", "lora")
  dora = config.get("use_dora", False)
  return LoRAConfig(r=config.get("r", 8), alpha=config.get("alpha", 8),
                    dropout=config.get("dropout", 0.0), target_modules=tuple(targets),
                    leave_out=leave_out, init_weights=init if init == "bert" else "lora",
                    use_dora=dora, **({"dora_variant": "adapterhub"} if dora else {}))


def config_to_adapterhub(config):
  """AdapterHub's options of this mode for a `LoRAConfig`, or a `ValueError` naming what
  AdapterHub cannot represent."""
  if config.use_dora and config.dora_variant != "adapterhub":
    raise ValueError(f"The model's DoRA is dora_variant={config.dora_variant!r}, which "
                     "AdapterHub does not compute (its norm and bias differ): save it with "
                     "save_peft, or train with dora_variant='adapterhub'.")
  # rsLoRA's alpha/sqrt(r) is AdapterHub's alpha/r with alpha scaled by sqrt(r).
  alpha = config.alpha * np.sqrt(config.r) if config.use_rslora else config.alpha
  return dict(composition_mode=COMPOSITION_MODE, r=config.r, alpha=float(alpha),
              dropout=config.dropout, use_dora=config.use_dora,
              init_weights="bert" if config.init_weights == "bert" else "lora")


def to_pytorch(weight, value):
  """A weight in AdapterHub's layout: A and B transposed, DoRA's magnitude as `[out, 1]`."""
  if weight == "magnitude":
    return np.ascontiguousarray(value.reshape(-1, 1))
  return np.ascontiguousarray(value.T)


def from_pytorch(weight, value, adapterhub_config):
  """The inverse of `to_pytorch`."""
  del adapterhub_config
  if weight == "magnitude":
    return value.reshape(-1)
  return np.ascontiguousarray(value.T)

"""(IA)³ in AdapterHub's LoRA family: `composition_mode="scale"`, `(x·W + b) ⊙ (alpha·B)`
with r = 1, its scale being AdapterHub's LoRA B.

`interop.adapterhub_lora` finds this module by the method's folder and reads and writes the
family's shared options (which modules, `leave_out`); the rest of the config, and the layout
of the method's tensor, are here.
"""

import numpy as np

from keras_adapters.methods.ia3.config import IA3Config

COMPOSITION_MODE = "scale"
# The method's weight → AdapterHub's name after `...loras.<adapter name>.`.
TENSORS = {"scale": "lora_B"}


def config_from_adapterhub(config, targets, leave_out):
  """The `IA3Config` of an AdapterHub "lora" config dict of this mode, scaling `targets` in
  every layer but `leave_out`."""
  if config.get("use_dora", False):
    raise ValueError("composition_mode='scale' with use_dora=True: AdapterHub's (IA)^3 has "
                     "no DoRA; convert an adapter with use_dora=False.")
  if config.get("r", 1) != 1:
    raise ValueError(f"composition_mode='scale' with r={config['r']}: AdapterHub's (IA)^3 "
                     "has r=1.")
  return IA3Config(target_modules=tuple(targets), feedforward_modules=(), leave_out=leave_out)


def config_to_adapterhub(config):
  """AdapterHub's options of this mode for an `IA3Config`, or a `ValueError` naming what
  AdapterHub cannot represent."""
  if config.feedforward_modules:
    raise ValueError(f"feedforward_modules={list(config.feedforward_modules)}: AdapterHub's "
                     "(IA)^3 scales projection outputs only; train with "
                     "feedforward_modules=() and target_modules=('key', 'value', "
                     "'intermediate').")
  return dict(composition_mode=COMPOSITION_MODE, r=1, alpha=1, dropout=0.0,
              init_weights="ia3")


def to_pytorch(weight, value):
  """The scale as AdapterHub's `[out, 1]` B (AdapterHub multiplies it by its alpha, 1 when
  written here)."""
  del weight
  return np.ascontiguousarray(value.reshape(-1, 1))


def from_pytorch(weight, value, adapterhub_config):
  """The scale of an AdapterHub B written under `adapterhub_config` (times its alpha)."""
  del weight
  return value.reshape(-1) * adapterhub_config.get("alpha", 1)

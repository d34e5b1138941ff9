"""AdapterHub's LoRA family (`LoRAConfig`, `IA3Config`: architecture "lora") read and written.

AdapterHub puts LoRA and (IA)³ in one layer family: `composition_mode="add"` is LoRA
(`x·W + b + (alpha/r)·x·Aᵀ·Bᵀ`), `"scale"` is (IA)³ (`(x·W + b) ⊙ (alpha·B)`, r = 1). It wraps
the attention's `query`/`key`/`value` (`selfattn_lora` with `attn_matrices`), the
feed-forward `intermediate.dense` (`intermediate_lora`, before the activation) and
`output.dense` (`output_lora`). Tensors are named
`bert.encoder.layer.<i>.<module>.loras.<name>.lora_A` (`[r, in]`) and `lora_B` (`[out, r]`),
with `use_dora` also DoRA's magnitudes `m.weight` (`[out, 1]`), read as
`LoRAConfig(use_dora=True, dora_variant="adapterhub")`: AdapterHub's own DoRA formula.
"""

import re

import numpy as np

from keras_adapters.methods.ia3 import IA3Config
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.utils import errors

# Our projections → AdapterHub's module paths inside `bert.encoder.layer.<i>`.
MODULES = {"query": "attention.self.query", "key": "attention.self.key",
           "value": "attention.self.value", "intermediate": "intermediate.dense",
           "output": "output.dense"}
_ATTENTION_MATRICES = {"q": "query", "k": "key", "v": "value"}
# Options that would change what the layers compute, with the value meaning "off".
_UNSUPPORTED = {"use_gating": False, "vera_d": None, "vera_b": None}
# Options that change nothing at inference (initialisation, dtype of training).
_INFERENCE_NEUTRAL = ("init_weights_seed", "dtype")
_KNOWN = ({"architecture", "r", "alpha", "dropout", "attn_matrices", "composition_mode",
           "selfattn_lora", "intermediate_lora", "output_lora", "leave_out", "init_weights",
           "use_dora"}
          | set(_UNSUPPORTED) | set(_INFERENCE_NEUTRAL))
# A projection change's weight key (`transformer/layer_0/query/lora/lora_a`).
_KEY = re.compile(r"transformer/layer_(\d+)/(\w+)/(lora|ia3)/(lora_a|lora_b|magnitude|scale)")
_FACTORS = {"lora_a": "lora_A", "lora_b": "lora_B", "magnitude": "m.weight"}
# An AdapterHub LoRA tensor's name; group 1 is its module.
_TENSOR = re.compile(r"bert\.encoder\.layer\.\d+\.([\w.]+)\.loras\..+\.lora_[AB]")


class Error(errors.UsageError):
  """An AdapterHub LoRA or (IA)³ config that this library cannot reproduce exactly."""


def config_from_adapterhub(config):
  """The `LoRAConfig` or `IA3Config` of an AdapterHub "lora" architecture config dict."""
  for option, plain in _UNSUPPORTED.items():
    if config.get(option, plain) != plain:
      raise Error(f"The adapter uses AdapterHub's {option}={config[option]!r} (gating, "
                  "VeRA), which this library does not implement; convert a plain LoRA or "
                  f"(IA)^3 adapter ({option}={plain!r}).")
  unknown = sorted(set(config) - _KNOWN)
  if unknown:
    raise Error(f"Unknown AdapterHub LoRA options {unknown}: not a config this library can "
                "reproduce.")
  targets = []
  if config.get("selfattn_lora", True):
    matrices = config.get("attn_matrices", ["q", "v"])
    stray = [m for m in matrices if m not in _ATTENTION_MATRICES]
    if stray:
      raise Error(f"attn_matrices {stray} are not AdapterHub's q, k, v.")
    targets += [_ATTENTION_MATRICES[m] for m in matrices]
  targets += [t for t, flag in (("intermediate", "intermediate_lora"),
                                ("output", "output_lora")) if config.get(flag)]
  if not targets:
    raise Error(
        f"The AdapterHub LoRA config puts LoRA on no module (selfattn_lora="
        f"{config.get('selfattn_lora', True)}, attn_matrices={config.get('attn_matrices')}, "
        f"intermediate_lora={config.get('intermediate_lora')}, output_lora="
        f"{config.get('output_lora')}): set AdapterHub's options of the modules the adapter "
        "was trained on (selfattn_lora with attn_matrices, intermediate_lora, output_lora).")
  leave_out = tuple(config.get("leave_out") or ())
  mode = config.get("composition_mode", "add")
  try:
    if mode == "add":
      init = config.get("init_weights", "lora")
      dora = config.get("use_dora", False)
      return LoRAConfig(r=config.get("r", 8), alpha=config.get("alpha", 8),
                        dropout=config.get("dropout", 0.0), target_modules=tuple(targets),
                        leave_out=leave_out, init_weights=init if init == "bert" else "lora",
                        use_dora=dora, **({"dora_variant": "adapterhub"} if dora else {}))
    if config.get("use_dora", False):
      raise Error("composition_mode='scale' with use_dora=True: AdapterHub's (IA)^3 has no "
                  "DoRA; convert an adapter with use_dora=False.")
    if mode == "scale":
      if config.get("r", 1) != 1:
        raise Error(f"composition_mode='scale' with r={config['r']}: AdapterHub's (IA)^3 "
                    "has r=1.")
      return IA3Config(target_modules=tuple(targets), feedforward_modules=(),
                       leave_out=leave_out)
  except ValueError as error:
    raise Error(f"The AdapterHub config cannot be reproduced: {error}") from error
  raise Error(f"composition_mode={mode!r}: AdapterHub has 'add' (LoRA) and 'scale' ((IA)^3).")


def config_to_adapterhub(config):
  """An AdapterHub "lora" architecture config dict equivalent to a `LoRAConfig` or
  `IA3Config`, or an error naming what AdapterHub cannot represent."""
  missing = [t for t in config.target_modules if t not in MODULES]
  if missing:
    raise Error(f"target_modules {missing} have no AdapterHub equivalent (AdapterHub's LoRA "
                "wraps query, key, value, intermediate and output).")
  common = dict(
      architecture="lora", selfattn_lora=any(t in config.target_modules
                                             for t in _ATTENTION_MATRICES.values()),
      attn_matrices=[m for m, t in _ATTENTION_MATRICES.items() if t in config.target_modules],
      intermediate_lora="intermediate" in config.target_modules,
      output_lora="output" in config.target_modules, leave_out=list(config.leave_out),
      init_weights_seed=None, dtype=None, use_dora=False, **_UNSUPPORTED)
  if isinstance(config, IA3Config):
    if config.feedforward_modules:
      raise Error(f"feedforward_modules={list(config.feedforward_modules)}: AdapterHub's "
                  "(IA)^3 scales projection outputs only; train with feedforward_modules=() "
                  "and target_modules=('key', 'value', 'intermediate').")
    return dict(common, composition_mode="scale", r=1, alpha=1, dropout=0.0,
                init_weights="ia3")
  if config.use_dora and config.dora_variant != "adapterhub":
    raise Error(f"The model's DoRA is dora_variant={config.dora_variant!r}, which AdapterHub "
                "does not compute (its norm and bias differ): save it with save_peft, or "
                "train with dora_variant='adapterhub'.")
  # rsLoRA's alpha/sqrt(r) is AdapterHub's alpha/r with alpha scaled by sqrt(r).
  alpha = config.alpha * np.sqrt(config.r) if config.use_rslora else config.alpha
  return dict(common, composition_mode="add", r=config.r, alpha=float(alpha),
              dropout=config.dropout, use_dora=config.use_dora,
              init_weights="bert" if config.init_weights == "bert" else "lora")


def missing_option(name, config):
  """The AdapterHub option that would put LoRA where tensor `name` is (for a query's:
  `selfattn_lora` with "q" in `attn_matrices`) when the "lora" `config` dict lacks it, else
  `None` (also for a name that is not AdapterHub LoRA's)."""
  match = _TENSOR.fullmatch(name)
  target = match and {m: t for t, m in MODULES.items()}.get(match.group(1))
  matrix = {t: m for m, t in _ATTENTION_MATRICES.items()}.get(target)
  if matrix:
    wrapped = (config.get("selfattn_lora", True)
               and matrix in config.get("attn_matrices", ["q", "v"]))
    return None if wrapped else f"selfattn_lora=True with {matrix!r} in attn_matrices"
  if target and not config.get(f"{target}_lora"):
    return f"{target}_lora=True"
  return None


def tensor_name(key, adapter_name):
  """AdapterHub's name of a projection change's weight key, or `None` for other keys."""
  match = _KEY.fullmatch(key)
  if not match:
    return None
  layer, target, _, part = match.groups()
  if target not in MODULES:
    raise Error(f"{key!r}: AdapterHub has no LoRA on {target!r}.")
  if part == "scale":
    part = "lora_b"  # AdapterHub's (IA)^3 scale is its LoRA B.
  return (f"bert.encoder.layer.{layer}.{MODULES[target]}.loras.{adapter_name}."
          f"{_FACTORS[part]}")


def to_pytorch(key, value):
  """A weight in AdapterHub's layout: A and B transposed, the (IA)³ scale and DoRA's
  magnitude as `[out, 1]` (AdapterHub multiplies the scale by its alpha, 1 when written
  here)."""
  if key.endswith(("/scale", "/magnitude")):
    return np.ascontiguousarray(value.reshape(-1, 1))
  return np.ascontiguousarray(value.T)


def from_pytorch(key, value, adapterhub_config):
  """The inverse of `to_pytorch` for a tensor AdapterHub wrote under `adapterhub_config`."""
  if key.endswith("/scale"):
    return value.reshape(-1) * adapterhub_config.get("alpha", 1)
  if key.endswith("/magnitude"):
    return value.reshape(-1)
  return np.ascontiguousarray(value.T)

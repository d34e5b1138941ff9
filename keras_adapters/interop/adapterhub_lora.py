"""AdapterHub's LoRA family (architecture "lora") read and written, one method per
`composition_mode`.

AdapterHub puts LoRA and (IA)³ in one layer family: `composition_mode="add"` is LoRA
(`x·W + b + (alpha/r)·x·Aᵀ·Bᵀ`), `"scale"` is (IA)³ (`(x·W + b) ⊙ (alpha·B)`, r = 1). It wraps
the attention's `query`/`key`/`value` (`selfattn_lora` with `attn_matrices`), the
feed-forward `intermediate.dense` (`intermediate_lora`, before the activation) and
`output.dense` (`output_lora`). Tensors are named
`bert.encoder.layer.<i>.<module>.loras.<name>.lora_A` (`[r, in]`) and `lora_B` (`[out, r]`),
with `use_dora` also DoRA's magnitudes `m.weight` (`[out, 1]`).

This module reads and writes what the family shares (which modules, `leave_out`, the
options refused); each method's mode, config and tensor layout are in its own folder, as
`methods/<name>/adapterhub.py` (`COMPOSITION_MODE`, `TENSORS`, `config_from_adapterhub`,
`config_to_adapterhub`, `to_pytorch`, `from_pytorch`), found through the method registry.
"""

import importlib
import importlib.util
import re

from keras_adapters import methods  # pylint: disable=unused-import  (registers them)
from keras_adapters.methods import registry
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
# A projection change's weight key (`transformer/layer_0/query/lora/lora_a`): its layer,
# projection, method and weight.
_KEY = re.compile(r"transformer/layer_(\d+)/(\w+)/(\w+)/(\w+)")
# An AdapterHub LoRA tensor's name; group 1 is its module.
_TENSOR = re.compile(r"bert\.encoder\.layer\.\d+\.([\w.]+)\.loras\..+\.lora_[AB]")


class Error(errors.UsageError):
  """An AdapterHub LoRA or (IA)³ config that this library cannot reproduce exactly."""


def members():
  """Each registered method of the family: its name → its `methods/<name>/adapterhub.py`."""
  found = {}
  for method in registry.methods():
    module = method.config_class.__module__.rpartition(".")[0] + ".adapterhub"
    if importlib.util.find_spec(module) is not None:
      found[method.name] = importlib.import_module(module)
  return found


def config_from_adapterhub(config):
  """The config of the method of an AdapterHub "lora" architecture config dict's
  `composition_mode` (a `LoRAConfig` for "add", an `IA3Config` for "scale")."""
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
  mode = config.get("composition_mode", "add")
  by_mode = {member.COMPOSITION_MODE: (name, member) for name, member in members().items()}
  if mode not in by_mode:
    raise Error(f"composition_mode={mode!r}: AdapterHub has "
                + " and ".join(f"{m!r} ({name})" for m, (name, _) in by_mode.items()) + ".")
  try:
    return by_mode[mode][1].config_from_adapterhub(config, targets,
                                                   tuple(config.get("leave_out") or ()))
  except ValueError as error:
    raise Error(f"The AdapterHub config cannot be reproduced: {error}") from None


def config_to_adapterhub(config):
  """An AdapterHub "lora" architecture config dict equivalent to the config of a method of
  the family (`LoRAConfig`, `IA3Config`), or an error naming what AdapterHub cannot
  represent."""
  member = members().get(config.method)
  if member is None:
    raise Error(f"{type(config).__name__} has no AdapterHub equivalent; AdapterHub's LoRA "
                f"family holds {sorted(members())}.")
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
  try:
    return dict(common, **member.config_to_adapterhub(config))
  except ValueError as error:
    raise Error(str(error)) from None


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
  found = _member_weight(key)
  if found is None:
    return None
  layer, target, member, weight = found
  if target not in MODULES:
    raise Error(f"{key!r}: AdapterHub has no LoRA on {target!r}.")
  return (f"bert.encoder.layer.{layer}.{MODULES[target]}.loras.{adapter_name}."
          f"{member.TENSORS[weight]}")


def to_pytorch(key, value):
  """A weight of a projection change (`tensor_name` gives its name) in AdapterHub's layout."""
  _, _, member, weight = _member_weight(key)
  return member.to_pytorch(weight, value)


def from_pytorch(key, value, adapterhub_config):
  """The inverse of `to_pytorch` for a tensor AdapterHub wrote under `adapterhub_config`."""
  _, _, member, weight = _member_weight(key)
  return member.from_pytorch(weight, value, adapterhub_config)


def _member_weight(key):
  """`(layer, projection, method module, weight)` of a weight key of a family member's
  projection change, else `None`."""
  match = _KEY.fullmatch(key)
  member = match and members().get(match.group(3))
  if member is None or match.group(4) not in member.TENSORS:
    return None
  layer, target, _, weight = match.groups()
  return layer, target, member, weight

"""LoRA in peft's format: `peft_type` "LORA", the `LoraConfig` options that are LoRA's own,
the names of its tensors (with `use_dora` DoRA's magnitudes too) and the checks of what
only LoRA's artifacts can get wrong.

`interop.peft_format` finds this module by the method's folder and reads and writes what the
format shares (the files, BERT's module names, which modules and layers, the classifier), as
peft's shared save and load code leaves `tuners/lora/` its own config and layer. What it
refuses here it refuses as a `ValueError`, whose one-line message it passes on.
"""

from keras_adapters.methods.lora.config import LoRAConfig

PEFT_TYPE = "LORA"
# How the format's messages name the method's adapters.
NAME = "LoRA"
# The method's weights → peft's names after `<module>.`.
TENSORS = {"lora_a": "lora_A.weight", "lora_b": "lora_B.weight",
           "magnitude": "lora_magnitude_vector"}
# LoraConfig options that change what the model computes, which this library does not
# implement, with their plain values: read only when plain, written plain.
PLAIN_OPTIONS = {"lora_bias": False, "bias": "none", "fan_in_fan_out": False,
                 "layer_replication": None, "target_parameters": None,
                 "trainable_token_indices": None, "use_qalora": False, "use_bdlora": None,
                 "rank_pattern": {}, "alpha_pattern": {}, "alora_invocation_tokens": None,
                 "megatron_config": None}
# peft's `init_lora_weights` that change the base weights (and their variants, "pissa_niter_16").
_BASE_REWRITING_INITS = ("pissa", "olora", "corda", "loftq")
# Which axis of A (`[r, in]`) and B (`[out, r]`) is the rank.
_RANK_AXES = {"lora_a": 0, "lora_b": -1}


def config_from_peft(meta, target_modules):
  """The `LoRAConfig` of a peft `LoraConfig` dict on `target_modules`, or a `KeyError` or
  `ValueError` for one it cannot be."""
  return LoRAConfig(r=meta["r"], alpha=meta["lora_alpha"],
                    use_rslora=bool(meta.get("use_rslora", False)),
                    use_dora=meta.get("use_dora") or False,
                    dropout=meta.get("lora_dropout", 0.0), target_modules=tuple(target_modules),
                    init_weights="gaussian" if meta.get("init_lora_weights") == "gaussian"
                    else "lora")


def config_to_peft(config):
  """peft's `LoraConfig` options of a `LoRAConfig` (all but the modules and layers), or a
  `ValueError` naming what peft cannot represent."""
  if config.use_dora and config.dora_variant != "peft":
    raise ValueError(f"The model's DoRA is dora_variant={config.dora_variant!r}, which peft "
                     "does not compute (its norm and bias differ): save it with "
                     "save_adapterhub, or train with dora_variant='peft'.")
  return dict(peft_type=PEFT_TYPE, r=config.r, lora_alpha=config.alpha,
              use_rslora=config.use_rslora, use_dora=config.use_dora,
              lora_dropout=config.dropout,
              init_lora_weights="gaussian" if config.init_weights == "gaussian" else True)


def check_config(meta):
  """Refuses peft's `init_lora_weights` that rewrite the base weights when the adapter is
  made: such an adapter only fits that rewritten base, which this library does not have
  (peft itself rebuilds it)."""
  init = meta.get("init_lora_weights")
  if isinstance(init, str) and init.lower().startswith(_BASE_REWRITING_INITS):
    raise ValueError(
        f"The adapter's init_lora_weights={init!r} rewrites the base weights (PiSSA, OLoRA, "
        "CorDA and LoftQ subtract their start from them), so it fits that rewritten base "
        "only. Save it as a plain LoRA with peft's save_pretrained(..., "
        "path_initial_model_for_weight_conversion=<the adapter saved before training>) and "
        "load that (LoftQ has no such conversion).")


def check_tensors(meta, modules, files):
  """Refuses tensors that disagree with the config (`meta`, which `config_from_peft` read):
  DoRA's magnitudes without `use_dora` or missing with it, a rank that is not `r`.

  Args:
    meta: The peft config dict.
    modules: The method's tensors by module, `{"<prefix><module>": {weight: array}}` (weight
      one of `TENSORS`), a tensor's name being `<prefix><module>.<TENSORS[weight]>`.
    files: The artifact's `folder`, its `config` file's name and its `weights` file's path.
  """
  names = [(module, weight, f"{module}.{TENSORS[weight]}") for module in sorted(modules)
           for weight in sorted(modules[module], key=TENSORS.get)]
  use_dora = meta.get("use_dora")
  for _, weight, name in names:
    if weight == "magnitude" and use_dora is not True:
      raise ValueError(f"{files.folder!r} holds DoRA's {name!r}, but its config says "
                       f"use_dora={use_dora!r}: peft would not load it. Save the adapter "
                       "again with peft.")
  lacking = [name for module, weight, name in names if use_dora is True
             and weight == "lora_a" and "magnitude" not in modules[module]]
  if lacking:
    raise ValueError(f"{files.folder!r} says use_dora=True but holds no DoRA magnitude "
                     f"({TENSORS['magnitude']}) beside {lacking[0]!r}: the file is incomplete "
                     "or from a plain LoRA adapter. Save the adapter again with peft.")
  rank = meta["r"]
  for module, weight, name in names:
    if weight not in _RANK_AXES:
      continue
    shape = modules[module][weight].shape
    found = shape[_RANK_AXES[weight]] if shape else None
    if len(shape) != 2 or found != rank:
      raise ValueError(
          f"'{files.weights}' holds {name!r} of shape {list(shape)}, rank {found}, but its "
          f"{files.config} says r={rank}: the config and the weights disagree (one edited, or "
          "from two adapters). Save the adapter again with peft's save_pretrained.")

"""LoRA in peft's format: `peft_type` "LORA", the `LoraConfig` options that are LoRA's own and
the names of its tensors, with `use_dora` DoRA's magnitudes too.

`interop.peft_format` finds this module by the method's folder and reads and writes what the
format shares (the files, BERT's module names, which modules and layers, the classifier, the
options no method here computes); the rest of the config, and the method's tensor names, are
here.
"""

from keras_adapters.methods.lora.config import LoRAConfig

PEFT_TYPE = "LORA"
# The method's weights → peft's names after `<module>.`.
TENSORS = {"lora_a": "lora_A.weight", "lora_b": "lora_B.weight",
           "magnitude": "lora_magnitude_vector"}


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

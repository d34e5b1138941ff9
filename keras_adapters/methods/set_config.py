"""An adapter set's config of any registered method, from its object or its dict."""

import dataclasses

from keras_adapters.methods import registry
from keras_adapters.methods.adapters.config import AdapterConfig


def config_from_dict(values):
  """The config of an adapter set's `to_dict()`: an `AdapterConfig`, or the registered
  method's config (`LoRAConfig`, `IA3Config`) when the dict names its `method`."""
  if "method" in values:
    try:
      method = registry.get(values["method"])
    except ValueError as error:
      raise ValueError(f"{error} The adapter set config {values} names no method this "
                       "library has.") from None
    return method.config_class.from_dict(values)
  if "peft_type" in values:
    raise ValueError(
        f"The adapter config is peft's (peft_type={values['peft_type']!r}), which this library "
        "does not take as is: pass LoRAConfig(r=..., alpha=..., target_modules=...) (peft's "
        "r, lora_alpha, target_modules), a dict of its fields with \"method\": \"lora\", or "
        "load an adapter peft saved with keras_adapters.load_peft(folder).")
  unknown = set(values) - {field.name for field in dataclasses.fields(AdapterConfig)}
  others = [c for c in registry.config_classes() if c is not AdapterConfig] if unknown else []
  for config_class in others:
    if unknown <= {field.name for field in dataclasses.fields(config_class)}:
      raise ValueError(
          f"The adapter config has {config_class.__name__}'s fields {sorted(unknown)} but no "
          f"\"method\" key, so it reads as bottleneck adapters': add \"method\": "
          f"\"{config_class.method}\", or pass {config_class.__name__}(...).")
  return AdapterConfig.from_dict(values)


def check_set_config(config):
  """`config` as an adapter set's config: an `AdapterConfig` or a method's, or its dict."""
  if isinstance(config, dict):
    return config_from_dict(config)
  if not isinstance(config, registry.config_classes()):
    names = ", ".join(c.__name__ for c in registry.config_classes())
    raise ValueError(
        f"An adapter set's config is one of {names} (or its to_dict()), got {config!r}; "
        "bottleneck adapters with LoRA or (IA)^3 on one set are not supported yet.")
  return config

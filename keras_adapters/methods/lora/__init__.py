"""LoRA: its config, definition and layer, registered as the method "lora"."""

from keras_adapters.methods import registry
from keras_adapters.methods.lora import definition
from keras_adapters.methods.lora.config import LoRAConfig

registry.register("lora", LoRAConfig, "keras_adapters.methods.lora.layer.LoRA", definition)

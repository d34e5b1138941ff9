"""LoRA: its config and layer, registered as the method "lora"."""

from keras_adapters.methods import registry
from keras_adapters.methods.lora.config import LoRAConfig
from keras_adapters.methods.lora.layer import LoRA

registry.register("lora", LoRAConfig, LoRA)

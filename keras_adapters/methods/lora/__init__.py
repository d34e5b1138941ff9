"""LoRA: its config, definition and layer, registered as the method "lora"
(`LoRAConfig.method`)."""

from keras_adapters.methods import registry
from keras_adapters.methods.lora import definition
from keras_adapters.methods.lora.config import LoRAConfig

# The rate Figure 7's study selected for it on airline's validation split
# (`run_analysis.py --study=learning_rate`).
registry.register(LoRAConfig, learning_rate=3e-3, definition=definition,
                  layer="keras_adapters.methods.lora.layer.LoRA", size=("r", "r"))

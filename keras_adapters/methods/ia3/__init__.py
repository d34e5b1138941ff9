"""(IA)³: its config, definition and layer, registered as the method "ia3"."""

from keras_adapters.methods import registry
from keras_adapters.methods.ia3 import definition
from keras_adapters.methods.ia3.config import IA3Config

registry.register("ia3", IA3Config, "keras_adapters.methods.ia3.layer.IA3", definition)

"""(IA)³: its config and layer, registered as the method "ia3"."""

from keras_adapters.methods import registry
from keras_adapters.methods.ia3.config import IA3Config
from keras_adapters.methods.ia3.layer import IA3

registry.register("ia3", IA3Config, IA3)

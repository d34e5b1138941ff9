"""(IA)³: its config, definition and layer, registered as the method "ia3"
(`IA3Config.method`)."""

from keras_adapters.methods import registry
from keras_adapters.methods.ia3 import definition
from keras_adapters.methods.ia3.config import IA3Config

# The rate Figure 7's study selected for it on airline's validation split
# (`run_analysis.py --study=learning_rate`).
registry.register(IA3Config, learning_rate=1e-2, definition=definition,
                  layer="keras_adapters.methods.ia3.layer.IA3")

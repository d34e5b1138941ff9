"""keras_adapters on Keras 3: the library's methods on keras-hub backbones.

`from keras_adapters import keras3 as kak` loads Keras 3 (`keras`, on the backend
`KERAS_BACKEND` names: TensorFlow or JAX) and keras-hub, never Keras 2: no tf_keras, and
`tf.keras` is left as the process has it. The config classes are the Keras 2 path's own
(`kak.LoRAConfig is keras_adapters.LoRAConfig`).

Example:
```python
from keras_adapters import keras3 as kak
kak.adapt(backbone, kak.AdapterConfig(adapter_size=64))  # backbone: a keras-hub BertBackbone
```
"""

from keras_adapters.keras3.adapt import SUPPORTED_BACKBONES
from keras_adapters.keras3.adapt import adapt
from keras_adapters.keras3.adapt import drop_adapters
from keras_adapters.keras3.adapt import merge
from keras_adapters.keras3.artifacts import PreprocessingConfig
from keras_adapters.keras3.artifacts import build_classifier
from keras_adapters.keras3.artifacts import load_adapters
from keras_adapters.keras3.artifacts import load_task_model
from keras_adapters.keras3.artifacts import save_adapters
from keras_adapters.keras3.interop import load_adapterhub
from keras_adapters.keras3.interop import load_peft
from keras_adapters.keras3.interop import save_adapterhub
from keras_adapters.keras3.interop import save_peft
from keras_adapters.keras3.keras_hub_lora import load_keras_hub_lora
from keras_adapters.keras3.keras_hub_lora import save_keras_hub_lora
from keras_adapters.keras3.serving import export_task
from keras_adapters.keras3.tf_hub_bert import from_tf_hub
from keras_adapters.keras3.tokenizer import preprocessor_from_tf_hub
from keras_adapters.keras3.tokenizer import tokenizer_from_tf_hub
from keras_adapters.methods.ia3.config import IA3Config
from keras_adapters.methods.lora.config import LoRAConfig
from keras_adapters.models.adapter_config import AdapterConfig

__all__ = ["AdapterConfig", "IA3Config", "LoRAConfig", "PreprocessingConfig",
           "SUPPORTED_BACKBONES", "adapt", "build_classifier", "load_adapters",
           "load_task_model", "merge", "save_adapters", "export_task", "load_keras_hub_lora",
           "save_keras_hub_lora"]
__all__ += ["drop_adapters", "from_tf_hub", "preprocessor_from_tf_hub", "tokenizer_from_tf_hub"]
__all__ += ["load_adapterhub", "load_peft", "save_adapterhub", "save_peft"]

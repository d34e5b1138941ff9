"""keras_adapters: Houlsby bottleneck adapters for frozen TF Hub BERT encoders."""

import ast
import importlib
import typing

# The fastest correct CPU kernels (oneDNN on every x86-64 CPU), unless the user chose.
from keras_adapters.utils import cpu_kernels as _cpu_kernels

_cpu_kernels.choose_before_tensorflow()

# The public names and where they live. They load on first use (`__getattr__` below), so
# `import keras_adapters.keras3` loads no Keras 2 (tf_keras, TF Hub, the Model Garden) and a
# process can use both stacks. Imported here for readers and tools (type checkers, the API
# reference), and read from this file as the table of lazy names.
if typing.TYPE_CHECKING:
  from keras_adapters.hub.adapter_artifact import PreprocessingConfig
  from keras_adapters.hub.default_model import default_hub_handle
  from keras_adapters.hub.default_model import default_preprocess_handle
  from keras_adapters.serving.multitask_export import export_multitask
  from keras_adapters.serving.qa_export import export_qa
  from keras_adapters.serving.task_export import export_task
  from keras_adapters.interop.adapterhub import load_adapterhub
  from keras_adapters.interop.adapterhub import save_adapterhub
  from keras_adapters.interop.peft import load_peft
  from keras_adapters.interop.peft import save_peft
  from keras_adapters.layers.adapted_transformer_block import AdaptedTransformerBlock
  from keras_adapters.layers.adapter import Adapter
  from keras_adapters.methods.ia3.layer import IA3
  from keras_adapters.methods.ia3 import IA3Config
  from keras_adapters.methods.lora.layer import LoRA
  from keras_adapters.methods.lora import LoRAConfig
  from keras_adapters.models.adapted_bert import AdaptedBert
  from keras_adapters.models.adapter_config import AdapterConfig
  from keras_adapters.models.classifier import build_classifier
  from keras_adapters.models.merging import merge
  from keras_adapters.models.parameter_summary import parameter_summary
  from keras_adapters.models.parameter_summary import print_trainable_parameters
  from keras_adapters.serving.task_export import export_task_from_artifact
  from keras_adapters.models.saving import load_adapters
  from keras_adapters.models.saving import load_task_model
  from keras_adapters.models.saving import save_adapters
  from keras_adapters.models.span_labeler import build_span_labeler
  from keras_adapters.models.tuning import TUNING_POLICIES
  from keras_adapters.networks.adapted_bert_encoder import AdaptedBertEncoder
  from keras_adapters.networks.adapted_bert_encoder import INPUT_KEYS
  from keras_adapters.utils.errors import DataError
  from keras_adapters.utils.errors import RunFailedError
  from keras_adapters.utils.errors import UsageError

from keras_adapters.version import __version__

# The public API: what `docs/reference/api.md` documents.
__all__ = [
    "PreprocessingConfig",
    "default_hub_handle",
    "default_preprocess_handle",
    "export_multitask",
    "export_qa",
    "export_task",
    "load_adapterhub",
    "save_adapterhub",
    "load_peft",
    "save_peft",
    "AdaptedTransformerBlock",
    "Adapter",
    "IA3",
    "IA3Config",
    "LoRA",
    "LoRAConfig",
    "AdaptedBert",
    "AdapterConfig",
    "build_classifier",
    "merge",
    "parameter_summary",
    "print_trainable_parameters",
    "export_task_from_artifact",
    "load_adapters",
    "load_task_model",
    "save_adapters",
    "build_span_labeler",
    "TUNING_POLICIES",
    "AdaptedBertEncoder",
    "INPUT_KEYS",
    "DataError",
    "RunFailedError",
    "UsageError",
]


def _lazy_names():
  """Name → module of the imports under `typing.TYPE_CHECKING` above."""
  with open(__file__, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  block = next(node for node in tree.body if isinstance(node, ast.If)
               and ast.unparse(node.test) == "typing.TYPE_CHECKING")
  return {alias.name: node.module for node in block.body for alias in node.names}


_LAZY_NAMES = _lazy_names()


def __getattr__(name):
  """Imports a public name on first use (PEP 562) and keeps it."""
  if name not in _LAZY_NAMES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_LAZY_NAMES))

"""AdapterHub (PyTorch `adapters`) bottleneck adapters and heads, read and written exactly,
on Keras 2.

The format (files, tensor names and layouts, configs, refusals) is described and defined in
`adapterhub_format`, which the Keras 3 face shares. `load_adapterhub` turns an artifact into
a task model (`AdaptedBert` + `build_classifier`) with the `AdapterConfig` options of the
same names, or the `LoRAConfig` / `IA3Config` of AdapterHub's LoRA family
(`adapterhub_lora`); `save_adapterhub` writes one from a task model. Both sides start from
the same released base weights, so only the adapters and the head move.
"""

# The bridge reads and writes task models as `saving` does, through its private helpers.
# pylint: disable=protected-access

import dataclasses
import os

import numpy as np

from keras_adapters.hub import default_model
from keras_adapters.interop import adapterhub_format
from keras_adapters.layers import adapter_set
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving

# The format's names, where they always were.
CONFIG_FILE = adapterhub_format.CONFIG_FILE
WEIGHTS_FILE = adapterhub_format.WEIGHTS_FILE
HEAD_CONFIG_FILE = adapterhub_format.HEAD_CONFIG_FILE
HEAD_WEIGHTS_FILE = adapterhub_format.HEAD_WEIGHTS_FILE
LAYER_NORMS_FILE = adapterhub_format.LAYER_NORMS_FILE
LAYER_NORMS_README = adapterhub_format.LAYER_NORMS_README
ADAPTERHUB_VERSION = adapterhub_format.ADAPTERHUB_VERSION
DEFAULT_BASE_NAME = adapterhub_format.DEFAULT_BASE_NAME
AdapterHubError = adapterhub_format.AdapterHubError
adapter_config_from_adapterhub = adapterhub_format.adapter_config_from_adapterhub
adapterhub_config = adapterhub_format.adapterhub_config
_read_tensors = adapterhub_format._read_tensors


def load_adapterhub(directory, base_handle=None):
  """Builds the task model of an AdapterHub adapter with its classification head.

  Example:
  ```python
  model = keras_adapters.load_adapterhub("my_adapterhub_adapter")  # save_adapter(..., with_head=True)
  logits = model(inputs)       # inputs: the TF Hub BERT input dict
  ```

  Args:
    directory: What AdapterHub's `save_adapter(directory, name, with_head=True,
      use_safetensors=True)` wrote.
    base_handle: The TF Hub BERT encoder of the base AdapterHub ran on; default the embedded
      default when the artifact names all-MiniLM-L6-v2. Its width and depth are checked
      against what the artifact records.

  Returns:
    A `build_classifier` model, as `load_task_model` returns: the TF Hub BERT input dict in,
    logits out, with the adapter set named as AdapterHub named it.

  Raises:
    AdapterHubError: Files missing or pickled, options not supported here, another base.
  """
  directory = os.fspath(directory)
  adapter = adapterhub_format.read(directory)
  if base_handle is None:
    adapterhub_format.check_default_base(adapter.meta, directory, _BASE_FIX)
    base_handle = default_model.default_hub_handle()
  bert = adapted_bert.AdaptedBert(base_handle, adapter_config=adapter.config,
                                  adapter_name=adapter.name)
  adapterhub_format.check_base(adapter, directory, bert.handle, bert.encoder.hidden_size,
                               bert.encoder.num_layers, "base_handle")
  head = classifier.HeadConfig(**adapter.head)
  model = classifier.build_classifier(
      bert, head.num_classes, dropout_rate=head.dropout_rate, pooling=head.pooling,
      hidden_layers=head.hidden_layers, hidden_activation=head.hidden_activation)
  model.head_config = head
  adapterhub_format.load_weights(saving.task_variables(model), adapter,
                                 bert.encoder.hidden_size, directory)
  return model


def save_adapterhub(model, directory, *, model_name=None, layer_norms="error",
                    overwrite=False):
  """Writes a task model's adapters and head as an AdapterHub artifact.

  AdapterHub 1.3 loads it with `model.load_adapter(directory, with_head=True,
  use_safetensors=True)` into a `BertAdapterModel` of the same base, and gives the same
  logits. An AdapterHub artifact holds adapters and a head, never base weights: a model whose
  tuning changed the base's LayerNorms (the paper's tuning does) is refused, unless
  `layer_norms="file"`, which also writes them to `base_layer_norms.safetensors` with the
  lines of PyTorch that load them (`BASE_LAYER_NORMS.md`).

  Args:
    model: A `build_classifier` model around an `AdaptedBert` (one adapter set).
    directory: Folder to write. An AdapterHub adapter there is replaced; a folder holding
      files of another kind is refused unless `overwrite`. Other files in it stay.
    model_name: The Hugging Face name of the base, recorded for AdapterHub; default the
      embedded default's when the model runs on it.
    layer_norms: `"error"` (refuse changed LayerNorms) or `"file"` (write them beside).
    overwrite: Write into a folder that holds files of another kind (a peft adapter, this
      library's artifact, anything else).

  Returns:
    `directory`.

  Raises:
    AdapterHubError: The model has no AdapterHub equivalent (its tuning changes the base, a
      mean-pooling head, no adapters) or changed LayerNorms with `layer_norms="error"`.
  """
  adapterhub_format.check_layer_norms_option(layer_norms)
  adapterhub_format.check_output_folder(directory, overwrite)
  bert = saving.the_unmerged_bert(model, "save_adapterhub", AdapterHubError)
  name = saving._set_name(model, bert, None)
  config = bert.adapter_configs[name]
  head = getattr(model, "head_config", None)
  head = head and dataclasses.asdict(head)
  adapterhub_format.check_savable(name, config, head, bert.encoder.hidden_size)
  base = bert.base_layer_norms
  changed = sorted(key for key, variable in bert.adapter_weights(name).items()
                   if adapter_set.is_base_layer_norm(key)
                   and not np.array_equal(variable.numpy(), base[key]))
  adapterhub_format.check_layer_norms(
      changed and f"{len(changed)} of the base's LayerNorm weights (e.g. {changed[0]!r})",
      layer_norms)
  values = {key: variable.numpy() for key, variable in saving.task_variables(model).items()}
  return adapterhub_format.write(
      directory, name, config, head, bert.encoder.hidden_size,
      adapterhub_format.model_name(bert.handle, model_name), values, bool(changed))


# What to pass for an artifact of another base than the embedded default.
_BASE_FIX = ("base_handle= (a TF Hub BERT encoder of that model, e.g. converted with "
             "keras_adapters.hub.huggingface)")

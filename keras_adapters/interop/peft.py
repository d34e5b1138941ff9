"""peft LoRA adapters of BERT sequence classifiers, read and written exactly, on Keras 2.

The format (files, tensor names, config, refusals) is described and defined in `peft_format`,
which the Keras 3 face shares. `load_peft` builds the task model (`AdaptedBert(LoRAConfig)` +
a `build_classifier` head on BERT's pooler, as `BertForSequenceClassification` has);
`save_peft` writes one. Which modules carry LoRA is read from the tensors and checked against
the config.
"""

import os

import numpy as np

from keras_adapters.hub import default_model
from keras_adapters.hub import hub_encoder
from keras_adapters.interop import peft_format
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving

# The format's names, where they always were.
CONFIG_FILE = peft_format.CONFIG_FILE
WEIGHTS_FILE = peft_format.WEIGHTS_FILE
PEFT_VERSION = peft_format.PEFT_VERSION
PeftError = peft_format.PeftError
module_name = peft_format.module_name
module_names = peft_format.module_names


def load_peft(directory, base_handle=None):
  """Builds the task model of a peft LoRA adapter of a BERT sequence classifier.

  Example:
  ```python
  model = keras_adapters.load_peft("my_peft_lora")   # peft's save_pretrained folder
  logits = model(inputs)       # inputs: the TF Hub BERT input dict
  ```

  Args:
    directory: What peft's `save_pretrained` wrote for a `LoraConfig(task_type="SEQ_CLS")`
      model of `BertForSequenceClassification`.
    base_handle: The TF Hub BERT encoder of the base; default the embedded default when the
      artifact names all-MiniLM-L6-v2.

  Returns:
    A `build_classifier` model (pooler, dropout, dense) with the LoRA and classifier weights.

  Raises:
    PeftError: Files missing, another peft type or task, options not supported here.
  """
  directory = os.fspath(directory)
  meta, tensors = peft_format.read(directory)
  if base_handle is None:
    peft_format.check_default_base(meta, directory, _BASE_FIX)
    base_handle = default_model.default_hub_handle()
  # Read once: AdaptedBert reads the same base from the cache of read_hub_encoder.
  config = peft_format.method_config(
      meta, tensors, directory,
      lambda _: hub_encoder.read_hub_encoder(base_handle).config["num_layers"],
      "base_handle")
  bert = adapted_bert.AdaptedBert(base_handle, adapter_config=config)
  model = classifier.build_classifier(bert, peft_format.num_labels(tensors), pooling="cls")
  peft_format.load_weights(saving.task_variables(model), tensors, directory)
  return model


def save_peft(model, directory, *, base_model_name_or_path=None, overwrite=False):
  """Writes a LoRA task model as a peft artifact that `PeftModel.from_pretrained` loads.

  The model must be `AdaptedBert(LoRAConfig(...))` with a `build_classifier` head of one
  dense layer on BERT's pooler (`pooling="cls"`), BERT's sequence classifier, and its base's
  LayerNorms unchanged (peft's LoRA keeps them frozen).

  Args:
    model: The task model.
    directory: Folder to write. A peft adapter there is replaced; a folder holding files of
      another kind is refused unless `overwrite`. Other files in it stay, as with peft's
      `save_pretrained`.
    base_model_name_or_path: The Hugging Face name of the base, recorded for peft; default
      the embedded default's when the model runs on it.
    overwrite: Write into a folder that holds files of another kind (an AdapterHub adapter,
      this library's artifact, anything else).

  Returns:
    `directory`.
  """
  peft_format.check_output_folder(directory, overwrite)
  bert = saving.the_unmerged_bert(model, "save_peft", PeftError)
  head = getattr(model, "head_config", None)
  peft_format.check_savable(bert.adapter_config, head and head.pooling,
                            head and head.hidden_layers)
  changed = [key for key, value in bert.adapter_weights().items()
             if key in bert.base_layer_norms
             and not np.array_equal(value.numpy(), bert.base_layer_norms[key])]
  if changed:
    raise peft_format.changed_layer_norms_error(f"e.g. {changed[0]!r}")
  values = {key: variable.numpy() for key, variable in saving.task_variables(model).items()}
  return peft_format.write(
      directory, bert.adapter_config, bert.encoder.num_layers,
      peft_format.base_model_name(bert.handle, base_model_name_or_path), values)


# What to pass for an artifact of another base than the embedded default.
_BASE_FIX = ("base_handle= (a TF Hub BERT encoder of that model, e.g. converted with "
             "keras_adapters.hub.huggingface)")

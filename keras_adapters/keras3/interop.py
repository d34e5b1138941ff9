"""peft and AdapterHub artifacts on keras-hub backbones: the Keras 2 path's `load_peft`,
`save_peft`, `load_adapterhub` and `save_adapterhub` on Keras 3.

The files, names, layouts, config translation and refusals are the stack-independent
`interop.peft_format` and `interop.adapterhub_format`; this module builds the Keras 3 task
(`adapt` and `build_classifier`) and hands its variables over by the library's task weight
keys (`artifacts.task_weights`), which both stacks share.
"""

import os

import numpy as np

from keras import ops

from keras_adapters.hub import default_model
from keras_adapters.interop import adapterhub_format
from keras_adapters.interop import peft_format
# The package's `adapt` function hides the module's name: its names are imported.
# pylint: disable=g-importing-member
from keras_adapters.keras3.adapt import adapt
from keras_adapters.keras3.adapt import check_config
from keras_adapters.keras3 import artifacts
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import tf_hub_bert
from keras_adapters.utils import errors

# What to pass for an artifact of another base than the embedded default.
_BACKBONE_FIX = ("backbone= (a keras-hub BertBackbone of that model with its own activation, "
                 "e.g. kak.from_tf_hub(<its TF Hub encoder>))")


def load_peft(directory, backbone=None):
  """Builds the Keras 3 task model of a peft LoRA adapter of a BERT sequence classifier.

  Example:
  ```python
  model = kak.load_peft("my_peft_lora")   # peft's save_pretrained folder
  logits = model.predict({"token_ids": ..., "segment_ids": ..., "padding_mask": ...})
  ```

  Args:
    directory: What peft's `save_pretrained` wrote for a `LoraConfig(task_type="SEQ_CLS")`
      model of `BertForSequenceClassification`.
    backbone: The base as a keras-hub `BertBackbone`, not adapted yet; it is adapted in
      place. Default `kak.from_tf_hub()` when the artifact names the embedded default.

  Returns:
    A `kak.build_classifier` model (BERT's pooler, dropout, dense) with the LoRA and
    classifier weights.

  Raises:
    PeftError: Files missing, another peft type or task, or options not supported here.
  """
  directory = os.fspath(directory)
  meta, tensors = peft_format.read(directory)
  base = _Base(backbone, meta.get("base_model_name_or_path"), directory,
               peft_format.check_default_base, meta)

  def base_layers(config):
    _check_keras3_config(config, directory, peft_format.PeftError, "keras_adapters.load_peft")
    return len(base.get().transformer_layers)

  config = peft_format.method_config(meta, tensors, directory, base_layers, "backbone")
  backbone = adapt(base.get(), config)
  model = artifacts.build_classifier(backbone, peft_format.num_labels(tensors), pooling="cls")
  peft_format.load_weights(artifacts.task_weights(model), tensors, directory)
  return model


def save_peft(model, directory, *, base_model_name_or_path=None, overwrite=False):
  """Writes a Keras 3 LoRA task as a peft artifact that `PeftModel.from_pretrained` loads.

  The model must be a keras-hub backbone `kak.adapt` changed with a `LoRAConfig`, inside a
  `BertTextClassifier` or a `kak.build_classifier` model of one dense layer on BERT's pooler
  (`pooling="cls"`), with the base's LayerNorms unchanged (peft's LoRA keeps them frozen).

  Args:
    model: The task model.
    directory: Folder to write, as `keras_adapters.save_peft`.
    base_model_name_or_path: The Hugging Face name of the base, recorded for peft; default
      the embedded default's when the backbone is `kak.from_tf_hub()`'s.
    overwrite: Write into a folder that holds files of another kind.

  Returns:
    `directory`.
  """
  peft_format.check_output_folder(directory, overwrite)
  backbone, weights = _unmerged_task(model, "save_peft", peft_format.PeftError)
  head = artifacts.head_config(model, backbone)
  peft_format.check_savable(backbone.adapter_config, head and head["pooling"],
                            head and head["hidden_layers"])
  if _changed_base(backbone):
    raise peft_format.changed_layer_norms_error("the backbone's base fingerprint changed")
  return peft_format.write(
      directory, backbone.adapter_config, len(backbone.transformer_layers),
      peft_format.base_model_name(artifacts.tf_hub_handle(backbone), base_model_name_or_path),
      _values(weights))


def load_adapterhub(directory, backbone=None):
  """Builds the Keras 3 task model of an AdapterHub adapter with its classification head.

  Example:
  ```python
  model = kak.load_adapterhub("my_adapterhub_adapter")  # save_adapter(..., with_head=True)
  ```

  Args:
    directory: What AdapterHub's `save_adapter(directory, name, with_head=True,
      use_safetensors=True)` wrote.
    backbone: The base AdapterHub ran on, as a keras-hub `BertBackbone` not adapted yet (it
      is adapted in place); default `kak.from_tf_hub()` when the artifact names the embedded
      default. Its width and depth are checked against what the artifact records.

  Returns:
    A `kak.build_classifier` model with the adapter set named as AdapterHub named it
    (`model.adapter_name`) and the head's label names (`model.head_config`).

  Raises:
    AdapterHubError: Files missing or pickled, options not supported here or not on Keras 3
      yet (`original_ln_after=False`: `keras_adapters.load_adapterhub` reads it), another base.
  """
  directory = os.fspath(directory)
  adapter = adapterhub_format.read(directory)
  _check_keras3_config(adapter.config, directory, adapterhub_format.AdapterHubError,
                       "keras_adapters.load_adapterhub")
  backbone = _Base(backbone, adapter.meta.get("model_name"), directory,
                   adapterhub_format.check_default_base, adapter.meta).get()
  adapterhub_format.check_base(adapter, directory, _describe(backbone), backbone.hidden_dim,
                               len(backbone.transformer_layers), "backbone")
  adapt(backbone, adapter.config)
  head = adapter.head
  model = artifacts.build_classifier(
      backbone, head["num_classes"], dropout_rate=head["dropout_rate"],
      pooling=head["pooling"], hidden_layers=head["hidden_layers"],
      hidden_activation=head["hidden_activation"])
  model.head_config = dict(model.head_config, label_names=head["label_names"])
  model.adapter_name = adapter.name
  adapterhub_format.load_weights(artifacts.task_weights(model), adapter, backbone.hidden_dim,
                                 directory)
  return model


def save_adapterhub(model, directory, *, model_name=None, layer_norms="error",
                    overwrite=False):
  """Writes a Keras 3 task's adapters and head as an AdapterHub artifact, as
  `keras_adapters.save_adapterhub` does (AdapterHub 1.3 loads it with `load_adapter(directory,
  with_head=True, use_safetensors=True)`).

  Bottleneck adapters train the base's LayerNorms on Keras 3, which an AdapterHub adapter
  cannot carry: such a task is refused unless `layer_norms="file"`, which writes them to
  `base_layer_norms.safetensors` beside it with the PyTorch lines that load them.

  Args:
    model: A `kak.build_classifier` model or keras-hub `BertTextClassifier` on a backbone
      `kak.adapt` changed.
    directory: Folder to write, as `keras_adapters.save_adapterhub`.
    model_name: The Hugging Face name of the base, recorded for AdapterHub; default the
      embedded default's when the backbone is `kak.from_tf_hub()`'s.
    layer_norms: `"error"` (refuse changed LayerNorms) or `"file"` (write them beside).
    overwrite: Write into a folder that holds files of another kind.

  Returns:
    `directory`.
  """
  adapterhub_format.check_layer_norms_option(layer_norms)
  adapterhub_format.check_output_folder(directory, overwrite)
  backbone, weights = _unmerged_task(model, "save_adapterhub",
                                     adapterhub_format.AdapterHubError)
  name = artifacts.adapter_name(model)
  head = artifacts.head_config(model, backbone)
  adapterhub_format.check_savable(name, backbone.adapter_config, head, backbone.hidden_dim)
  changed = _changed_base(backbone)
  adapterhub_format.check_layer_norms(changed and "the base's LayerNorm weights", layer_norms)
  return adapterhub_format.write(
      directory, name, backbone.adapter_config, head, backbone.hidden_dim,
      adapterhub_format.model_name(artifacts.tf_hub_handle(backbone), model_name), _values(weights),
      changed)


class _Base:
  """The backbone a reader adapts: the one given, or, built on first use, the embedded
  default's (`from_tf_hub()`) for an artifact that names it. Either must compute the
  exact GELU when the artifact names the default, as all-MiniLM-L6-v2 does."""

  def __init__(self, backbone, name, directory, check_default_base, meta):
    if backbone is None:
      check_default_base(meta, directory, _BACKBONE_FIX)
    else:
      backbones.check_adaptable(backbone)
    self._backbone = backbone
    self._default = default_model.names_default_base(name)
    self._directory = directory

  def get(self):
    if self._backbone is None:
      self._backbone = tf_hub_bert.from_tf_hub()
    activation = base_weights.activation_name(self._backbone)
    if self._default and activation != "gelu":
      raise errors.UsageError(
          f"The adapter at {self._directory!r} was trained on the embedded default "
          f"(all-MiniLM-L6-v2), whose feed-forward activation is the exact GELU; the backbone "
          f"computes {activation!r} (keras-hub's BertBackbone has the tanh-approximate GELU): "
          "pass backbone=kak.from_tf_hub(), or no backbone.")
    return self._backbone


def _check_keras3_config(config, directory, error, keras2_loader):
  """Refuses, before any work, an artifact whose method the Keras 3 path does not run yet."""
  try:
    check_config(config)
  except errors.UsageError as cause:
    raise error(f"The adapter at {directory!r} does not run on Keras 3 yet: {cause} "
                f"Read it with {keras2_loader} (Keras 2).") from None


def _unmerged_task(model, user, error):
  """The adapted backbone of a task and its weights by task weight key, refusing a backbone
  whose LoRA or (IA)³ layers `kak.merge` folded into its base: it has none left to save."""
  backbone = artifacts.adapted_backbone(model, user)
  weights = artifacts.task_weights(model)
  methods = {spec["method"] for spec in backbone.adapter_config.delta_specs()}
  if methods and not any(f"/{method}/" in key for method in methods for key in weights):
    raise error(f"{user}: the backbone's {' and '.join(sorted(methods))} layers were merged "
                "into its base (kak.merge), so it has no adapter left to save: save before "
                "merging.")
  return backbone, weights


def _changed_base(backbone):
  """Whether the base's weights changed since `adapt`: with the rest frozen, its
  LayerNorms (or a merge, refused before this is asked)."""
  return base_weights.fingerprint(backbone) != backbone.base_fingerprint


def _values(weights):
  return {key: np.asarray(ops.convert_to_numpy(variable)) for key, variable in weights.items()}


def _describe(backbone):
  return artifacts.tf_hub_handle(backbone) or f"the {type(backbone).__name__}"

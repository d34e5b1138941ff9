"""Saving a task model as an adapter artifact and rebuilding it: peft's `save_pretrained` and
`from_pretrained` for `AdaptedBert` models.

The artifact format is `keras_adapters.hub.adapter_artifact`'s: the adapter set, the head,
their configuration and the base's fingerprint, never the base itself.
"""

import dataclasses
import os

import numpy as np

from keras_adapters.hub import adapter_artifact
from keras_adapters.models import adapted_bert as adapted_bert_lib
from keras_adapters.models import classifier
from keras_adapters.networks import adapted_bert_encoder

AdapterArtifactError = adapter_artifact.AdapterArtifactError


def save_adapters(model, directory, metadata=None, *, label_names=None, preprocessing=None,
                  adapter_name=None, overwrite=False):
  """Writes `model`'s task-specific weights and everything needed to rebuild it, atomically.

  Args:
    model: A Keras model containing exactly one `AdaptedBert`.
    directory: Folder to write. An artifact there is replaced; another non-empty folder is
      refused unless `overwrite=True`.
    metadata: Optional JSON-serialisable dict stored with the config (task name...).
    label_names: Class names in logit order, recorded with the head.
    preprocessing: A `PreprocessingConfig` (how the task's text becomes encoder inputs),
      needed to export the task from its artifact alone.
    adapter_name: The adapter set to save; default the one the model was built with
      (`build_classifier`), else the active one.
    overwrite: Replace a non-empty folder that is not an artifact.

  Returns:
    `directory`.
  """
  bert = the_unmerged_bert(model, "save_adapters")
  name = _set_name(model, bert, adapter_name)
  head = getattr(model, "head_config", None)
  if label_names is not None:
    if head is None or len(label_names) != head.num_classes:
      raise ValueError(
          f"label_names={list(label_names)} does not fit the model's head "
          f"({'no build_classifier head' if head is None else f'{head.num_classes} logits'}).")
    head = dataclasses.replace(head, label_names=tuple(label_names))
  tensors = {key: variable.numpy() for key, variable in _task_variables(model, bert, name).items()}
  config = adapter_artifact.task_config(
      base=dict(handle=bert.handle, fingerprint=bert.base_fingerprint,
                activation=bert.activation, dropout_rate=bert.dropout_rate,
                attention_dropout_rate=bert.attention_dropout_rate,
                layer_norm_epsilon=bert.layer_norm_epsilon),
      adapter_name=name, adapter_config=bert.adapter_configs[name],
      head=None if head is None else dataclasses.asdict(head), preprocessing=preprocessing,
      metadata=metadata)
  return adapter_artifact.write_artifact(directory, config, tensors, overwrite=overwrite)


def load_adapters(model, directory, adapter_name=None):
  """Loads an artifact written by `save_adapters` into a model of the same layout.

  Args:
    model: A Keras model built like the saved one, around the same base encoder.
    directory: The artifact folder.
    adapter_name: The adapter set to load into; default as in `save_adapters`.

  Raises:
    AdapterArtifactError: The artifact is missing or corrupt, was trained on another base, or
      its tensors do not fit the model's adapter set and head; or the model was merged.
  """
  bert = the_unmerged_bert(model, f"load_adapters({directory!r})")
  config = adapter_artifact.read_adapter_config(directory)
  adapter_artifact.check_base(config, directory, bert.base_fingerprint, bert.handle)
  tensors = adapter_artifact.read_tensors(directory)
  targets = _task_variables(model, bert, _set_name(model, bert, adapter_name))
  adapter_artifact.check_tensors_fit(
      config, directory, tensors, {key: tuple(v.shape) for key, v in targets.items()})
  for key, variable in targets.items():
    variable.assign(np.asarray(tensors[key]))


def load_task_model(directory, base_handle=None):
  """Rebuilds a whole task model from its artifact and its base (peft's `from_pretrained`).

  Example:
  ```python
  model = keras_adapters.load_task_model("runs/airline/export/adapters")
  logits = model(inputs)       # inputs: the TF Hub BERT input dict
  ```

  Args:
    directory: An artifact written by `save_adapters` from a `build_classifier` model.
    base_handle: The base encoder, if not at the handle the artifact records (another
      machine, a moved cache). It must be the same base: its fingerprint is checked.

  Returns:
    The `build_classifier` model with the artifact's weights, in inference mode unless
    trained further. Its `head_config` has the label names, its `preprocessing_config` the
    recorded `PreprocessingConfig` (or `None`).

  Raises:
    AdapterArtifactError: The artifact is missing, corrupt, of format 1 or without a head, or
      its base is not found or is another model.
  """
  config = adapter_artifact.read_adapter_config(directory)
  adapter_artifact.require_task_description(config, directory, "load_task_model")
  base = config["base"]
  handle = base_handle or base["handle"]
  if base_handle is None and "://" not in handle and not os.path.isdir(handle):
    raise AdapterArtifactError(
        f"The base the artifact at {directory!r} was trained on is not at {handle!r} any more; "
        "pass base_handle= (its fingerprint is checked).")
  bert = adapted_bert_lib.AdaptedBert(
      handle, activation=base["activation"], dropout_rate=base["dropout_rate"],
      attention_dropout_rate=base["attention_dropout_rate"],
      layer_norm_epsilon=base["layer_norm_epsilon"], adapter_config=config["adapter_config"],
      adapter_name=config["adapter_name"])
  head = config["head"]
  model = classifier.build_classifier(
      bert, head["num_classes"], dropout_rate=head["dropout_rate"], pooling=head["pooling"],
      hidden_layers=head.get("hidden_layers", 0),
      hidden_activation=head.get("hidden_activation", "tanh"))
  load_adapters(model, directory)
  label_names = adapter_artifact.label_names(head)
  model.head_config = dataclasses.replace(model.head_config, label_names=label_names)
  model.preprocessing_config = (None if config.get("preprocessing") is None else
                                adapter_artifact.preprocessing_config(config, directory))
  return model


def the_adapted_bert(model):
  """The one `AdaptedBert` in `model` (or `model` itself), or a clear error."""
  found = [m for m in [model] + list(model.submodules)
           if isinstance(m, adapted_bert_lib.AdaptedBert)]
  if len(found) != 1:
    raise AdapterArtifactError(
        f"Adapter artifacts need a model with exactly one AdaptedBert; found {len(found)}.")
  return found[0]


def the_unmerged_bert(model, user, error=AdapterArtifactError):
  """`the_adapted_bert(model)`, or `error` when `keras_adapters.merge` folded its LoRA or
  (IA)^3 layers into the base: its adapter set is gone, so `user` (what wanted it, e.g.
  "save_peft") would write or fill nothing of it."""
  bert = the_adapted_bert(model)
  if bert.merged:
    raise error(
        "The model's LoRA or (IA)^3 layers were merged into its base (keras_adapters.merge), "
        f"so it has no adapter set left for {user}: save the adapters before merging, and "
        "load adapters into a model built anew (e.g. load_task_model).")
  return bert


def _set_name(model, bert, adapter_name):
  """The adapter set a model serves: named, bound by `build_classifier`, or active."""
  return adapter_name or getattr(model, "adapter_name", None) or bert.active_adapter


def task_variables(model):
  """The task's adapter, LayerNorm and head variables of `model`'s set, by artifact keys."""
  bert = the_adapted_bert(model)
  return _task_variables(model, bert, _set_name(model, bert, None))


def _task_variables(model, bert, adapter_name):
  """What makes the task: its adapter set's weights (or, when its tuning trains the base,
  whatever in the encoder trains) and the head, by stable keys.

  Inside the encoder the keys are Model Garden names; head layers get Keras auto-names
  ("dense_3") that differ between processes, so outside the encoder the position among the
  trainable variables identifies a tensor: `head/<i>/<name>`.
  """
  if bert.adapter_configs[adapter_name].trains_base:
    keyed = {adapted_bert_encoder.canonical_variable_name(v.name): v
             for v in bert.trainable_weights}
  else:
    keyed = bert.adapter_weights(adapter_name)
  encoder_ids = {id(w) for w in bert.weights}
  head = [v for v in model.trainable_variables if id(v) not in encoder_ids]
  for index, variable in enumerate(head):
    keyed[f"head/{index}/{variable.name.split(':')[0].rsplit('/', 1)[-1]}"] = variable
  return keyed

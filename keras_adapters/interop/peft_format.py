"""peft's format, apart from any Keras and any one method: its files, names and refusals.

A peft artifact (`get_peft_model(BertForSequenceClassification, <Method>Config(task_type=
"SEQ_CLS", ...)).save_pretrained(dir)`) is a folder with

- `adapter_config.json`: the method's config (`peft_type`, its own options,
  `target_modules` as names or a regex, `layers_to_transform`, `modules_to_save`, ...) and
  `base_model_name_or_path`;
- `adapter_model.safetensors`: `base_model.model.bert.encoder.layer.<i>.<module>.<tensor>`
  per wrapped module and tensor of the method, `bert.pooler.dense`'s (peft's "dense" matches
  it; the target `"pooler"` here) too, and the classifier, saved whole (`modules_to_save`):
  `base_model.model.classifier.weight` / `.bias`.

Both stacks' `load_peft` and `save_peft` (`interop.peft` on Keras 2, `keras3.interop` on
Keras 3) use this module: it maps the library's task weight keys
(`transformer/layer_0/query/<method>/<weight>`, `head/0/kernel`) to peft's tensor names, so a
reader only builds the model and hands over its variables by key. What this module shares
across methods is peft's shared save and load code; the method's own part, as peft's
`tuners/<method>/`, is its folder's `peft.py`, found through the method registry: its
`PEFT_TYPE`, `NAME` (in messages), `TENSORS` (its weights' peft names), `PLAIN_OPTIONS` (its
config's options this library does not implement, with their plain values),
`config_from_peft`, `config_to_peft`, and the checks `check_config(meta)` and
`check_tensors(meta, modules, files)`, which refuse with a `ValueError`.
"""

import dataclasses
import importlib
import importlib.util
import os
import re
from typing import NamedTuple

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import default_model
from keras_adapters.interop import safetensors_files
from keras_adapters.methods import projections
from keras_adapters.methods import registry
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
# The peft version whose format is written.
PEFT_VERSION = "0.21.2"
# Our projections → BERT's module paths inside `bert.encoder.layer.<i>`.
_MODULES = {"query": "attention.self.query", "key": "attention.self.key",
            "value": "attention.self.value", "attention_output": "attention.output.dense",
            "intermediate": "intermediate.dense", "output": "output.dense"}
# BERT's pooler projection, the target "pooler".
_POOLER_MODULE = "bert.pooler.dense"
_SELF_ATTENTION = ("query", "key", "value")
# The targets whose BERT modules are named "dense", all of which peft's "dense" matches.
_DENSE = frozenset({"attention_output", "intermediate", "output", projections.POOLER})
_PREFIX = "base_model.model."


def _the_peft_method():
  """The registered method peft's adapters are: its `Method` and its folder's `peft.py`."""
  found = []
  for method in registry.methods():
    module = method.config_class.__module__.rpartition(".")[0] + ".peft"
    if importlib.util.find_spec(module) is not None:
      found.append((method, importlib.import_module(module)))
  if len(found) != 1:
    raise ImportError(f"peft's format reads one method; {len(found)} have a peft.py.")
  return found[0]


_METHOD, _METHOD_PEFT = _the_peft_method()
# A wrapped module's tensor of the method: its module's full name, its block (none for the
# pooler's) and which tensor.
_METHOD_TENSOR = re.compile(
    r"base_model\.model\.(bert\.encoder\.layer\.(\d+)\.[\w.]+|bert\.pooler\.dense)\.("
    + "|".join(re.escape(name) for name in _METHOD_PEFT.TENSORS.values()) + ")")
# A task weight key of one of the method's weights, in a block or on the pooler.
_METHOD_KEY = re.compile(
    rf"(?:transformer/layer_(\d+)/(\w+)|pooler_transform)/{_METHOD.name}/"
    rf"({'|'.join(_METHOD_PEFT.TENSORS)})")
# peft's name of each of the method's weights → ours.
_WEIGHTS = {name: weight for weight, name in _METHOD_PEFT.TENSORS.items()}
_CLASSIFIER = ("classifier.weight", "classifier.bias")


class Files(NamedTuple):
  """Where an artifact's messages say a problem is: its `folder`, its `config` file's name
  and its `weights` file's path."""
  folder: str
  config: str
  weights: str


class PeftError(errors.UsageError):
  """A peft artifact that cannot be read or written exactly; the message says why."""


def read(directory):
  """The parsed config and the tensors of the peft artifact at `directory`, after checking
  that the folder holds no other kind of adapter."""
  meta = _read_config(directory)
  adapter_artifact.check_input_folder(directory, adapter_artifact.PEFT, meta, PeftError)
  return meta, _read_tensors(directory)


def check_default_base(meta, directory, fix):
  """Refuses an artifact trained on another base than the embedded default, which a reader
  given no base would build; `fix` says which argument to pass instead."""
  name = str(meta.get("base_model_name_or_path") or "")
  if not default_model.names_default_base(name):
    raise PeftError(f"The adapter at {directory!r} was trained on "
                    f"{name or 'an unrecorded base'!r}, not the embedded default: pass {fix}.")


def num_labels(tensors):
  """The classes of the artifact's classifier (`method_config` checked it is whole)."""
  return tensors[_PREFIX + "classifier.bias"].shape[0]


def load_weights(variables, tensors, directory):
  """Assigns the artifact's method tensors and classifier to the task's `variables` (by task
  weight key; the base's LayerNorms among them are left alone: peft keeps them frozen)."""
  names = _peft_names(variables)
  missing = sorted(set(names.values()) - set(tensors))
  if missing:
    raise PeftError(f"'{directory}/{WEIGHTS_FILE}' has no {missing[0]!r}"
                    + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
                    + ", which its other tensors and config call for: the file is incomplete. "
                    "Copy it again, or save the adapter again with peft's save_pretrained.")
  for key, name in names.items():
    variable, value = variables[key], np.ascontiguousarray(tensors[name].T)
    if tuple(variable.shape) != value.shape:
      raise PeftError(f"Tensor {name!r} of {directory!r} has shape {value.shape[::-1]}, "
                      f"the model needs {tuple(variable.shape)[::-1]}: the artifact was made "
                      "for another base.")
    variable.assign(value)


def check_savable(config, pooling, hidden_layers):
  """Refuses a task that peft cannot load as an adapted `BertForSequenceClassification`:
  another method, a config that peft cannot represent, another head than one dense layer on
  BERT's pooler (`pooling`, `hidden_layers`: the head's; `None` for a model without a head)."""
  if not isinstance(config, _METHOD.config_class):
    raise PeftError(f"save_peft writes {_METHOD.config_class.__name__} adapters (peft's "
                    f"{_METHOD_PEFT.PEFT_TYPE}); this model's adapter set is "
                    f"{type(config).__name__}.")
  _checked(_METHOD_PEFT.config_to_peft, config)
  if pooling != "cls" or hidden_layers:
    raise PeftError("save_peft writes BertForSequenceClassification's head: one dense layer "
                    "on BERT's pooler. Build the model with build_classifier(..., "
                    "pooling='cls', hidden_layers=0).")


def changed_layer_norms_error(example):
  """The refusal of a task whose training changed the base's LayerNorms (`example`: which)."""
  return PeftError(f"Training changed the base's LayerNorms ({example}), which a peft "
                   f"{_METHOD_PEFT.NAME} adapter cannot carry: train with "
                   "train_layer_norms=False.")


def check_output_folder(directory, overwrite):
  """Refuses a folder holding files of another kind, unless `overwrite`."""
  adapter_artifact.check_output_folder(directory, adapter_artifact.PEFT, overwrite, PeftError)


def write(directory, config, num_layers, base_name, values):
  """Writes a peft artifact of a `num_layers`-layer BERT with the method's `config`, from the
  task's weight `values` (NumPy, by task weight key; keys that peft does not hold are left
  out)."""
  names = _peft_names(values)
  tensors = {names[key]: np.ascontiguousarray(values[key].T) for key in names}
  meta = _peft_config(config, num_layers, base_name)
  with atomic_io.atomic_directory(directory, marker=CONFIG_FILE) as staging:
    atomic_io.write_json(os.path.join(staging, CONFIG_FILE), meta)
    atomic_io.write_bytes(os.path.join(staging, WEIGHTS_FILE),
                          safetensors_numpy.save(tensors, {"format": "pt"}))
  return directory


def base_model_name(handle, given):
  """The Hugging Face name peft records for a base loaded from `handle`: `given`, or the
  embedded default's when `handle` is it."""
  if given:
    return given
  if handle and default_model.is_default_base(handle):
    return default_model.DEFAULT_HF_NAME
  raise PeftError(f"peft records the Hugging Face name of the base; {handle or 'the base'!r} "
                  "is not the embedded default, so pass base_model_name_or_path=.")


def _peft_names(keys):
  """Our task weight key → peft's tensor name, for the method's weights and the classifier."""
  names = {}
  for key in keys:
    match = _METHOD_KEY.fullmatch(key)
    if match:
      layer, target, weight = match.groups()
      names[key] = (f"{_PREFIX}{module_name(target or projections.POOLER, layer)}."
                    + _METHOD_PEFT.TENSORS[weight])
    elif key.startswith("head/"):
      names[key] = _PREFIX + ("classifier.weight" if key.endswith("/kernel")
                              else "classifier.bias")
  return names


def module_name(target, layer):
  """BERT's full module name (`bert.encoder.layer.3.attention.self.query`,
  `bert.pooler.dense`) of our projection `target` in block `layer`."""
  if target == projections.POOLER:
    return _POOLER_MODULE
  return f"bert.encoder.layer.{layer}.{_MODULES[target]}"


def module_names(config, num_layers):
  """BERT's module names that `config` (the method's) adapts, as peft names them."""
  return sorted(module_name(target, layer) for target in config.target_modules
                for layer in ([None] if target == projections.POOLER else
                              [i for i in range(num_layers) if i not in config.leave_out]))


def _target_of(module):
  """Our projection of BERT's module `module` (a full name), or `None`."""
  if module == _POOLER_MODULE:
    return projections.POOLER
  inner = re.sub(r"^bert\.encoder\.layer\.\d+\.", "", module)
  return {m: t for t, m in _MODULES.items()}.get(inner)


def method_config(meta, tensors, directory, base_layers, base_argument):
  """The method's config of a peft config, with the wrapped modules read from the tensors and
  checked against the config. `base_layers(config)` gives the base's number of layers: it
  is asked last, with the config read so far (all but `leave_out`), so that a reader can
  refuse the config before it builds the base. `base_argument` is the reader's argument that
  gives the base."""
  name = _METHOD_PEFT.NAME
  if meta.get("peft_type") != _METHOD_PEFT.PEFT_TYPE:
    raise PeftError(f"{directory!r} is a peft {meta.get('peft_type')!r} adapter; {name} "
                    f"(peft_type {_METHOD_PEFT.PEFT_TYPE!r}) is supported here.")
  if meta.get("task_type") != "SEQ_CLS":
    raise PeftError(f"{directory!r} adapts a {meta.get('task_type')!r} model; sequence "
                    "classification (task_type 'SEQ_CLS') is supported here.")
  for option, plain in _METHOD_PEFT.PLAIN_OPTIONS.items():
    if meta.get(option, plain) not in (plain, None) or (plain is None and meta.get(option)):
      raise PeftError(f"The adapter uses peft's {option}={meta[option]!r}, which this library "
                      f"does not implement; convert a plain {name} adapter "
                      f"({option}={plain!r}).")
  _checked(_METHOD_PEFT.check_config, meta)
  _check_classifier(tensors, directory)
  modules, layers, pooler = _method_modules(meta, tensors, directory)
  targets = set().union(*layers.values()) if layers else set()
  uneven = [layer for layer, found in layers.items() if found != targets]
  if not layers or uneven:
    raise PeftError(f"{directory!r} has {name} on {sorted(targets | pooler) or 'no module'}"
                    + (f" but not on all of them in layers {sorted(uneven)}" if uneven else "")
                    + "; this library applies one set of target modules to every layer.")
  try:
    config = _METHOD_PEFT.config_from_peft(meta, targets | pooler)
  except (KeyError, ValueError) as error:
    raise PeftError(f"The peft config of {directory!r} cannot be reproduced: {error}") from None
  _checked(_METHOD_PEFT.check_tensors, meta, modules,
           Files(directory, CONFIG_FILE, f"{directory}/{WEIGHTS_FILE}"))
  # The layers without the method's tensors, the last ones too: the base says how many it has.
  num_layers = base_layers(config)
  if max(layers) >= num_layers:
    raise PeftError(f"{directory!r} has {name} in layer {max(layers)}; the base has "
                    f"{num_layers} layers. Pass its own base as {base_argument}.")
  return dataclasses.replace(
      config, leave_out=tuple(i for i in range(num_layers) if i not in layers))


def _check_classifier(tensors, directory):
  """Refuses an artifact without a whole classifier, or with one whose weight and bias
  disagree."""
  missing = [name for name in _CLASSIFIER if _PREFIX + name not in tensors]
  if missing:
    raise PeftError(f"{directory!r} holds no classifier ({_PREFIX}{missing[0]}): save the "
                    "peft model with modules_to_save=['classifier'] (task_type='SEQ_CLS' does).")
  weight, bias = (tensors[_PREFIX + name] for name in _CLASSIFIER)
  if weight.ndim != 2 or bias.shape != weight.shape[:1]:
    raise PeftError(f"'{directory}/{WEIGHTS_FILE}' holds a classifier whose weight has shape "
                    f"{list(weight.shape)} (a row per class) but whose bias has shape "
                    f"{list(bias.shape)}: the two disagree, so the file was edited or mixed "
                    "from two adapters. Save the adapter again with peft's save_pretrained.")


def _method_modules(meta, tensors, directory):
  """The method's tensors by module (`{"<prefix><module>": {weight: array}}`), our targets
  they wrap by block and on the pooler, after refusing a tensor that is neither the method's
  on a module here that the config wraps nor the classifier's."""
  modules, layers, pooler = {}, {}, set()
  for name in sorted(tensors):
    match = _METHOD_TENSOR.fullmatch(name)
    if match:
      module, layer, weight = match.groups()
      target = _target_of(module)
      if target is None:
        raise PeftError(f"{name!r}: {_METHOD_PEFT.NAME} on BERT's {module!r} has no "
                        f"equivalent here (the encoder blocks' {sorted(_MODULES.values())} "
                        f"and {_POOLER_MODULE!r} do).")
      if not _peft_targets(meta, module, None if layer is None else int(layer)):
        raise PeftError(
            f"{directory!r} holds {name!r}, but its config's target_modules="
            f"{meta.get('target_modules')!r} (layers_to_transform="
            f"{meta.get('layers_to_transform')!r}) does not wrap that module: peft would "
            "ignore the tensor. Save the adapter again with peft.")
      modules.setdefault(_PREFIX + module, {})[_WEIGHTS[weight]] = tensors[name]
      if layer is None:
        pooler.add(target)
      else:
        layers.setdefault(int(layer), set()).add(target)
    elif not name.startswith(_PREFIX + "classifier."):
      raise PeftError(f"{directory!r} holds {name!r}, which is not {_METHOD_PEFT.NAME} on "
                      "BERT's encoder blocks, its pooler or the classifier.")
  return modules, layers, pooler


def _checked(check, *args):
  """`check(*args)`, one of the method's, with its `ValueError` as a `PeftError`."""
  try:
    return check(*args)
  except ValueError as error:
    raise PeftError(str(error)) from None


def _peft_targets(meta, module, layer):
  """Whether peft's config wraps `module` (a full name, `bert.encoder.layer.3.output.dense`)
  of block `layer`, as peft's `check_target_module_exists` decides: `exclude_modules` and
  `target_modules` as a regex matched whole or as names matched by their last parts, and
  then `layers_to_transform`."""
  excluded = meta.get("exclude_modules")
  if isinstance(excluded, str) and re.fullmatch(excluded, module) or (
      isinstance(excluded, list) and any(module == e or module.endswith("." + e)
                                         for e in excluded)):
    return False
  targets = meta.get("target_modules")
  if isinstance(targets, str):
    return re.fullmatch(targets, module) is not None
  targets = targets or ()
  if module in targets:
    return True
  if not any(module.endswith("." + t) for t in targets):
    return False
  kept = meta.get("layers_to_transform")
  if kept is None or kept == []:
    return True
  return layer in ([kept] if isinstance(kept, int) else kept)


def _peft_config(config, num_layers, base_name):
  """peft's config dict of the method's `config` on a `num_layers`-layer BERT."""
  kept = [i for i in range(num_layers) if i not in config.leave_out]
  modules = [_MODULES[t] for t in config.target_modules if t != projections.POOLER]
  pooled = projections.POOLER in config.target_modules
  # peft matches names by their last parts: "query" the attention's, "dense" every dense
  # layer (the attention output's, the feed-forward's two and the pooler's), "pooler.dense"
  # the pooler's. Other sets of modules, and a subset of the layers, are given as a regex
  # over the full module names.
  dense = {t for t in config.target_modules if t not in _SELF_ATTENTION}
  names = {frozenset(): [], frozenset({projections.POOLER}): ["pooler.dense"],
           _DENSE: ["dense"]}.get(frozenset(dense))
  target_modules = ([_MODULES[t].rsplit(".", 1)[1] for t in config.target_modules
                     if t in _SELF_ATTENTION] + names
                    if names is not None and not config.leave_out else
                    r"bert\.encoder\.layer\.(" + "|".join(map(str, kept)) + r")\.("
                    + "|".join(re.escape(m) for m in modules) + ")"
                    + ("|" + re.escape(_POOLER_MODULE)) * pooled)
  return dict(
      _METHOD_PEFT.PLAIN_OPTIONS,
      **_METHOD_PEFT.config_to_peft(config), task_type="SEQ_CLS", peft_version=PEFT_VERSION,
      base_model_name_or_path=base_name, target_modules=target_modules,
      layers_to_transform=None, layers_pattern=None, modules_to_save=["classifier", "score"],
      exclude_modules=None, inference_mode=True, revision=None, auto_mapping=None)


def _read_config(directory):
  path = os.path.join(directory, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise PeftError(f"{directory!r} has no {CONFIG_FILE} (a peft adapter's config); give the "
                    "folder peft's save_pretrained wrote.")
  try:
    return atomic_io.read_json(path)
  except ValueError as error:
    raise PeftError(f"{path!r} is not valid JSON: {error}.") from None


def _read_tensors(directory):
  path = os.path.join(directory, WEIGHTS_FILE)
  if not tf.io.gfile.exists(path):
    pickled = os.path.join(directory, "adapter_model.bin")
    raise PeftError(f"{directory!r} has no {WEIGHTS_FILE}"
                    + (" but a pickled adapter_model.bin, which is not read (loading it runs "
                       "code)" if tf.io.gfile.exists(pickled) else "")
                    + ": save with save_pretrained(..., safe_serialization=True).")
  return safetensors_files.read_safetensors(
      path, PeftError, "save it again with save_pretrained(..., safe_serialization=True).")

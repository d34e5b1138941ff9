"""The AdapterHub format, apart from any Keras: its files, names, configs and refusals.

An AdapterHub artifact (`model.save_adapter(dir, name, with_head=True, use_safetensors=True)`)
is a folder with

- `adapter_config.json`: `{"config": <its BnConfig as a dict>, "name", "model_type",
  "model_name", "model_class", "hidden_size", "version"}`;
- `adapter.safetensors`: the adapters, PyTorch names and layouts
  (`bert.encoder.layer.<i>.attention.output.adapters.<name>.adapter_down.0.weight`,
  `[out, in]`);
- `head_config.json` and `model_head.safetensors`: the prediction head
  (`heads.<name>.<index>.weight`, an `nn.Sequential` of Dropout / Linear / activation).

Both stacks' `load_adapterhub` and `save_adapterhub` (`interop.adapterhub` on Keras 2,
`keras3.interop` on Keras 3) use this module: it maps the library's task weight keys
(`transformer/layer_0/attention_adapter/down_project/kernel`, `head/0/kernel`) to AdapterHub's
tensor names and layouts, so a reader only builds the model and hands over its variables by
key. AdapterHub's LoRA family is `adapterhub_lora`'s.
"""

import contextlib
import os
import re
from typing import NamedTuple

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import default_model
from keras_adapters.interop import adapterhub_lora
from keras_adapters.interop import safetensors_files
from keras_adapters.methods.adapters import options as adapter_options
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter.safetensors"
HEAD_CONFIG_FILE = "head_config.json"
HEAD_WEIGHTS_FILE = "model_head.safetensors"
# The base's LayerNorms, when the tuning changed them (`save_adapterhub(layer_norms="file")`).
LAYER_NORMS_FILE = "base_layer_norms.safetensors"
LAYER_NORMS_README = "BASE_LAYER_NORMS.md"
# AdapterHub's pickled files: refused, loading them would run code.
_PICKLED_FILES = ("pytorch_adapter.bin", "pytorch_model_head.bin")
_FUSION_FILE = "adapter_fusion_config.json"
# The AdapterHub version whose format is written; its loader reads the activation names
# as they are only when a version is recorded.
ADAPTERHUB_VERSION = "adapters.1.3.0"
# The embedded default base, as AdapterHub names it.
DEFAULT_BASE_NAME = default_model.DEFAULT_HF_NAME

# AdapterHub activation names (transformers' `get_activation`) → Keras names. Artifacts
# without a version use AdapterHub's old names, which it renames on load the same way.
_ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu": "gelu",
                "tanh": "tanh"}
_LEGACY_ACTIVATIONS = {"gelu": "gelu_new", "gelu_orig": "gelu"}
# Our adapter slots → the BERT sub-module AdapterHub puts them in.
_SLOT_MODULES = {"attention_adapter": "attention.output", "feedforward_adapter": "output"}
# Options that change what an adapter computes and have no equivalent here, with the value
# AdapterHub's plain bottleneck adapters have.
_UNSUPPORTED = {"phm_layer": False, "inv_adapter": None, "use_gating": False}
# BnConfig keys read apart from the placement options.
_READ_KEYS = ("non_linearity", "reduction_factor", "leave_out", "architecture")
# BnConfig keys that change nothing at inference: dropout and initialisation (training in
# PyTorch), cross-attention adapters (BERT has no cross-attention), and the settings of the
# refused PHM layers and invertible adapters.
_INFERENCE_NEUTRAL = ("dropout", "stochastic_depth", "init_weights", "init_weights_seed",
                      "cross_adapter", "inv_adapter_reduction_factor", "factorized_phm_W",
                      "shared_W_phm", "shared_phm_rule", "factorized_phm_rule", "phm_c_init",
                      "phm_init_range", "learn_phm", "hypercomplex_nonlinearity", "phm_rank",
                      "phm_bias", "phm_dim")
# A weight of the base's LayerNorms (the embedding one, each block's two) by task weight key.
_BASE_LAYER_NORM = re.compile(r"(?:embeddings/layer_norm|transformer/layer_\d+/"
                              r"(?:self_attention_layer_norm|output_layer_norm))/(?:gamma|beta)")


class AdapterHubError(errors.UsageError):
  """An AdapterHub artifact that cannot be read or written exactly; the message says why."""


class Adapter(NamedTuple):
  """An AdapterHub artifact as read: its adapter's name, `adapter_config.json` (parsed),
  the library's config of the adapter, the head's fields (`HeadConfig`'s) and the tensors of
  both safetensors files by AdapterHub's names."""
  name: str
  meta: dict
  config: object
  head: dict
  tensors: dict


def read(directory):
  """The AdapterHub artifact at `directory` (an `Adapter`), or a clear error: files missing
  or pickled, a fusion, another kind of adapter, options not supported here."""
  meta = _read_json(directory, CONFIG_FILE, "an AdapterHub adapter")
  adapter_artifact.check_input_folder(directory, adapter_artifact.ADAPTERHUB, meta,
                                      AdapterHubError)
  head_meta = _read_json(directory, HEAD_CONFIG_FILE, "its head (save it with_head=True)")
  if tf.io.gfile.exists(os.path.join(directory, _FUSION_FILE)):
    raise AdapterHubError(f"{directory!r} holds an AdapterFusion ({_FUSION_FILE}); fusion is "
                          "not supported here: save and convert the single adapters.")
  name = meta.get("name")
  if not isinstance(name, str) or not name:
    raise AdapterHubError(f"{os.path.join(directory, CONFIG_FILE)!r} records no adapter name; "
                          "its tensors are named after it. Re-save the adapter with adapters 1.x.")
  config = adapter_config_from_adapterhub(meta)
  tensors = _read_tensors(directory, WEIGHTS_FILE)
  head = head_from_adapterhub(head_meta, directory)
  tensors.update(_read_tensors(directory, HEAD_WEIGHTS_FILE))
  return Adapter(name, meta, config, head, tensors)


def check_default_base(meta, directory, fix):
  """Refuses an artifact trained on another base than the embedded default, which a reader
  given no base would build; `fix` says which argument to pass instead."""
  name = str(meta.get("model_name") or "")
  if not default_model.names_default_base(name):
    raise AdapterHubError(f"The adapter at {directory!r} was trained on "
                          f"{name or 'an unrecorded base'!r}, not the embedded default: pass "
                          f"{fix}.")


def check_base(adapter, directory, base, hidden_size, num_layers, base_argument):
  """Raises unless the base (`base` names it, of `hidden_size` and `num_layers`) matches
  what AdapterHub recorded (type, width, depth); `base_argument` gives another base."""
  model_type = adapter.meta.get("model_type")
  if model_type not in (None, "bert"):
    raise AdapterHubError(
        f"The adapter at {directory!r} was trained on a {model_type!r} model; this library "
        "runs BERT encoders.")
  hidden = adapter.meta.get("hidden_size")
  if hidden is not None and hidden != hidden_size:
    raise AdapterHubError(
        f"The adapter at {directory!r} was trained on a base of hidden size {hidden}; "
        f"{base!r} has {hidden_size}. Pass its own base as {base_argument}.")
  layers = [int(i) for i in re.findall(r"encoder\.layer\.(\d+)\.", " ".join(adapter.tensors))]
  if layers and max(layers) >= num_layers:
    raise AdapterHubError(
        f"The adapter at {directory!r} has adapters in layer {max(layers)}; {base!r} "
        f"has {num_layers} layers. Pass its own base as {base_argument}.")


def load_weights(variables, adapter, hidden_size, directory):
  """Assigns the artifact's adapters and head to the task's `variables` (by task weight key;
  the base's LayerNorms among them are left alone: they are the base's in AdapterHub),
  after checking that its tensors fit its own configs and the model."""
  tensors = dict(adapter.tensors)
  names = _adapterhub_names(variables, adapter.config, adapter.head["hidden_layers"],
                            adapter.name)
  aliases = _aliases_by_key(names)
  for key, alias in aliases.items():
    if names[key] not in tensors and alias in tensors:
      tensors[names[key]] = tensors[alias]
  extra = sorted(set(tensors) - set(names.values()) - set(aliases.values()))
  missing = sorted(set(names.values()) - set(tensors))
  unwrapped = [(t, adapterhub_lora.missing_option(t, adapter.meta["config"])) for t in extra]
  unwrapped = [(tensor, option) for tensor, option in unwrapped if option]
  if unwrapped:
    tensor, option = unwrapped[0]
    raise AdapterHubError(
        f"'{directory}/{WEIGHTS_FILE}' holds {tensor!r}, but its {CONFIG_FILE} does not ask "
        f"for LoRA there: AdapterHub would ignore the tensor. Set AdapterHub's {option} in "
        "that config if the adapter was trained so, or re-save it with adapters 1.x.")
  if missing or extra:
    raise AdapterHubError(
        f"The tensors of {directory!r} do not fit its own config: missing {missing[:4]}, "
        f"unexpected {extra[:4]}. Re-save it with adapters 1.x (save_adapter with_head=True).")
  _check_sizes(adapter.config, adapter.head, tensors, hidden_size, directory)
  for key, pytorch_name in names.items():
    variable = variables[key]
    value = _from_pytorch(key, tensors[pytorch_name], adapter.meta["config"])
    if tuple(variable.shape) != value.shape:
      raise AdapterHubError(
          f"Tensor {pytorch_name!r} of {directory!r} has shape {value.shape}, the model needs "
          f"{tuple(variable.shape)}: the artifact was made for another base.")
    variable.assign(value)


def check_layer_norms_option(layer_norms):
  if layer_norms not in ("error", "file"):
    raise AdapterHubError(f"layer_norms={layer_norms!r}: pass 'error' or 'file'.")


def check_output_folder(directory, overwrite):
  """Refuses a folder holding files of another kind, unless `overwrite`."""
  adapter_artifact.check_output_folder(directory, adapter_artifact.ADAPTERHUB, overwrite,
                                       AdapterHubError)


def check_savable(name, config, head, hidden_size):
  """Refuses a task AdapterHub cannot load: a tuning that changes the base, no adapters, or
  a head (`HeadConfig`'s fields, `None` for none) that AdapterHub has no head for."""
  no_modules = config.bottleneck_size(hidden_size) is None and not config.delta_specs()
  if config.trains_base or no_modules:
    raise AdapterHubError(
        f"Adapter set {name!r} has tuning={config.tuning!r}"
        + (" and no adapters" if no_modules else "")
        + ": an AdapterHub bottleneck adapter carries adapters and a head, not base weights. "
        "Export models trained with tuning='adapters'.")
  if head is None or head["kind"] != "classifier" or head["pooling"] == "mean":
    raise AdapterHubError(
        "save_adapterhub writes AdapterHub classification heads, which read the first token "
        "(pooling='first_token') or the pooler (pooling='cls'); this model's head is "
        f"{head and (head['kind'], head['pooling'])}, which AdapterHub has no head for. Build "
        "it with build_classifier and one of those poolings (the training scripts: "
        "--pooling=first_token or --pooling=cls).")


def check_layer_norms(changed, layer_norms):
  """Refuses a task whose training changed the base's LayerNorms (`changed` says which, or
  is empty), unless `layer_norms="file"` writes them beside the adapter."""
  if changed and layer_norms == "error":
    raise AdapterHubError(
        f"Training changed {changed}; an AdapterHub adapter cannot carry them, and without "
        "them it would predict differently. Pass layer_norms='file' to write them beside the "
        f"adapter ({LAYER_NORMS_FILE}, with how to load them), or train with LayerNorms "
        "frozen.")


def model_name(handle, given):
  """The Hugging Face name AdapterHub records for a base loaded from `handle`: `given`, or
  the embedded default's when `handle` is it."""
  if given:
    return given
  if handle and default_model.is_default_base(handle):
    return DEFAULT_BASE_NAME
  raise AdapterHubError(
      f"AdapterHub records the Hugging Face name of the base; {handle or 'the base'!r} is not "
      "the embedded default, so pass model_name= (e.g. 'bert-base-uncased').")


def write(directory, name, config, head, hidden_size, base_name, values, with_layer_norms):
  """Writes the AdapterHub artifact of adapter `name` (`config`, a head of `HeadConfig`'s
  fields) on a base `base_name` of `hidden_size`, from the task's weight `values` (NumPy, by
  task weight key); `with_layer_norms` also writes the base's LayerNorms among them."""
  names = _adapterhub_names(values, config, head["hidden_layers"], name)
  tensors = {names[key]: _to_pytorch(key, values[key]) for key in names}
  for key, alias in _aliases_by_key(names).items():
    tensors[alias] = tensors[names[key]]
  heads = {key: value for key, value in tensors.items() if key.startswith("heads.")}
  adapters = {key: value for key, value in tensors.items() if not key.startswith("heads.")}
  meta = dict(model_name=base_name, model_class="BertAdapterModel", model_type="bert",
              hidden_size=hidden_size, name=name, version=ADAPTERHUB_VERSION)
  with atomic_io.atomic_directory(directory, marker=CONFIG_FILE) as staging:
    _write_json(staging, CONFIG_FILE, dict(meta, config=adapterhub_config(config, hidden_size)))
    _write_json(staging, HEAD_CONFIG_FILE, dict(meta, config=_head_to_adapterhub(head)))
    _write_tensors(staging, WEIGHTS_FILE, adapters)
    _write_tensors(staging, HEAD_WEIGHTS_FILE, heads)
    if with_layer_norms:
      _write_tensors(staging, LAYER_NORMS_FILE,
                     {_huggingface_layer_norm_name(key): value for key, value in values.items()
                      if _BASE_LAYER_NORM.fullmatch(key)})
      atomic_io.write_text(os.path.join(staging, LAYER_NORMS_README),
                           _LAYER_NORMS_HOWTO.format(file=LAYER_NORMS_FILE))
  if not with_layer_norms:  # An earlier save's LayerNorms would no longer belong to this adapter.
    for stale in (LAYER_NORMS_FILE, LAYER_NORMS_README):
      atomic_io.remove(os.path.join(directory, stale))
  return directory


def _adapterhub_names(keys, config, hidden_layers, name):
  """Our task tensor key → its AdapterHub (PyTorch) name, for the adapters and the head (the
  set's LayerNorms are the base's in AdapterHub)."""
  names = {}
  head_linear = _head_linear_indices(hidden_layers)
  for key in keys:
    if key.startswith("head/"):
      _, index, part = key.split("/")
      layer = head_linear[int(index) // 2]
      names[key] = f"heads.{name}.{layer}.{'weight' if part == 'kernel' else 'bias'}"
      continue
    with _as_adapterhub_error():
      projection_name = adapterhub_lora.tensor_name(key, name)
    if projection_name:
      names[key] = projection_name
      continue
    match = _ADAPTER_KEY.fullmatch(key)
    if match:
      layer, slot, module, part = match.groups()
      prefix = f"bert.encoder.layer.{layer}.{_SLOT_MODULES[slot]}.adapters.{name}"
      names[key] = f"{prefix}.{_adapter_module_name(module, config.ln_before)}.{_PARTS[part]}"
  return names


def adapter_config_from_adapterhub(meta):
  """The `AdapterConfig` of an AdapterHub `adapter_config.json` (parsed), or a clear error."""
  config = meta.get("config")
  if not isinstance(config, dict):
    raise AdapterHubError(
        f"adapter_config.json records the config {config!r}, not a bottleneck adapter's "
        "options; re-save the adapter with adapters 1.x.")
  architecture = config.get("architecture") or "bottleneck"
  if architecture == "lora":
    with _as_adapterhub_error():
      return adapterhub_lora.config_from_adapterhub(config)
  if architecture != "bottleneck":
    raise AdapterHubError(
        f"The adapter is AdapterHub architecture {architecture!r} (prefix tuning, a "
        "ConfigUnion...); bottleneck adapters (DoubleSeqBnConfig, SeqBnConfig, ParBnConfig "
        "and their options), LoRAConfig and IA3Config are supported here.")
  for option, plain in _UNSUPPORTED.items():
    if config.get(option, plain) != plain:
      raise AdapterHubError(
          f"The adapter uses AdapterHub's {option}={config[option]!r} (Compacter/PHM layers, "
          "invertible adapters, gating), which this library does not implement; convert a "
          f"plain bottleneck adapter ({option}={plain!r}).")
  known = (set(adapter_options.ADAPTER_OPTIONS) | set(_READ_KEYS) | set(_INFERENCE_NEUTRAL)
           | set(_UNSUPPORTED))
  unknown = sorted(set(config) - known)
  if unknown:
    raise AdapterHubError(f"Unknown AdapterHub options {unknown}: not a bottleneck adapter's "
                          "config this library can reproduce.")
  if not isinstance(config.get("scaling", 1.0), (int, float)):
    raise AdapterHubError(f"scaling={config['scaling']!r} (a learned scaling) is not supported "
                          "here; convert an adapter with a constant scaling.")
  activation = str(config.get("non_linearity", "relu")).lower()
  if "version" not in meta:
    activation = _LEGACY_ACTIVATIONS.get(activation, activation)
  if activation not in _ACTIVATIONS:
    raise AdapterHubError(f"non_linearity={activation!r} is not supported here; supported: "
                          f"{sorted(_ACTIVATIONS)}.")
  options = {option: config.get(option, default)
             for option, default in adapter_options.ADAPTER_OPTIONS.items()}
  if options["is_parallel"]:
    # AdapterHub's parallel adapters ignore these (its ParallelAdapter reads the sub-layer's
    # input and has no skip of its own): their defaults say the same here.
    options.update(original_ln_before=False, residual_before_ln=True,
                   adapter_residual_before_ln=False)
  try:
    return adapter_config_lib.AdapterConfig(
        activation=_ACTIVATIONS[activation],
        reduction_factor=_reduction_factor(config.get("reduction_factor", 16)),
        leave_out=tuple(config.get("leave_out") or ()), **options)
  except ValueError as error:
    raise AdapterHubError(f"The AdapterHub config cannot be reproduced: {error}") from error


def adapterhub_config(config, hidden_size):
  """An AdapterHub config dict equivalent to `config` for an encoder of `hidden_size`: a
  `BnConfig`'s for an `AdapterConfig`, a `LoRAConfig`'s or `IA3Config`'s for those."""
  if not isinstance(config, adapter_config_lib.AdapterConfig):
    with _as_adapterhub_error():
      return adapterhub_lora.config_to_adapterhub(config)
  size = config.bottleneck_size(hidden_size)
  rate = config.reduction_factor or hidden_size / size
  if int(hidden_size // rate) != size:  # A ratio whose float rounding floors below `size`.
    rate = hidden_size / (size + 0.5)
  if config.activation not in _ACTIVATIONS:
    raise AdapterHubError(f"Adapter activation {config.activation!r} has no AdapterHub "
                          f"equivalent; AdapterHub offers {sorted(_ACTIVATIONS)}.")
  return dict(
      {option: getattr(config, option) for option in adapter_options.ADAPTER_OPTIONS},
      reduction_factor=rate, non_linearity=config.activation,
      leave_out=list(config.leave_out),
      init_weights="bert", init_weights_seed=None, dropout=0.0, stochastic_depth=0.0,
      cross_adapter=False, inv_adapter=None, inv_adapter_reduction_factor=None,
      use_gating=False, phm_layer=False, phm_dim=4, factorized_phm_W=True,
      shared_W_phm=False, shared_phm_rule=True, factorized_phm_rule=False,
      phm_c_init="normal", phm_init_range=0.0001, learn_phm=True,
      hypercomplex_nonlinearity="glorot-uniform", phm_rank=1, phm_bias=True)


def _reduction_factor(value):
  """A single reduction factor; AdapterHub's per-layer mappings must agree on one."""
  if isinstance(value, dict):
    values = set(value.values())
    if len(values) != 1:
      raise AdapterHubError(f"reduction_factor={value} differs per layer; this library sizes "
                            "every adapter of a set alike.")
    value = values.pop()
  return value


def head_from_adapterhub(head_meta, directory):
  """The head fields (`HeadConfig`'s, as a dict) of an AdapterHub `head_config.json`
  (parsed)."""
  head = head_meta.get("config") or {}
  if head.get("head_type") != "classification":
    raise AdapterHubError(
        f"The head of {directory!r} is AdapterHub head_type {head.get('head_type')!r}; "
        "classification heads are supported.")
  if not head.get("bias", True):
    raise AdapterHubError("The head's last layer has no bias (bias=False); this library's "
                          "classification heads have one.")
  activation = str(head.get("activation_function") or "linear").lower()
  activation = _ACTIVATIONS.get(activation, activation) if activation != "linear" else "linear"
  if activation not in set(_ACTIVATIONS.values()) | {"linear"}:
    raise AdapterHubError(f"Head activation_function={activation!r} is not supported here; "
                          f"supported: {sorted(_ACTIVATIONS)}.")
  label2id = head.get("label2id") or {}
  labels = sorted(label2id, key=label2id.get)
  num_labels = head["num_labels"]
  return dict(
      num_classes=num_labels,
      pooling="cls" if head.get("use_pooler") else "first_token",
      dropout_rate=0.1 if head.get("dropout_prob") is None else head["dropout_prob"],
      # One logit is AdapterHub's regression head: no class names.
      label_names=tuple(labels) if len(labels) == num_labels > 1 else None,
      hidden_layers=head["layers"] - 1, hidden_activation=activation)


def _head_to_adapterhub(head):
  """AdapterHub's `head_config.json` config of a head (`HeadConfig`'s fields, a dict)."""
  labels = head["label_names"] or tuple(f"LABEL_{i}" for i in range(head["num_classes"]))
  return dict(head_type="classification", num_labels=head["num_classes"],
              layers=head["hidden_layers"] + 1,
              activation_function=head["hidden_activation"] if head["hidden_layers"] else "tanh",
              label2id={label: index for index, label in enumerate(labels)},
              use_pooler=head["pooling"] == "cls", bias=True, dropout_prob=head["dropout_rate"])


_ADAPTER_KEY = re.compile(r"transformer/layer_(\d+)/(attention_adapter|feedforward_adapter)/"
                          r"(down_project|up_project|ln_before|ln_after)/(kernel|bias|gamma|beta)")
_PARTS = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}


def _adapter_module_name(module, ln_before):
  # AdapterHub's adapter_down is nn.Sequential([LayerNorm (ln_before), Linear, activation]).
  return {"down_project": f"adapter_down.{1 if ln_before else 0}", "up_project": "adapter_up",
          "ln_before": "adapter_down.0", "ln_after": "adapter_norm_after"}[module]


def _aliases_by_key(names):
  """AdapterHub's ln_before LayerNorm is also its attribute `adapter_norm_before`, and its
  state dict holds it under both names."""
  return {key: value.replace(".adapter_down.0.", ".adapter_norm_before.")
          for key, value in names.items() if "/ln_before/" in key}


def _head_linear_indices(hidden_layers):
  """Positions of the Linear layers in AdapterHub's head `nn.Sequential`: per layer a
  Dropout, the Linear and (between layers) the activation."""
  return [3 * layer + 1 for layer in range(hidden_layers + 1)]


def _pytorch_layout(key, value):
  """Keras kernels are `[in, out]`, PyTorch's Linear weights `[out, in]` (and back)."""
  # Contiguous: safetensors writes an array's memory as it lies, whatever its strides.
  return np.ascontiguousarray(value.T if key.endswith("/kernel") else value)


def _to_pytorch(key, value):
  """A task weight in AdapterHub's layout."""
  if adapterhub_lora.tensor_name(key, "") is not None:
    return adapterhub_lora.to_pytorch(key, value)
  return _pytorch_layout(key, value)


def _from_pytorch(key, value, config):
  """An AdapterHub tensor in our layout, for an adapter of AdapterHub `config`."""
  if adapterhub_lora.tensor_name(key, "") is not None:
    return adapterhub_lora.from_pytorch(key, value, config)
  return _pytorch_layout(key, value)


@contextlib.contextmanager
def _as_adapterhub_error():
  """Reports the LoRA family's refusals as `AdapterHubError`s."""
  try:
    yield
  except adapterhub_lora.Error as error:
    raise AdapterHubError(str(error)) from None


_LAYER_NORMS_HOWTO = """# The base's LayerNorms of this adapter

Training changed the base model's LayerNorms, which an AdapterHub adapter cannot carry.
`{file}` holds them under the base's own names; load them after the adapter:

```python
from safetensors.torch import load_file
model.load_adapter(path, with_head=True, use_safetensors=True, set_active=True)
missing, unexpected = model.load_state_dict(load_file(f"{{path}}/{file}"), strict=False)
assert not unexpected
```

The base's LayerNorms then are this task's: other adapters on the same model see them too.
"""


def _huggingface_layer_norm_name(key):
  """`transformer/layer_3/output_layer_norm/gamma` → `bert.encoder.layer.3.output.LayerNorm.weight`."""
  prefix, part = key.rsplit("/", 1)
  if prefix == "embeddings/layer_norm":
    module = "bert.embeddings.LayerNorm"
  else:
    layer, slot = re.fullmatch(r"transformer/layer_(\d+)/(\w+)", prefix).groups()
    sub = "attention.output" if slot == "self_attention_layer_norm" else "output"
    module = f"bert.encoder.layer.{layer}.{sub}.LayerNorm"
  return f"{module}.{_PARTS[part]}"


def _check_sizes(config, head, tensors, hidden_size, directory):
  """Refuses tensors whose sizes disagree with the config beside them (a LoRA rank r, a
  bottleneck, a number of labels) or with each other (a head layer's weight and bias), naming
  both sides, before their shapes are compared with the model's."""
  adapters, heads = f"'{directory}/{WEIGHTS_FILE}'", f"'{directory}/{HEAD_WEIGHTS_FILE}'"
  config_file, head_file = f"its {CONFIG_FILE}", f"its {HEAD_CONFIG_FILE}"
  bottleneck = config.bottleneck_size(hidden_size)
  for name, value in sorted(tensors.items()):
    # The family members with a rank (LoRA's r; (IA)^3's B is a scale, of rank 1 always).
    if name.endswith((".lora_A", ".lora_B")) and getattr(config, "r", None) is not None:
      found, expected, said = (value.shape[0] if name.endswith("A") else value.shape[-1],
                               config.r, f"r={config.r}")
    elif name.endswith(".adapter_up.weight") and bottleneck is not None:
      found, expected = value.shape[-1], bottleneck
      said = (f"reduction_factor={config.reduction_factor}, a bottleneck of {hidden_size} // "
              f"{config.reduction_factor} = {bottleneck}" if config.reduction_factor
              else f"a bottleneck of {bottleneck}")
    else:
      continue
    if found != expected:
      raise AdapterHubError(
          f"{adapters} holds {name!r} of shape {list(value.shape)}, size {found}, but "
          f"{config_file} says {said}: the config and the weights disagree (one edited, or "
          "from two adapters). Re-save the adapter with AdapterHub.")
  layers = sorted({n.rsplit(".", 1)[0] for n in tensors if n.startswith("heads.")},
                  key=lambda layer: int(layer.rsplit(".", 1)[1]))
  for layer in layers:
    weight, bias = tensors[f"{layer}.weight"], tensors[f"{layer}.bias"]
    if weight.ndim != 2 or bias.shape != weight.shape[:1]:
      raise AdapterHubError(
          f"{heads} holds {layer}.weight of shape {list(weight.shape)} (a row per output) "
          f"but {layer}.bias of shape {list(bias.shape)}: the two disagree. Re-save the "
          "adapter with AdapterHub (save_adapter with_head=True).")
  if layers and tensors[f"{layers[-1]}.bias"].shape[0] != head["num_classes"]:
    raise AdapterHubError(
        f"{heads} holds a last head layer {layers[-1]} with "
        f"{tensors[layers[-1] + '.bias'].shape[0]} outputs, but {head_file} says "
        f"num_labels={head['num_classes']}: the head's config and weights disagree. Re-save the "
        "adapter with AdapterHub (save_adapter with_head=True).")


def _read_json(directory, filename, what):
  path = os.path.join(directory, filename)
  if not tf.io.gfile.exists(path):
    pickled = _pickled_files(directory)
    hint = (f" It holds pickled {pickled}, which are not read (loading them runs code): "
            "re-save with save_adapter(..., use_safetensors=True).") if pickled else ""
    raise AdapterHubError(f"{directory!r} has no {filename} ({what}).{hint}")
  try:
    return atomic_io.read_json(path)
  except ValueError as error:
    raise AdapterHubError(f"{path!r} is not valid JSON: {error}.") from error


def _read_tensors(directory, filename):
  path = os.path.join(directory, filename)
  if not tf.io.gfile.exists(path):
    pickled = _pickled_files(directory)
    raise AdapterHubError(
        f"{directory!r} has no {filename}"
        + (f" but pickled {pickled}, which are not read (loading them runs code)"
           if pickled else "")
        + ": save the adapter with save_adapter(..., use_safetensors=True).")
  return safetensors_files.read_safetensors(
      path, AdapterHubError, "save the adapter again with save_adapter(..., "
      "use_safetensors=True).")


def _write_tensors(directory, filename, tensors):
  """Writes `tensors` as safetensors marked PyTorch's, as AdapterHub reads them."""
  atomic_io.write_bytes(os.path.join(directory, filename),
                        safetensors_numpy.save(tensors, {"format": "pt"}))


def _pickled_files(directory):
  return [f for f in _PICKLED_FILES if tf.io.gfile.exists(os.path.join(directory, f))]


def _write_json(directory, filename, values):
  atomic_io.write_json(os.path.join(directory, filename), values)

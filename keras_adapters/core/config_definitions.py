"""The experiment config tree: what one run is, each setting defined once.

  ExperimentConfig
  ├── model: ModelConfig        hub_handle, preprocess_handle, pooling, method,
  │                             recompute_attention,
  │   └── <section>: one per registered method (`methods.registry`), its config class:
  │       adapter: AdapterConfig   adapter_size, adapter_activation, leave_out, tuning, ...
  │       lora: LoRAConfig         lora_r, lora_alpha, lora_target_modules, ...
  │       ia3: IA3Config           ia3_target_modules, ia3_feedforward_modules, ...
  ├── data: DataConfig          max_seq_length
  ├── trainer: TrainerConfig    learning_rate, epochs, batch_size, seed, weight_decay, ...
  └── runtime: RuntimeConfig    strategy, tpu, mixed_precision, jit_compile

As the Model Garden's `config_definitions`, a tree of dataclasses that YAML files and
`--params_override` strings override by path (`trainer.learning_rate=1e-3`, parsed by the
Model Garden's `params_dict`). Every leaf is a `settings.setting` carrying its help text; its
flag name is unique across the tree, so the same name is the command-line flag
(`--learning_rate`), the key in a run's record (`run.json`) and the keyword of
`ExperimentConfig.from_settings` and `replace`. Each section checks its values when made: a bad
one is a `UsageError` naming the setting. The model's method sections are made from the
registry: each registered method's config class (`AdapterConfig`, `LoRAConfig`,
`IA3Config`) under its section name, its fields named as the method's flags
(`registry.Method.flag_name`: `lora_r`); `model.method` picks the one handed unchanged to
`AdaptedBert` (`ModelConfig.set_config`): a method's own section, or for the paper's
baselines (`top_k`, `layer_norm`, `full`) the bottleneck adapters' section under that
`tuning`. Each setting of a section belongs to its method (`setting_methods`), so one given
for a method that does not train is refused (`check_methods_settings`).
"""

import dataclasses
import os
import re
import typing
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

from official.modeling.hyperparams import params_dict
import tensorflow as tf
import yaml

from keras_adapters.hub import compatibility
from keras_adapters.layers import self_attention
from keras_adapters.methods import registry
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.models import classifier
from keras_adapters.models import tuning as tuning_lib
from keras_adapters.training import distribution
from keras_adapters.training import optimization
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems
from keras_adapters.utils import precision
from keras_adapters.utils import settings

setting = settings.setting
AdapterConfig = adapter_config_lib.AdapterConfig
# The library's own configs, which check their values themselves: the registered methods'.
LIBRARY_CONFIGS = registry.config_classes()
# What a task can train: a registered method, each with its section, or one of the paper's
# baselines, the tuning policies that train parts of the base itself (`top_k`, `layer_norm`,
# `full`). A baseline is recorded as the bottleneck adapters' section's `tuning`, as runs
# always recorded it.
ADAPTERS_METHOD = AdapterConfig.method
BASELINE_METHODS = tuple(policy for policy in tuning_lib.TUNING_POLICIES
                         if policy != ADAPTERS_METHOD)
# Every name `--method` and `--methods` take.
METHODS = tuple(dict.fromkeys((ADAPTERS_METHOD,) + registry.names() + BASELINE_METHODS))
_PROJECTION_METHODS = tuple(name for name in registry.names() if name != ADAPTERS_METHOD)


def _method_sections() -> type:
  """A frozen dataclass with a section per registered method (`methods.registry`): its
  config class under its section name (`adapter`, `lora`, `ia3`), at its defaults."""
  return dataclasses.make_dataclass(
      "MethodSections",
      [(method.section, method.config_class,
        dataclasses.field(default_factory=method.config_class))
       for method in registry.methods()],
      frozen=True, namespace=dict(__module__=__name__))


@dataclasses.dataclass(frozen=True)
class ModelConfig(_method_sections()):
  """The base encoder, what trains on it and the head: the settings below, and a section per
  registered method (`model.adapter`, `model.lora`, `model.ia3`), its config class."""
  hub_handle: Optional[str] = setting(
      None, "TF Hub BERT encoder handle or local path; default: the embedded "
      "all-MiniLM-L6-v2 (keras_adapters.default_hub_handle()).")
  preprocess_handle: Optional[str] = setting(
      None, "Matching TF Hub preprocessing handle; default: the embedded one.")
  pooling: str = setting(
      "cls", "Head input: mean (mean of the sequence output, what the embedded "
      "sentence-embedding encoder was trained to produce; its pooler never was) or cls "
      "(BERT's pooled_output, the paper's head for BERT). Not used by the SQuAD span head.",
      choices=classifier.POOLINGS)
  method: str = setting(
      ADAPTERS_METHOD, "What a task trains: bottleneck adapters (their settings: --adapter_size, "
      "--leave_out, ...), a method that changes the frozen base's projections (its settings: "
      f"--<method>_*): {', '.join(_PROJECTION_METHODS)}, or one of the paper's baselines, which "
      f"train parts of the base: {', '.join(BASELINE_METHODS)} (with --top_k). A setting of "
      "another method is refused.", choices=METHODS)
  recompute_attention: str = setting(
      "auto", "Recompute the attention probabilities in the backward pass instead of keeping "
      "them: the same gradients, far less memory at long sequences, a slower step. auto: when "
      f"--max_seq_length is at least {self_attention.RECOMPUTE_FROM_LENGTH}.",
      choices=self_attention.RECOMPUTE_CHOICES, execution=True)

  @property
  def set_config(self):
    """The config of what the task trains, handed to `AdaptedBert(adapter_config=...)`."""
    return getattr(self, registry.get(self.method).section)

  @property
  def method_name(self):
    """What a run trains, as `--methods` names it: `lora`, `ia3`, or the adapter section's
    tuning (`adapters`, `layer_norm`, `top_k`, `full`)."""
    return self.adapter.tuning if self.method == ADAPTERS_METHOD else self.method

  def validate_for(self, num_layers: int) -> None:
    """Raises a `UsageError` naming the setting when what the task trains cannot apply to a
    base of `num_layers` layers (`lora_leave_out` naming every layer, `top_k` above it)."""
    config = self.set_config
    try:
      config.validate_for(num_layers)
    except ValueError as e:
      raise errors.UsageError(_with_setting_names(str(e), type(config))) from None

  def __post_init__(self):
    for name in ("hub_handle", "preprocess_handle"):
      value = getattr(self, name)
      if not isinstance(value, str) or not value:
        raise errors.UsageError(f"{name}={value!r}: give a TF Hub handle or a local path.")
      if value.startswith("~"):
        # `--hub_handle=~/models/bert`: the shell leaves a `~` after `=` as it is.
        object.__setattr__(self, name, os.path.expanduser(value))
    settings.check_choice("pooling", self.pooling, classifier.POOLINGS)
    settings.check_choice("method", self.method, METHODS)
    settings.check_choice("recompute_attention", self.recompute_attention,
                          self_attention.RECOMPUTE_CHOICES)
    for method in registry.methods():
      section = getattr(self, method.section)
      if not isinstance(section, method.config_class):
        raise errors.UsageError(f"{method.section}={section!r}: give a "
                                f"{method.config_class.__name__}.")
    if self.method != ADAPTERS_METHOD and self.adapter.tuning not in (ADAPTERS_METHOD,
                                                                      self.method):
      raise errors.UsageError(
          f"method={self.method!r} with tuning={self.adapter.tuning!r}: tuning is the old "
          f"spelling of method={self.adapter.tuning!r}; give only method={self.method!r}.")
    if self.method in BASELINE_METHODS:
      # Recorded as runs always recorded a baseline: the adapter section's tuning.
      object.__setattr__(self, "adapter", dataclasses.replace(self.adapter,
                                                              tuning=self.method))
      object.__setattr__(self, "method", ADAPTERS_METHOD)
    if self.adapter.tuning == "adapters" and self.adapter.adapter_size is None:
      raise errors.UsageError("adapter_size=None: must be a whole number of at least 1 with "
                              "tuning='adapters' (the other tunings have no adapters).")
    if self.adapter.tuning != "adapters" and (self.adapter.adapter_size is not None
                                              or self.adapter.reduction_factor is not None):
      # The baselines have no adapters: one setting, not a contradiction to resolve later.
      object.__setattr__(self, "adapter", dataclasses.replace(
          self.adapter, adapter_size=None, reduction_factor=None))


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """How examples become model inputs."""
  max_seq_length: int = setting(128, "Tokens per example after packing (SQuAD: per window).")

  def __post_init__(self):
    settings.check_integer("max_seq_length", self.max_seq_length,
                           compatibility.MIN_SEQ_LENGTH)


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """The optimiser, its schedule and the checkpoints."""
  learning_rate: float = setting(
      3e-4, "Peak learning rate, reached after a linear warmup over the first "
      "--warmup_fraction of the steps, then decayed linearly to 0.")
  epochs: float = setting(3.0, "Training epochs (fractions allowed).")
  batch_size: int = setting(32, "Global batch size.")
  seed: int = setting(0, "Random seed (weights of new layers, data order).")
  weight_decay: float = setting(
      optimization.DEFAULT_WEIGHT_DECAY, "Decoupled weight decay of AdamW (LayerNorm and "
      "bias excluded), BERT's 0.01 by default; 0 turns it off.")
  warmup_fraction: float = setting(optimization.DEFAULT_WARMUP_FRACTION,
                                   "Fraction of the steps over which the learning rate warms up.")
  checkpoint_every_steps: int = setting(200, "Checkpoint interval in steps.", execution=True)

  def __post_init__(self):
    for name in ("learning_rate", "epochs"):
      settings.check_number(name, getattr(self, name), above=0.0)
    settings.check_number("weight_decay", self.weight_decay, at_least=0.0)
    settings.check_number("warmup_fraction", self.warmup_fraction, at_least=0.0, below=1.0)
    settings.check_integer("batch_size", self.batch_size, 1)
    settings.check_integer("seed", self.seed, 0)
    settings.check_integer("checkpoint_every_steps", self.checkpoint_every_steps, 1)


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
  """Where and how the steps run; `None` is what the strategy implies: bfloat16 and XLA on
  TPUs (the Model Garden's TPU recipe), float32 and no XLA elsewhere."""
  strategy: str = setting("default", "tf.distribute strategy.",
                          choices=distribution.STRATEGIES, execution=True)
  tpu: Optional[str] = setting(None, "TPU name or address ('local' for a TPU VM).",
                               execution=True)
  mixed_precision: Optional[str] = setting(
      None, "Compute dtype of the Keras mixed-precision policy; variables, LayerNorms, "
      "softmax, logits and loss stay float32. Default: bfloat16 with --strategy=tpu, else "
      "float32.", choices=precision.PRECISIONS)
  jit_compile: Optional[bool] = setting(
      None, "XLA-compile the training and evaluation steps, with every batch padded to "
      "--max_seq_length (static shapes). Default: on with --strategy=tpu, else off.")

  def __post_init__(self):
    strategy = str(self.strategy).lower()
    settings.check_choice("strategy", strategy, distribution.STRATEGIES)
    object.__setattr__(self, "strategy", strategy)
    if self.mixed_precision is None:
      object.__setattr__(self, "mixed_precision", "bfloat16" if self.on_tpu else "float32")
    settings.check_choice("mixed_precision", self.mixed_precision, precision.PRECISIONS)
    if self.jit_compile is None:
      object.__setattr__(self, "jit_compile", self.on_tpu)
    if not isinstance(self.jit_compile, bool):
      raise errors.UsageError(f"jit_compile must be True or False, got {self.jit_compile!r}.")

  @property
  def on_tpu(self) -> bool:
    return self.strategy == "tpu"


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """One run's settings: the root of the tree (see the module docstring)."""
  model: ModelConfig
  data: DataConfig = dataclasses.field(default_factory=DataConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

  @property
  def static_shapes(self) -> bool:
    """Whether every batch has one shape: XLA compiles a program per shape, and TPUs compile
    every step. Training pads to `max_seq_length` and drops the last partial batch;
    evaluation pads its last batch with padding rows."""
    return self.runtime.jit_compile or self.runtime.on_tpu

  @property
  def adapted_bert_options(self) -> Dict[str, Any]:
    """`AdaptedBert`'s arguments besides the handle: what trains, and whether attention is
    recomputed, decided for the longest sequence of the run (batches padded to their longest
    example have no static length for the layer to decide by)."""
    return dict(adapter_config=self.model.set_config,
                recompute_attention=self_attention.recompute_for_length(
                    self.model.recompute_attention, self.data.max_seq_length))

  @classmethod
  def from_settings(cls, **values: Any) -> "ExperimentConfig":
    """The config of flat settings, named as their flags; the others take their defaults.

    `ExperimentConfig.from_settings(hub_handle=h, preprocess_handle=p, learning_rate=1e-3)`.
    """
    return cls.from_dict(nested_settings(values))

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "ExperimentConfig":
    """The config of a nested dict, as `as_dict` or a YAML file gives it."""
    return _build(cls, values, ())

  def as_dict(self) -> Dict[str, Any]:
    """The nested dict of every setting, JSON- and YAML-serialisable."""
    return _as_dict(self)

  def settings(self) -> Dict[str, Any]:
    """Every setting by its flag name, JSON-serialisable."""
    nested = self.as_dict()
    flat = {}
    for name, path in SETTINGS.items():
      value = nested
      for key in path:
        value = value[key]
      flat[name] = value
    return flat

  def replace(self, **values: Any) -> "ExperimentConfig":
    """This config with the flat settings `values` changed (and checked)."""
    return ExperimentConfig.from_settings(**{**self.settings(), **values})

  def override(self, overrides: Any) -> "ExperimentConfig":
    """This config overridden by a nested dict, a YAML file or a `--params_override`
    string (see `override_dict`)."""
    return ExperimentConfig.from_dict(override_dict(self.as_dict(), overrides))

  def definition(self) -> Dict[str, Any]:
    """The settings that change what a run learns, by flag name: a run's record of them."""
    return {name: value for name, value in self.settings().items()
            if name not in EXECUTION_SETTINGS}


def setting_methods(name: str) -> Tuple[str, ...]:
  """The methods that setting `name` configures, by the config its section is: a registered
  method's section is that method's (`lora_r`: lora), the adapter section the bottleneck
  adapters' but for `top_k`, the size of the baseline of that name, and `tuning`, the old
  spelling of the method itself; `()` for a setting every method shares (`learning_rate`)."""
  path = SETTINGS[name]
  section = field_type(ExperimentConfig, path[:-1]) if len(path) > 1 else None
  method = registry.of_config(section)
  if method is None:
    return ()
  if method.name != ADAPTERS_METHOD:
    return (method.name,)
  if path[-1] == "tuning":
    return (ADAPTERS_METHOD,) + BASELINE_METHODS
  return (path[-1],) if path[-1] in BASELINE_METHODS else (ADAPTERS_METHOD,)


def check_methods_settings(values: Mapping[str, Any], methods: Sequence[str],
                           compared: bool = False) -> None:
  """Refuses a setting of a method that none of `methods` is: it would be recorded and
  ignored (`lora_r=16` with method='adapters').

  Args:
    values: The settings given, by flag name, with their values.
    methods: What trains: the run's method, or the methods a comparison trains.
    compared: Whether `methods` are a comparison's (`methods=[...]`) or one run's.
  """
  for name, value in values.items():
    owners = setting_methods(name)
    if not owners or set(owners) & set(methods):
      continue
    shown = list(value) if isinstance(value, tuple) else value
    if compared:
      raise errors.UsageError(
          f"{name}={shown!r} is a setting of {owners[0]}, which methods={list(methods)!r} "
          f"does not train: drop it, or add {owners[0]} to the methods.")
    raise errors.UsageError(
        f"{name}={shown!r} is a setting of method={owners[0]!r}, not of "
        f"method={methods[0]!r} that this run trains: drop it, or give "
        f"method={owners[0]!r}.")


def flat_settings(nested: Mapping[str, Any]) -> Dict[str, Any]:
  """The settings a nested dict of the tree holds, by flag name (`nested_settings`'s
  inverse); keys that are no setting are left out."""
  flat = {}
  for name, path in SETTINGS.items():
    value = nested
    for key in path:
      if not isinstance(value, Mapping) or key not in value:
        break
      value = value[key]
    else:
      flat[name] = value
  return flat


def nested_settings(values: Mapping[str, Any]) -> Dict[str, Any]:
  """Flat settings by flag name as the nested dict of the tree; unknown names are refused."""
  unknown = sorted(set(values) - set(SETTINGS))
  if unknown:
    raise errors.UsageError(f"Unknown settings {unknown}; the settings are {sorted(SETTINGS)}.")
  nested: Dict[str, Any] = {}
  for name, value in values.items():
    *sections, leaf = SETTINGS[name]
    inner = nested
    for section in sections:
      inner = inner.setdefault(section, {})
    inner[leaf] = value
  return nested


def override_dict(nested: Mapping[str, Any], overrides: Any) -> Dict[str, Any]:
  """`nested` (a config tree as a dict) overridden by a nested dict, a YAML file or a
  `--params_override` string (`"trainer.learning_rate=1e-3,model.adapter.adapter_size=16"`
  or YAML text), read by the Model Garden's `params_dict.override_params_dict`; a key the
  tree does not have, a YAML file that is missing, is no valid YAML or holds no mapping, and
  a second bottleneck size (`adapter_size` beside `reduction_factor`) are refused."""
  values = override_values(overrides)
  _check_one_bottleneck_size(nested, values)
  params = params_dict.ParamsDict(_complete(nested))
  try:
    params = params_dict.override_params_dict(params, values, is_strict=True)
  except (KeyError, ValueError, TypeError, AttributeError) as e:
    raise errors.UsageError(
        f"Cannot apply the override {overrides!r}: {e}. Give `section.setting=value` pairs "
        f"separated by commas, YAML, or a YAML file; the sections are "
        f"{[field.name for field in dataclasses.fields(ExperimentConfig)]}.") from None
  return params.as_dict()


def override_values(overrides: Any) -> Dict[str, Any]:
  """The nested dict of settings that `overrides` gives: a dict as it is, a string of
  `section.setting=value` pairs, YAML text, or the path of a YAML file (any `tf.io.gfile`
  file system). A missing file, YAML that does not parse (its line and cause named) and a
  top level that is not a mapping are `UsageError`s naming the file."""
  if isinstance(overrides, Mapping):
    return dict(overrides)
  if not isinstance(overrides, str):
    raise errors.UsageError(f"Cannot apply the override {overrides!r}: give a dict, "
                            "`section.setting=value` pairs, YAML, or a YAML file.")
  if not overrides.strip():
    return {}
  try:
    text = params_dict.nested_csv_str_to_json_str(overrides)
  except ValueError:
    text = overrides
  try:
    values = yaml.load(text, Loader=params_dict._LOADER)  # pylint: disable=protected-access
  except yaml.YAMLError as e:
    if "\n" not in overrides and ":" not in overrides and "=" not in overrides:
      values = None  # A path, such as `conf[1.yaml`.
    else:
      raise errors.UsageError(f"The override {overrides!r} is not valid YAML: "
                              f"{_yaml_problem(e)}.") from None
  if isinstance(values, dict):
    return values
  if "\n" in overrides:
    raise errors.UsageError(f"The override {overrides!r} is YAML of a {_kind(values)}, not a "
                            "mapping of sections (model:, data:, trainer:, runtime:).")
  return _read_config_file(os.path.expanduser(overrides))


def _read_config_file(path: str) -> Dict[str, Any]:
  """The settings of the YAML file at `path`, or a `UsageError` naming it and the fix."""
  with file_systems.reaching(path, "config_file"):
    if not tf.io.gfile.exists(path):
      raise errors.UsageError(
          f"The config file {path!r} does not exist (nor is it `section.setting=value` pairs "
          "or YAML): check the path.")
    if tf.io.gfile.isdir(path):
      raise errors.UsageError(f"The config file {path!r} is a folder: give a YAML file.")
    with tf.io.gfile.GFile(path, "rb") as f:
      data = f.read()
  try:
    values = yaml.load(data.decode("utf-8-sig"), Loader=params_dict._LOADER)  # pylint: disable=protected-access
  except UnicodeDecodeError as e:
    raise errors.UsageError(f"The config file {path!r} is not UTF-8 text ({e.reason} at byte "
                            f"{e.start}): give a YAML file.") from None
  except yaml.YAMLError as e:
    raise errors.UsageError(f"The config file {path!r} is not valid YAML: "
                            f"{_yaml_problem(e)}.") from None
  if values is None:  # An empty file, or only comments.
    return {}
  if not isinstance(values, dict):
    raise errors.UsageError(
        f"The config file {path!r} holds a {_kind(values)} at its top level: it must be a "
        "mapping of sections (model:, data:, trainer:, runtime:), e.g. `trainer: "
        "{learning_rate: 0.001}`.")
  return values


def _yaml_problem(error: "yaml.YAMLError") -> str:
  """Where and why YAML did not parse: `line 3, column 1: found character '\\t' that cannot
  start any token (YAML indents with spaces, not tabs)`."""
  mark = getattr(error, "problem_mark", None)
  problem = getattr(error, "problem", None) or str(error).splitlines()[0]
  where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
  hint = " (YAML indents with spaces, not tabs)" if "\\t" in problem else ""
  return f"{where}{problem}{hint}"


def _kind(value: Any) -> str:
  return {list: "list", str: "string"}.get(type(value), type(value).__name__)


def _check_one_bottleneck_size(nested: Mapping[str, Any], values: Mapping[str, Any]) -> None:
  """Refuses `adapter_size` and `reduction_factor` both given: two sizes of one bottleneck,
  of which `reduction_factor` would win silently. An override giving both is refused, and so
  is one giving either where an earlier override (a config file, the flags) gave the other;
  an earlier `adapter_size` at its default counts as not given."""
  given = values.get("model")
  given = given.get("adapter") if isinstance(given, Mapping) else None
  if not isinstance(given, Mapping):
    return
  before = nested.get("model") or {}
  before = before.get("adapter") or {} if isinstance(before, Mapping) else {}
  size, rate = given.get("adapter_size"), given.get("reduction_factor")
  if size is not None and rate is not None:
    pass
  elif rate is not None and before.get("adapter_size") not in (None,
                                                               AdapterConfig().adapter_size):
    size = before["adapter_size"]
  elif size is not None and before.get("reduction_factor") is not None:
    rate = before["reduction_factor"]
  else:
    return
  raise errors.UsageError(
      f"adapter_size={size!r} and reduction_factor={rate!r} both size the adapters' "
      "bottleneck (m = hidden size // reduction_factor, in place of adapter_size): give one "
      "of them.")


def _complete(nested, config_cls=None):
  """`nested` with every setting of the tree present (defaults where absent), so a strict
  override can name any of them."""
  config_cls = config_cls or ExperimentConfig
  hints = typing.get_type_hints(config_cls)
  complete = {}
  for field in dataclasses.fields(config_cls):
    hint, given = hints[field.name], nested.get(field.name)
    if hint is AdapterConfig:
      complete[field.name] = {**AdapterConfig().to_dict(), **(given or {})}
    elif dataclasses.is_dataclass(hint):
      complete[field.name] = _complete(given or {}, hint)
    elif field.name in nested:
      complete[field.name] = given
    else:
      complete[field.name] = (list(field.default) if isinstance(field.default, tuple)
                              else field.default)
  return complete


def leaves(config_cls: type = ExperimentConfig,
           path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], dataclasses.Field]]:
  """Every setting of the tree under `config_cls`: its path of field names and its field."""
  hints = typing.get_type_hints(config_cls)
  for field in dataclasses.fields(config_cls):
    if dataclasses.is_dataclass(hints[field.name]):
      yield from leaves(hints[field.name], path + (field.name,))
    else:
      yield path + (field.name,), field


def field_type(config_cls: type, path: Tuple[str, ...]) -> Any:
  """The annotated type of the setting at `path`."""
  for name in path[:-1]:
    config_cls = typing.get_type_hints(config_cls)[name]
  return typing.get_type_hints(config_cls)[path[-1]]


def setting_name(config_cls: type, path: Tuple[str, ...]) -> str:
  """The flag and record name of the setting at `path` of `config_cls`: a registered
  method's field named as the method names its flags (`lora_r`), any other as its
  `settings.setting` says."""
  section = field_type(config_cls, path[:-1]) if len(path) > 1 else config_cls
  field = {field.name: field for field in dataclasses.fields(section)}[path[-1]]
  method = registry.of_config(section)
  return method.flag_name(field) if method else settings.flag_name(field)


def _flag_names() -> Dict[str, Tuple[str, ...]]:
  names = {}
  for path, _ in leaves():
    name = setting_name(ExperimentConfig, path)
    if name in names:
      raise TypeError(f"Two settings are named {name!r}: {names[name]} and {path}.")
    names[name] = path
  return names


# Flag name → path in the tree, for every setting.
SETTINGS = _flag_names()
EXECUTION_SETTINGS = tuple(setting_name(ExperimentConfig, path) for path, field in leaves()
                           if field.metadata.get(settings.EXECUTION))


def _build(config_cls, values, path):
  """`config_cls` from the nested dict `values`, its sections built first."""
  if not isinstance(values, Mapping):
    raise errors.UsageError(f"{'.'.join(path) or 'the config'} must be a mapping of settings, "
                            f"got {values!r}.")
  hints = typing.get_type_hints(config_cls)
  names = [field.name for field in dataclasses.fields(config_cls)]
  unknown = sorted(set(values) - set(names))
  if unknown:
    where = ".".join(path) or "the config"
    raise errors.UsageError(f"Unknown settings {unknown} in {where}; it has {names}.")
  arguments = {}
  for name, value in values.items():
    if config_cls in LIBRARY_CONFIGS:
      arguments[name] = tuple(value) if isinstance(value, list) else value
    elif dataclasses.is_dataclass(hints[name]):
      arguments[name] = _build(hints[name], value, path + (name,))
    else:
      arguments[name] = value
  if config_cls in LIBRARY_CONFIGS:
    try:
      return config_cls(**arguments)
    except (TypeError, ValueError) as e:
      raise errors.UsageError(_named_as_its_setting(str(e), arguments, config_cls,
                                                    path)) from None
  if config_cls is ExperimentConfig and "model" not in arguments:
    arguments["model"] = _build(ModelConfig, {}, ("model",))
  return config_cls(**arguments)


def _with_setting_names(message, config_cls):
  """A library config's message with each of its fields written as the setting
  (`leave_out=[6]` of a `LoRAConfig` as `lora_leave_out=[6]`), not another section's."""
  for field in dataclasses.fields(config_cls):
    name = setting_name(config_cls, (field.name,))
    if name != field.name:
      message = re.sub(rf"(?<![\w.-]){field.name}=", f"{name}=", message)
  return message


def _named_as_its_setting(message, arguments, config_cls, path):
  """A library config's message about one of its fields, led by that setting as it was given
  (`adapter_init_stddev=-0.5: init_stddev must be ...`), the way the other sections name it."""
  for field in dataclasses.fields(config_cls):
    if message.startswith(f"{field.name} ") and field.name in arguments:
      return f"{setting_name(config_cls, (field.name,))}={arguments[field.name]!r}: {message}"
  return f"{message} (in {'.'.join(path)})"


def _as_dict(config):
  values = {}
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if dataclasses.is_dataclass(value):
      values[field.name] = _as_dict(value)
    else:
      values[field.name] = list(value) if isinstance(value, tuple) else value
  return values

"""Flags shared by the experiment scripts, made from the config tree's own definitions.

Every setting of `config_definitions.ExperimentConfig` is a flag of its own name, help text
and type (`--learning_rate`, `--adapter_activation`, `--leave_out`, ...); `--config_file`
(YAML, the tree's sections) and `--params_override` (`trainer.epochs=2,...` or YAML) set
them as the Model Garden's scripts do. Precedence: the script's defaults, then the config
files in order, then the flags given, then `--params_override`.
"""

import dataclasses
import json
import math
import sys
import typing
from typing import Any, Dict, Optional, Sequence

from absl import flags

# Before TensorFlow loads (see cli).
from keras_adapters.cli import cli  # pylint: disable=unused-import
from keras_adapters.core import config_definitions
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.training import distribution
from keras_adapters.utils import errors
from keras_adapters.utils import settings

_TREE = config_definitions.ExperimentConfig
# The scripts' defaults where they differ from the library's: their default base, the
# embedded all-MiniLM-L6-v2, is a sentence embedder trained for mean pooling; its pooler was
# never trained.
_SCRIPT_DEFAULTS = dict(pooling="mean")


def define_run_flags(**defaults: Any) -> None:
  """Defines a flag per setting of the config tree, plus `--config_file`,
  `--params_override` and `--adapter_config`; `defaults` (by flag name) are this script's
  defaults where they differ from the tree's, e.g. `learning_rate=1e-3`."""
  define_settings_flags(_TREE, **{**_SCRIPT_DEFAULTS, **defaults})
  flags.DEFINE_multi_string(
      "config_file", None,
      "YAML file of settings by the config tree's sections (model, model.adapter, data, "
      "trainer, runtime), as the Model Garden's --config_file; several apply in order. Flags "
      "given on the command line override it.")
  flags.DEFINE_string(
      "params_override", None,
      "Settings by path, applied last: 'trainer.learning_rate=1e-3,model.adapter."
      "adapter_size=16', YAML text, or a YAML file.")
  flags.DEFINE_string(
      "adapter_config", None,
      "AdapterConfig fields as a JSON object with AdapterHub's names, e.g. AdapterHub's "
      "Pfeiffer placement: '{\"mh_adapter\": false, \"original_ln_before\": true}'. Each "
      "field also has a flag of its own; giving both is refused.")


def define_settings_flags(config_cls: type, **defaults: Any) -> None:
  """Defines a flag per setting of the dataclass `config_cls` (and its sections), named,
  typed and documented by its `settings.setting`; `defaults` by flag name replace its
  defaults."""
  fields = {config_definitions.setting_name(config_cls, path): (path, field)
            for path, field in config_definitions.leaves(config_cls)}
  unknown = sorted(set(defaults) - set(fields))
  if unknown:
    raise TypeError(f"{config_cls.__name__} has no settings {unknown}.")
  for name, (path, field) in fields.items():
    _define(name, config_definitions.field_type(config_cls, path), field,
            defaults.get(name, field.default))


def settings_from_flags(config_cls: type, **overrides: Any) -> Any:
  """The flat dataclass `config_cls` (e.g. `SquadConfig`) of its flags and `overrides`."""
  values = {field.name: _flag_value(config_cls, (field.name,))
            for field in dataclasses.fields(config_cls)}
  return config_cls(**{**values, **overrides})


def define_methods_flag(purpose: str, name: str = "methods") -> None:
  """Defines `--<name>`, a list of the names `--method` takes (`purpose`: what the script
  does with them), refusing at parse time a name that is not one of them."""
  methods = sorted(config_definitions.METHODS)
  flags.DEFINE_list(name, None, f"{purpose} ({', '.join(methods)}).")
  flags.register_validator(
      name, lambda names: not set(names or ()) - set(methods),
      message=f"name methods among {', '.join(methods)}, e.g. --{name}=adapters,full.")


def define_rerun_flag(compared: str) -> None:
  """Defines `--rerun`: methods of a comparison (`compared`: which) to train again."""
  define_methods_flag(
      f"Methods of {compared} to train again from the first step although the results table "
      "has their rows and their run folders finished runs (after a change of the code): "
      "their rows leave the table and their folders are moved aside to "
      "<folder>.replaced-<time>; resume a stopped rerun without --rerun", name="rerun")


def define_output_flags(model_dir: str, *, results_dir: str = None,
                        export_dir: str = "<model_dir>/export") -> None:
  """Defines `--model_dir` and, unless `None`, `--results_dir` and `--export_dir`; the
  arguments are the defaults the help shows, `<...>` for a path made from other flags."""
  flags.DEFINE_string("model_dir", None if model_dir.startswith("<") else model_dir,
                      f"Folder of the runs' checkpoints, logs and results (default: "
                      f"{model_dir}); rerunning resumes.")
  if results_dir is not None:
    flags.DEFINE_string("results_dir", None if results_dir.startswith("<") else results_dir,
                        f"Where the results tables are written (default: {results_dir}).")
  if export_dir is not None:
    flags.DEFINE_string("export_dir", None, "Export folder: the serving SavedModel and the "
                        f"adapter-only artifact (default: {export_dir}).")


def _define(name, annotation, field, default):
  """Defines flag `name` for a setting of type `annotation`."""
  help_text = field.metadata[settings.HELP]
  choices = field.metadata[settings.CHOICES]
  kinds = set(typing.get_args(annotation) or (annotation,)) - {type(None)}
  if choices:
    flags.DEFINE_enum(name, default, list(choices), help_text)
  elif kinds == {bool, str}:  # `residual_before_ln`: true, false or a position's name.
    flags.DEFINE_string(name, None if default is None else str(default).lower(), help_text)
  elif kinds == {bool}:
    flags.DEFINE_bool(name, default, help_text)
  elif kinds == {int}:
    flags.DEFINE_integer(name, default, help_text)
  elif kinds == {float}:
    flags.DEFINE_float(name, default, help_text)
  elif kinds == {str}:
    flags.DEFINE_string(name, default, help_text)
  elif typing.get_origin(annotation) is tuple:
    flags.DEFINE_list(name, [str(value) for value in default], help_text)
  else:
    raise TypeError(f"No flag type for setting {name}: {annotation}.")


def _flag_value(config_cls, path):
  """The value of the flag of the setting at `path` of `config_cls`, as the config takes it."""
  name = config_definitions.setting_name(config_cls, path)
  value = flags.FLAGS[name].value
  annotation = config_definitions.field_type(config_cls, path)
  if typing.get_origin(annotation) is tuple and typing.get_args(annotation)[0] is str:
    return list(value)
  if typing.get_origin(annotation) is tuple:
    try:
      return [int(item) for item in value]
    except ValueError:
      raise errors.UsageError(f"--{name}={','.join(value)}: give comma-separated layer "
                              f"indices, e.g. --{name}=0,1.") from None
  if set(typing.get_args(annotation)) == {bool, str} and value in ("true", "false"):
    return value == "true"
  return value


def validate_number_list(name, parse, minimum, example):
  """Makes absl refuse a list flag `--name` unless every item is a number `parse` reads (int
  or float), finite, at least `minimum` and given once; so `--seeds=abc` is a usage error."""
  def valid(values):
    try:
      numbers = [parse(value) for value in values]
    except ValueError:
      return False
    return (bool(numbers) and len(set(numbers)) == len(numbers)
            and all(math.isfinite(n) and n >= minimum for n in numbers))
  kind = "whole numbers" if parse is int else "finite numbers"
  flags.register_validator(
      name, valid, message=f"give comma-separated {kind} of at least {minimum:g}, each once, "
      f"e.g. --{name}={example}.")


def check_base(config, methods=()):
  """Raises a `ValueError` naming the flag if the base cannot serve `config`: a
  `--max_seq_length` above its position embeddings, a `--preprocess_handle` that is no
  preprocessing model or makes ids beyond its vocabulary, a method's setting naming layers
  the base does not have (`--lora_leave_out`, `--top_k`). Checked before anything is read or
  written.

  Args:
    config: The run config of the flags.
    methods: The methods of `--methods`, each checked at the settings it runs with.

  Returns:
    The run config of each method by name: `config` under its own method's name without
    `methods`.
  """
  # Imported here: reading a handle loads TensorFlow Hub, the comparison the run driver.
  from keras_adapters.analysis import method_comparison  # pylint: disable=g-import-not-at-top
  from keras_adapters.hub import compatibility  # pylint: disable=g-import-not-at-top
  from keras_adapters.hub import hub_encoder  # pylint: disable=g-import-not-at-top
  base = hub_encoder.read_hub_encoder(config.model.hub_handle)
  compatibility.check_seq_length(config.data.max_seq_length, base.config)
  compatibility.check_preprocessor(
      compatibility.load_preprocessor(config.model.preprocess_handle), base.config,
      encoder_tokenizer=base.tokenizer, handle=config.model.preprocess_handle)
  num_layers = base.config["num_layers"]
  configs = ({method: method_comparison.method_config(config, method, num_layers)
              for method in methods} if methods else {config.model.method_name: config})
  for method_config in configs.values():
    method_config.model.validate_for(num_layers)
  return configs


def create_strategy():
  """The `--strategy` (and `--tpu`), created first: a multi-worker cluster or a TPU must be
  set up before anything else runs TensorFlow. The runs later get the same strategy."""
  return distribution.get_strategy(flags.FLAGS.strategy, tpu=flags.FLAGS.tpu)


def _json_object(flag, text):
  """The dict a flag's JSON text gives (`None` for no text), or a usage error naming it."""
  if text is None:
    return None
  try:
    value = json.loads(text)
  except ValueError as e:
    value = e
  if not isinstance(value, dict):
    raise errors.UsageError(
        f"--{flag}={text!r} is not a JSON object ({value}): give one in single quotes, e.g. "
        f"--{flag}='{{\"mh_adapter\": false}}'.")
  return value


def _adapter_config_settings() -> Dict[str, Any]:
  """`--adapter_config`'s fields as settings by flag name; a field whose own flag is given
  too is refused."""
  values = _json_object("adapter_config", flags.FLAGS.adapter_config) or {}
  fields = {field.name: field for field in
            dataclasses.fields(adapter_config_lib.AdapterConfig)}
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise errors.UsageError(f"--adapter_config sets {unknown}, which AdapterConfig does not "
                            f"have; it has {sorted(fields)}.")
  named = {config_definitions.setting_name(adapter_config_lib.AdapterConfig, (name,)): value
           for name, value in values.items()}
  repeated = sorted(name for name in named if flags.FLAGS[name].present)
  if repeated:
    raise errors.UsageError(f"--adapter_config and {', '.join('--' + n for n in repeated)} "
                            "both set the same fields: give each once.")
  return named


def run_config_from_flags(trained: Optional[Sequence[str]] = None,
                          **overrides: Any) -> config_definitions.ExperimentConfig:
  """The `ExperimentConfig` of the flags, with the embedded default model where none is named.

  A setting of a method that is not trained (`--lora_r` with `--method=adapters`, or with
  `--methods` that has no lora) is refused, as `--method` or `--tuning` beside `--methods`.

  Args:
    trained: The methods the script's runs train whatever the flags say (a study's); default:
      those of `--methods`, else `--method`'s.
    **overrides: Settings by flag name that replace the script's defaults (a budget such as
      `--full`'s epochs); a config file or a flag given still overrides them.
  """
  # Imported here: resolving the default converts the base model on first use.
  from keras_adapters.hub import default_model  # pylint: disable=g-import-not-at-top
  values = flags.FLAGS
  compared = values["methods"].value if "methods" in values else None
  _check_method_flags(trained or compared, by=None if trained else "--methods")
  tree = config_definitions.nested_settings(
      {name: _flag_value(_TREE, path) for name, path in config_definitions.SETTINGS.items()
       if not values[name].present} | overrides)
  for path in values.config_file or ():
    tree = config_definitions.override_dict(tree, path)
  given = {name: _flag_value(_TREE, path) for name, path in config_definitions.SETTINGS.items()
           if values[name].present}
  adapter_config = _adapter_config_settings()
  tree = config_definitions.override_dict(
      tree, config_definitions.nested_settings({**given, **adapter_config}))
  if values.params_override:
    tree = config_definitions.override_dict(tree, values.params_override)
  model = tree["model"]
  model["hub_handle"] = model["hub_handle"] or default_model.default_hub_handle()
  model["preprocess_handle"] = (model["preprocess_handle"]
                                or default_model.default_preprocess_handle())
  config = config_definitions.ExperimentConfig.from_dict(tree)
  config_definitions.check_methods_settings(
      _settings_set(tree, {**given, **adapter_config}),
      trained or compared or [config.model.method_name], compared=bool(trained or compared))
  return config


def _check_method_flags(methods, by):
  """Refuses `--method` or `--tuning` where the runs' `methods` are set otherwise (`by` the
  flag `--methods`, or by the command itself); says that `--tuning` is the old spelling of
  `--method`."""
  values = flags.FLAGS
  picked = " and ".join(f"--{name}" for name in ("method", "tuning") if values[name].present)
  if methods and picked:
    chosen = f"{by}={','.join(methods)}" if by else "this command"
    raise errors.UsageError(f"{chosen} sets the method of each run ({', '.join(methods)}): "
                            f"drop {picked}, which sets that of a single run.")
  if values["tuning"].present:
    print(f"Deprecated: --tuning={values.tuning} is the old spelling of --method="
          f"{values.tuning}; it runs the same, and a later version will refuse it.",
          file=sys.stderr)


def _settings_set(tree, given):
  """The settings of the final `tree` that were set: those `given` (on the command line) and
  those that differ from their defaults (set by a config file or `--params_override`)."""
  defaults = {name: list(field.default) if isinstance(field.default, tuple) else field.default
              for name, field in ((config_definitions.setting_name(_TREE, path), field)
                                  for path, field in config_definitions.leaves())}
  values = config_definitions.flat_settings(tree)
  return {name: value for name, value in values.items()
          if name in given or value != defaults[name]}

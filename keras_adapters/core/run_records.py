"""A run folder's records: `run.json` (what defines the run), `results.json` (what it gave)
and `sessions.json` (how each session that worked on it was made).

Every task kind writes and compares its runs here, so a run folder means one thing whatever
the task: rerunning into it resumes or returns that run, and anything else is refused with the
settings that differ. A definition is a dict with the task's identity (`task`, its training
data as `train_examples` and `train_fingerprint`, task-specific keys), the base encoder's
`base_fingerprint` and `config`, the `ExperimentConfig.definition()` settings by flag name.
"""

import dataclasses
import os
from typing import Any, Dict, List, Mapping, Optional

import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.models import adapter_config
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import provenance
from keras_adapters.utils import settings

RUN_FILE = "run.json"
RESULTS_FILE = "results.json"
SESSIONS_FILE = "sessions.json"

# Settings added after runs were first recorded, with the value every run recorded before
# them had: the precision and XLA settings, the adapter fields that had no flag of their
# own (a record then held them, when not the defaults, under `adapter_config`), and the
# method (every earlier run trained adapters or a baseline) with the other methods' defaults,
# and recomputing attention as "auto" (it changes no result, only memory and time, so it is
# an execution setting).
_SETTINGS_ADDED_LATER = dict(
    mixed_precision="float32", jit_compile=False, method=config_definitions.ADAPTERS_METHOD,
    recompute_attention="auto",
    **{config_definitions.setting_name(config_cls, path):
       list(value) if isinstance(value, tuple) else value
       for config_cls in config_definitions.LIBRARY_CONFIGS
       for path, _ in config_definitions.leaves(config_cls)
       for value in [getattr(config_cls(), path[-1])]})


class RunSettingsError(errors.UsageError):
  """A run folder holds a run with other settings; the message names them."""


def recorded_settings(recorded_config: Mapping[str, Any]) -> Dict[str, Any]:
  """A recorded config as today's settings by flag name: older records spelt the adapter
  fields without flags of their own in an `adapter_config` dict, and lack later settings."""
  values = dict(recorded_config)
  for name, value in (values.pop("adapter_config", None) or {}).items():
    values[_adapter_flag(name)] = value
  if values.get("tuning", "adapters") != "adapters":
    values["adapter_size"] = None
  for name, value in _SETTINGS_ADDED_LATER.items():
    values.setdefault(name, value)
  return values


def _adapter_flag(field_name):
  fields = {field.name: field for field in dataclasses.fields(
      adapter_config.AdapterConfig)}
  return settings.flag_name(fields[field_name]) if field_name in fields else field_name


def check_run_dir(model_dir: str, definition: Mapping[str, Any]) -> None:
  """Raises `RunSettingsError` unless `model_dir` is new or holds the run of `definition`."""
  recorded = atomic_io.read_json(os.path.join(model_dir, RUN_FILE))
  if recorded is None:
    results = atomic_io.read_json(os.path.join(model_dir, RESULTS_FILE))
    if results is not None:
      # Finished before runs recorded their definition: compared on what results.json holds
      # (not the data's fingerprint, which it lacks).
      recorded = dict(definition, task=results.get("task"),
                      train_examples=results.get("train_examples"),
                      config=results.get("config", {}))
    elif tf.train.latest_checkpoint(model_dir) is not None:
      raise RunSettingsError(
          f"{model_dir} holds checkpoints but no {RUN_FILE} recording their settings, so they "
          "cannot be resumed safely. Use a new model_dir=<folder>.")
    else:
      return
  differences = differences_between(recorded, definition)
  if differences:
    raise RunSettingsError(
        f"{model_dir} holds a run with other settings: {'; '.join(differences)}. Use a new "
        "model_dir=<folder> for the new settings, or the recorded ones to resume or reuse "
        "that run.")


def write_definition(model_dir: str, definition: Mapping[str, Any]) -> None:
  """Records `definition` in `model_dir`, once: a resumed run keeps its first record."""
  path = os.path.join(model_dir, RUN_FILE)
  if not tf.io.gfile.exists(path):
    atomic_io.write_json(path, definition)


def read_results(model_dir: str) -> Optional[Dict[str, Any]]:
  return atomic_io.read_json(os.path.join(model_dir, RESULTS_FILE))


def write_results(model_dir: str, results: Mapping[str, Any]) -> None:
  atomic_io.write_json(os.path.join(model_dir, RESULTS_FILE), results)


def record_session(model_dir: str, earlier: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
  """Adds this process's `provenance.record()` to the run's sessions and returns them all.

  Called before any work, so that a session stopped mid-training is named too: a resumed run
  may have trained under several commits. `earlier` are the sessions a run recorded in its
  results before it kept this file; they start the list when the file is new.
  """
  path = os.path.join(model_dir, SESSIONS_FILE)
  sessions = atomic_io.read_json(path)
  sessions = (list(earlier) if sessions is None else sessions) + [provenance.record()]
  atomic_io.write_json(path, sessions)
  return sessions


def differences_between(recorded: Mapping[str, Any], asked: Mapping[str, Any]) -> List[str]:
  """The settings in which two run definitions differ, each as `name=there there, name=now
  now` (config settings) or `name there there, now now` (the task's identity)."""
  differences = []
  for name, value in asked.items():
    if name in ("config", "train_examples", "train_fingerprint", "base_fingerprint",
                "format_version"):
      continue
    there = recorded.get(name)
    if there != value:
      differences.append(f"{name.replace('_', ' ')} {there!r} there, {value!r} now")
  if (recorded.get("train_examples"), recorded.get("train_fingerprint")) != (
      asked["train_examples"], asked["train_fingerprint"]):
    differences.append(
        f"training data of {recorded.get('train_examples')} examples "
        f"({str(recorded.get('train_fingerprint'))[:19]}) there, {asked['train_examples']} "
        f"({str(asked['train_fingerprint'])[:19]}) now")
  if recorded.get("base_fingerprint") != asked["base_fingerprint"]:
    differences.append("another base encoder (its weights differ)")
  there = recorded_settings(recorded.get("config", {}))
  for name, value in asked["config"].items():
    if there.get(name) != value:
      differences.append(f"{name}={there.get(name)!r} there, {name}={value!r} now")
  return differences

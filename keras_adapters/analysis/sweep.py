"""Hyper-parameter sweeps over `ExperimentConfig` settings, with the paper's model selection.

Houlsby et al. (2019) choose, per GLUE task, the learning rate, the number of epochs and the
adapter size on the validation set. `run_sweep` runs every point of such a grid, each in its
own folder, so an interrupted sweep resumes where it stopped, picks the best point on the
validation split, and exports it:

  grid = dict(learning_rate=[3e-5, 3e-4, 3e-3], epochs=[3, 20], adapter_size=[8, 64, 256],
              seed=[0, 1, 2])
  result = sweep.run_sweep(spec, splits, base_config, grid, "runs/mrpc",
                           export_best_dir="exports/mrpc")

With `seed` in the grid, a setting is judged by its mean validation score over the seeds, so a
lucky seed cannot win on its own; the best seed of the chosen setting is exported.
"""

import dataclasses
import itertools
import json
import os
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from keras_adapters.core import run_records
from keras_adapters.core import config_definitions
from keras_adapters.core import grid as grid_lib
from keras_adapters.data import examples as examples_lib
from keras_adapters.tasks import classification
from keras_adapters.training import trainer
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance

SWEEP_JSON = "sweep.json"
SWEEP_MARKDOWN = "sweep.md"
# Under the sweep's root: the rerun of the chosen trial that predicts and exports (see
# `rerun_finished`).
BEST_DIR = "best"

_SEED = "seed"
_UNSAFE_CHARACTERS = re.compile(r"[^A-Za-z0-9._+-]")
# Per-trial facts copied from the run's results into sweep.json, beside config and metrics.
_TRIAL_FACTS = ("parameters", "train_examples", "num_train_steps", "train_seconds",
                "seconds_per_epoch", "examples_per_second", "total_seconds")

RunFn = Callable[..., Mapping[str, Any]]


@dataclasses.dataclass(frozen=True)
class SweepResult:
  """What `run_sweep` returns.

  Attributes:
    summary: The dict written to `sweep.json`: every trial and the choice.
    best: The chosen trial's results, with the predictions of the unlabelled splits (from
      its rerun, see `run_sweep`).
  """
  summary: Dict[str, Any]
  best: Mapping[str, Any]


# Run configs are read and made here only, for every analysis runner: elsewhere the runners
# read settings by name from flat dicts, as a run's results record them under "config".


def settings_of(config: config_definitions.ExperimentConfig) -> Dict[str, Any]:
  """A run config's settings as a flat dict by name (what results record under "config")."""
  return config.settings()


def with_settings(config: config_definitions.ExperimentConfig,
                  **settings: Any) -> config_definitions.ExperimentConfig:
  """`config` with the named settings changed (and checked)."""
  return config.replace(**settings)


def recorded_settings(recorded: Mapping[str, Any], names: Iterable[str]) -> Dict[str, Any]:
  """The settings `names` of a recorded config (a results record's or a table's "config"):
  one added since it was written reads as the value every run had then."""
  upgraded = run_records.recorded_settings(recorded)
  return {name: upgraded.get(name) for name in names}


def check_run_dirs(spec: examples_lib.TaskSpec,
                   splits: Mapping[str, examples_lib.TextExamples],
                   runs: Iterable[Tuple[config_definitions.ExperimentConfig, str]]) -> None:
  """Refuses, before any of them trains, runs whose folder holds a run with other settings.

  Args:
    spec: The task.
    splits: The splits the runs are given.
    runs: (config, run folder) of every run; folders that do not exist yet pass.

  Raises:
    run_records.RunSettingsError: A folder's `run.json` records other settings (the run
      driver's check, `classification.check_run_dir`).
  """
  for config, run_dir in runs:
    if tf.io.gfile.isdir(run_dir):
      classification.check_run_dir(spec, splits, config, run_dir)


def expand_grid(base_config: config_definitions.ExperimentConfig,
                grid: Mapping[str, Sequence[Any]]) -> List[config_definitions.ExperimentConfig]:
  """Returns one config per grid point, the first field varying slowest.

  Args:
    base_config: Values of the fields the grid does not name.
    grid: setting name (as its flag) → the values to try, e.g. `{"learning_rate": [3e-4, 3e-3]}`.

  Returns:
    The configs in a stable order: that of `itertools.product` over the grid's values.

  Raises:
    ValueError: The grid is empty, names an unknown field, gives a field no values or the
      same value twice, a value the config rejects, or points that make the same config
      (such as `adapter_size` with a `tuning` that has no adapters).
  """
  if not grid:
    raise ValueError("The grid is empty: give at least one setting and its values, "
                     "e.g. {'learning_rate': [3e-4, 3e-3]}.")
  valid = list(settings_of(base_config))
  for field, values in grid.items():
    if field not in valid:
      raise ValueError(f"The grid names {field!r}, which is not a setting; the settings "
                       f"are: {', '.join(valid)}.")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
      raise ValueError(f"The grid gives {field!r} the values {values!r}; give a non-empty "
                       "list, e.g. [3e-4, 3e-3].")
    if len(set(values)) != len(values):
      raise ValueError(f"The grid gives {field!r} a value twice: {list(values)}; each point "
                       "would run twice in one folder.")
  configs = [with_settings(base_config, **dict(zip(grid, point)))
             for point in itertools.product(*grid.values())]
  if len({json.dumps(settings_of(config), sort_keys=True, default=str)
          for config in configs}) != len(configs):
    raise ValueError(
        f"Different grid points give the same config: with "
        f"tuning={settings_of(base_config)['tuning']!r} some "
        f"of {', '.join(grid)} are ignored (adapter_size needs tuning='adapters', top_k "
        "tuning='top_k'). Drop those fields from the grid.")
  return configs


def trial_name(config: config_definitions.ExperimentConfig, grid_fields: Sequence[str]) -> str:
  """Returns a readable, file-system-safe folder name for one grid point.

  Args:
    config: The trial's config.
    grid_fields: The fields the grid varies, in grid order.

  Returns:
    E.g. `"learning_rate=0.0003,epochs=3,adapter_size=64,seed=0"`: whole floats without
    ".0", other floats in their shortest exact form, a list's items joined by "-"
    (`leave_out=0-1`), characters outside `[A-Za-z0-9._+-]` of string values replaced by
    "_".
  """
  settings = settings_of(config)
  return ",".join(f"{field}={_format_value(settings[field])}" for field in grid_fields)


def _format_value(value) -> str:
  if isinstance(value, (list, tuple)):
    return "-".join(_format_value(item) for item in value)
  if isinstance(value, float):
    text = str(int(value)) if value.is_integer() else repr(value)
  else:
    text = str(value)
  return _UNSAFE_CHARACTERS.sub("_", text)


def rerun_finished(spec: examples_lib.TaskSpec,
                   splits: Mapping[str, examples_lib.TextExamples],
                   config: config_definitions.ExperimentConfig,
                   run_dir: str,
                   rerun_dir: str,
                   export_dir: Optional[str] = None,
                   run_fn: RunFn = classification.run_task) -> Mapping[str, Any]:
  """Scores, predicts and optionally exports the model of a finished run, without training.

  A finished run's folder returns its recorded results: it never scores new splits or
  exports afterwards, and training anew would not give the same weights on every device. So
  the run's checkpoints and completion marker, without its results, are copied to
  `rerun_dir`: `run_fn` resumes there at the final step, trains nothing, scores and predicts
  `splits` and exports. The original run's folder and results stay as they were.

  Args:
    spec: The task.
    splits: The run's training split and the splits to score or predict.
    config: The run's config.
    run_dir: The finished run's folder.
    rerun_dir: The folder of the rerun. One that already holds a finished rerun of this run
      (the same `run.json`) with this `export_dir` is reused; any other content is replaced.
    export_dir: If set, receives `saved_model/` and `adapters/`.
    run_fn: Runs one config (`classification.run_task`; replaceable in tests).

  Returns:
    The rerun's results.
  """
  results = atomic_io.read_json(os.path.join(rerun_dir, run_records.RESULTS_FILE))
  # Compared rather than trusted: a resumed sweep may since have chosen another trial.
  if (results is not None and results.get("export_dir") == export_dir
      and _same_run(run_dir, rerun_dir)):
    return results
  _copy_run(run_dir, rerun_dir)
  return run_fn(spec, splits, config, rerun_dir, export_dir=export_dir, progress_bar=False)


def _same_run(run_dir: str, rerun_dir: str) -> bool:
  """Whether `rerun_dir` is a copy of the run in `run_dir`: their `run.json` (what defines a
  run, copied with its checkpoints) are one."""
  recorded = atomic_io.read_json(os.path.join(rerun_dir, run_records.RUN_FILE))
  return recorded is not None and recorded == atomic_io.read_json(
      os.path.join(run_dir, run_records.RUN_FILE))


def _copy_run(run_dir: str, rerun_dir: str) -> None:
  """Replaces `rerun_dir` with a copy of `run_dir` without its results and summaries (on
  any file system TensorFlow serves)."""
  if tf.io.gfile.exists(rerun_dir):
    tf.io.gfile.rmtree(rerun_dir)
  for folder, _, files in tf.io.gfile.walk(run_dir):
    inside = folder[len(run_dir):].strip("/")
    if inside.split("/")[0] == trainer.SUMMARIES_DIR:
      continue
    tf.io.gfile.makedirs(os.path.join(rerun_dir, inside))
    for name in files:
      if (inside, name) != ("", run_records.RESULTS_FILE):
        tf.io.gfile.copy(os.path.join(folder, name), os.path.join(rerun_dir, inside, name))


def selection_split_for(splits: Mapping[str, examples_lib.TextExamples]) -> str:
  """Returns the split a sweep selects on: "validation", else the first labelled
  "validation*" split (MNLI's "validation_matched")."""
  candidates = [name for name, split in splits.items()
                if name.startswith("validation") and split.labels is not None]
  if not candidates:
    raise ValueError(
        f"A sweep selects on a labelled validation split, but the splits are {list(splits)}; "
        "add one named 'validation' (never select on the test split).")
  return "validation" if "validation" in candidates else candidates[0]


def run_sweep(spec: examples_lib.TaskSpec,
              splits: Mapping[str, examples_lib.TextExamples],
              base_config: config_definitions.ExperimentConfig,
              grid: Mapping[str, Sequence[Any]],
              root_dir: str,
              export_best_dir: Optional[str] = None,
              run_fn: RunFn = classification.run_task,
              selection_split: Optional[str] = None) -> SweepResult:
  """Runs every grid point, selects the best on validation, records and exports it.

  Trial `name` (see `trial_name`) runs in `<root_dir>/<name>`, a point of a `core.grid`
  whose records are the trials' folders: `run_fn`, like `run_task`, returns a finished
  folder's recorded results at once, so rerunning an interrupted sweep trains only the trials
  that had not finished (a folder holding a run of other settings is refused before any
  trains). Trials see the labelled splits only: the unlabelled ones (a GLUE test set) are
  predicted by the chosen trial alone, in its rerun in `<root_dir>/best` (see
  `rerun_finished`), which also exports it. `sweep.json` records every trial and the choice.

  Selection uses the first metric of `spec` on `selection_split` (all GLUE metrics are
  better when higher). Trials that differ only in `seed` form one setting: the setting with
  the highest mean score wins, then its highest-scoring seed. Ties go to the earlier trial in
  grid order.

  Args:
    spec: The task.
    splits: Split name → examples, with "train" and a labelled validation split.
    base_config: Values of the fields the grid does not vary.
    grid: setting → values (see `expand_grid`).
    root_dir: Folder of the trials, `sweep.json` and `sweep.md`.
    export_best_dir: If set, the chosen trial's model is exported there (`saved_model/`,
      `adapters/`).
    run_fn: Runs one config (`classification.run_task`; replaceable in tests).
    selection_split: The split to select on; default: `selection_split_for(splits)`.

  Returns:
    The summary written to `sweep.json`, and the chosen trial's results, with the
    predictions of the unlabelled splits.

  Raises:
    ValueError: A bad grid (see `expand_grid`) or no labelled selection split.
    run_records.RunSettingsError: A trial's folder holds a run with other settings
      (checked for every trial before the first trains).
  """
  configs = expand_grid(base_config, grid)
  selection_split = selection_split or selection_split_for(splits)
  if selection_split not in splits or splits[selection_split].labels is None:
    raise ValueError(f"Cannot select on {selection_split!r}: it is not a labelled split of "
                     f"{list(splits)}.")
  labelled = {name: split for name, split in splits.items() if split.labels is not None}
  metric = spec.metrics[0]
  setting_fields = [field for field in grid if field != _SEED]
  points = [grid_lib.Point(trial_name(config, list(grid)), config) for config in configs]
  check_run_dirs(spec, labelled, [(point.settings, os.path.join(root_dir, point.key))
                                  for point in points])
  results = {}

  def run_trial(point):
    config, name = point.settings, point.key
    results[name] = run_fn(spec, labelled, config, os.path.join(root_dir, name),
                           progress_bar=False)
    score = results[name]["metrics"][selection_split][metric]
    logging.info("Trial %d/%d %s: %s %s %.4f", points.index(point) + 1, len(points), name,
                 selection_split, metric, score)
    return dict(name=name, setting=trial_name(config, setting_fields),
                config=settings_of(config), score=score, metrics=results[name]["metrics"],
                **{fact: results[name][fact] for fact in _TRIAL_FACTS})

  # The trials' records are their folders' results: the sweep resumes from them.
  trials = list(grid_lib.run(points, run_trial).values())
  settings = {}
  for index, trial in enumerate(trials):
    settings.setdefault(trial["setting"], []).append(index)
  means = {setting: grid_lib.aggregate([trials[i]["score"] for i in indices])["mean"]
           for setting, indices in settings.items()}
  best_setting = max(settings, key=means.get)
  best = max(settings[best_setting], key=lambda index: trials[index]["score"])
  best_results = results[trials[best]["name"]]
  # Predicting a test set costs like scoring a validation set, and only the chosen model's
  # predictions are used, so trials skipped the unlabelled splits.
  if export_best_dir or len(labelled) < len(splits):
    best_results = rerun_finished(spec, splits, configs[best],
                                  os.path.join(root_dir, trials[best]["name"]),
                                  os.path.join(root_dir, BEST_DIR), export_best_dir, run_fn)

  summary = dict(
      task=spec.name, selection_split=selection_split, selection_metric=metric,
      metrics=list(spec.metrics),
      evaluation_splits=[name for name in labelled if name != "train"],
      grid={field: list(values) for field, values in grid.items()},
      averaged_over_seeds=_SEED in grid, base_config=settings_of(base_config),
      trials=trials,
      settings=[dict(name=setting, trials=[trials[i]["name"] for i in indices],
                     scores=[trials[i]["score"] for i in indices], mean_score=means[setting])
                for setting, indices in settings.items()],
      choice=dict(setting=best_setting, mean_score=means[best_setting],
                  trial=trials[best]["name"], score=trials[best]["score"],
                  config=trials[best]["config"], export_dir=export_best_dir))
  # Beside the runs, with their folders as they are (the best trial's results name them).
  summary = provenance.stamped(summary)
  atomic_io.write_json(os.path.join(root_dir, SWEEP_JSON), summary)
  atomic_io.write_text(os.path.join(root_dir, SWEEP_MARKDOWN), markdown_table(summary))
  return SweepResult(summary=summary, best=best_results)


def markdown_table(summary: Mapping[str, Any]) -> str:
  """The sweep as Markdown: one row per trial, scores in %, the chosen trial marked."""
  choice = summary["choice"]
  averaged = summary["averaged_over_seeds"]
  means = {setting["name"]: setting["mean_score"] for setting in summary["settings"]}
  score_columns = [(split, metric) for split in summary["evaluation_splits"]
                   for metric in summary["metrics"]]
  title = (f"Sweep of `{summary['task']}`: {len(summary['trials'])} trials, selected on "
           f"{summary['selection_split']} {summary['selection_metric']} (%)")
  if averaged:
    title += " by the mean over seeds of each setting, then the best seed of the best setting"
  title += f". Chosen: `{choice['trial']}`, {100 * choice['score']:.2f}"
  if averaged:
    title += f" (setting mean {100 * choice['mean_score']:.2f})"
  if choice["export_dir"]:
    title += f", exported to `{choice['export_dir']}`"
  header = ["chosen", *summary["grid"], *(f"{split} {metric}" for split, metric in score_columns)]
  header += ["mean over seeds"] * averaged + ["trained params", "s / epoch"]
  lines = [title + ".", "", _table_row(header), _table_row(["---"] * len(header))]
  for trial in summary["trials"]:
    cells = ["**best**" if trial["name"] == choice["trial"] else "",
             *(_format_value(trial["config"][field]) for field in summary["grid"]),
             *(f"{100 * trial['metrics'][split][metric]:.2f}" for split, metric in score_columns)]
    cells += [f"{100 * means[trial['setting']]:.2f}"] * averaged
    cells += [f"{trial['parameters']['trainable']:,}", f"{trial['seconds_per_epoch']:.1f}"]
    lines.append(_table_row(cells))
  return "\n".join(lines) + "\n"


def _table_row(cells: Sequence[str]) -> str:
  return "| " + " | ".join(cells) + " |"

"""The paper's analysis as studies: grids of runs on the task runner, a reduction, a figure.

A study is a list of trials (an `ExperimentConfig` and the point of the figure it counts for). Every
trial runs through `classification.run_task` in its own folder, named after the settings the
studies vary (`sweep.trial_name`), under one root per task and budget: a trial two studies
share (adapters m=64 at the paper's init and the comparison's learning rate and seed are in
every study) trains once, a finished trial is never trained again, and an interrupted study
resumes where it stopped. After each trial the
study's JSON is rewritten atomically with everything finished so far; it records the settings
the trials share, so the JSON alone (committed, on a clone without the run folders) resumes
the study at its first unrecorded trial.

Each point of a figure is a setting scored over seeds on the validation split (the paper's
Figures 4, 6 and 7 show validation accuracy). Where a budget gives a point several options
(learning rates or epochs, `OPTION_FIELDS`), the option with the best mean over seeds is the
point, as the paper selects "the best model for each point along the curve".

Studies (`build_study`):
  ablation: adapters m=64, one seed; its trained adapters are then removed from every span
    of layers (`ablation.evaluate_spans`). Figure 6, left and centre.
  init_scale: adapter init std over 1e-7 ... 1, one point per decade. Figure 6, right.
  tradeoff: adapters of sizes 2 ... 256, top-k for k = 1 ... L, LayerNorm-only and full
    fine-tuning, and the methods that followed (LoRA of ranks 1 ... 64, (IA)³), scored
    against trained parameters. Figures 3 and 4.
  learning_rate: every method of the comparison (`method_comparison.METHODS`) at the rates of
    `LEARNING_RATES`, each grid wide enough that its best rate is inside it. Figure 7.
  adapter_drop: AdapterDrop (Rücklé et al. 2021): the adapters (m=64) left out of the lowest
    0 ... 4 of 6 layers (`DROPPED_SIXTHS`), with what lies below the lowest adapters frozen,
    as AdapterDrop trains them, so that the backward pass stops there; what that buys in step
    time, `bench/adapter_drop.py` measures.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from keras_adapters.core import run_records
from keras_adapters.core import config_definitions
from keras_adapters.analysis import ablation
from keras_adapters.analysis import method_comparison
from keras_adapters.analysis import sweep
from keras_adapters.core import grid
from keras_adapters.data import examples as examples_lib
from keras_adapters.tasks import classification
from keras_adapters.training import trainer
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

STUDIES = ("ablation", "init_scale", "tradeoff", "learning_rate", "adapter_drop")
FIGURES = dict(ablation="Figure 6 (left, centre)", init_scale="Figure 6 (right)",
               tradeoff="Figures 3-4", learning_rate="Figure 7", adapter_drop="AdapterDrop")
# The settings that studies vary: a trial's folder is named after them.
VARIED_FIELDS = ("tuning", "adapter_size", "top_k", "adapter_init_stddev", "learning_rate",
                 "epochs", "seed")
# What the methods after the adapters vary besides: appended to the folder names of their
# trials only, so the adapters' family keeps the names its trials had before them.
METHOD_FIELDS = ("method", "lora_r")
# What AdapterDrop's trials vary besides: appended to the folder names of the trials that
# leave layers out only, so the adapters in every layer keep the folder other studies share.
DROP_FIELDS = ("leave_out", "freeze_below_adapters")
# The settings a study sets for each run besides its `VARIED_FIELDS`.
SET_BY_STUDY = dict(adapter_drop=DROP_FIELDS)
_FIRST_METHOD = config_definitions.ADAPTERS_METHOD
# Fields over which a point keeps its best option (selected on the mean over seeds).
OPTION_FIELDS = ("learning_rate", "epochs")
EVAL_SPLIT = "validation"

INIT_STDDEVS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
ADAPTER_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)
# AdapterDrop's points: the lowest layers left without adapters, in sixths of the base's
# layers (0 ... 4 of the default base's 6; 0, 2 ... 8 of BERT-base's 12), as
# bench/adapter_drop.py times them.
DROPPED_SIXTHS = (0, 1, 2, 3, 4)
LORA_RANKS = (1, 2, 4, 8, 16, 64)
# Figure 7's methods and the rates each is tried at: every method of the comparison, so each
# trains there at a rate selected the same way. A grid whose best rate sits at its edge grows
# past it (the adapters' best was 3e-3, its top). LoRA, (IA)³ and LayerNorm-only train few
# parameters from the identity (B at zero, scales at one), so their ranges reach higher; top-k
# trains whole layers, as full fine-tuning does.
_PAPER_RANGE = (2e-5, 5e-5, 1e-4, 3e-4, 1e-3)
LEARNING_RATES = dict(adapters=_PAPER_RANGE + (3e-3, 1e-2), full=_PAPER_RANGE,
                      top_k=(3e-5, 1e-4, 3e-4, 1e-3),
                      layer_norm=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
                      lora=(3e-4, 1e-3, 3e-3, 1e-2), ia3=(1e-3, 3e-3, 1e-2, 3e-2))
# The paper's budget: its sweep of learning rates for the additional tasks (section 3.3),
# a denser grid over Figure 7's range, where each rate keeps its best of two epoch counts.
PAPER_SWEEP_LEARNING_RATES = (1e-5, 3e-5, 1e-4, 3e-3)
_PAPER_DENSE_RANGE = (2e-5, 3e-5, 5e-5, 1e-4, 2e-4, 3e-4, 5e-4, 1e-3)
PAPER_LEARNING_RATES = dict(LEARNING_RATES, adapters=_PAPER_DENSE_RANGE, full=_PAPER_DENSE_RANGE)
PAPER_EPOCH_OPTIONS = (3.0, 20.0)


@dataclasses.dataclass(frozen=True)
class Budget:
  """How much every run of a study trains.

  Attributes:
    name: `"cpu"` or `"paper"`.
    max_train_examples: A fixed subset of the training split (0: all of it).
    epochs: Training epochs of each run.
    batch_size: Examples per training step.
  """
  name: str
  max_train_examples: int
  epochs: float
  batch_size: int


# Sized for 2 CPU cores and the embedded 6-layer base: 125 steps of batch 16 per run, about
# 1.5 min each. Fewer steps leave a classifier at its majority class (on airline, 500
# examples for 2 epochs of batch 32 did), which would make every study flat.
CPU_BUDGET = Budget("cpu", max_train_examples=1000, epochs=2.0, batch_size=16)
# The paper's: the whole training split, 20 epochs (its shortest for the additional tasks),
# batch 32.
PAPER_BUDGET = Budget("paper", max_train_examples=0, epochs=20.0, batch_size=32)


@dataclasses.dataclass(frozen=True)
class Trial:
  """One run of a study.

  Attributes:
    point: The figure's point it counts for, as (name, value) pairs, e.g.
      `(("method", "adapters"), ("adapter_size", 8))`.
    config: The run's config.
  """
  point: Tuple[Tuple[str, Any], ...]
  config: config_definitions.ExperimentConfig

  @property
  def name(self) -> str:
    name = sweep.trial_name(self.config, VARIED_FIELDS)
    if self.settings["method"] != _FIRST_METHOD:
      name += "," + sweep.trial_name(self.config, METHOD_FIELDS)
    if self.settings["leave_out"]:
      name += "," + sweep.trial_name(self.config, DROP_FIELDS)
    return name

  @property
  def settings(self) -> Dict[str, Any]:
    """The config's settings by name (`sweep.settings_of`)."""
    return sweep.settings_of(self.config)


@dataclasses.dataclass(frozen=True)
class Study:
  """A study: its name, the paper figure it mirrors and its trials in running order."""
  name: str
  figure: str
  trials: Tuple[Trial, ...]


def _method(base_config, method, num_layers, rates=None, **overrides):
  return sweep.with_settings(
      method_comparison.method_config(base_config, method, num_layers, rates), **overrides)


def _trials(point, configs, seeds):
  return [Trial(tuple(point.items()), sweep.with_settings(config, seed=seed))
          for config in configs for seed in seeds]


def _options(config, learning_rates=None, epochs=None):
  """`config` once per option: each learning rate and epoch count given (else its own)."""
  settings = sweep.settings_of(config)
  return [sweep.with_settings(config, learning_rate=rate, epochs=count)
          for rate in (learning_rates or (settings["learning_rate"],))
          for count in (epochs or (settings["epochs"],))]


def build_study(name: str, base_config: config_definitions.ExperimentConfig, seeds: Sequence[int],
                num_layers: int, paper: bool = False,
                rates: Optional[method_comparison.SelectedRates] = None) -> Study:
  """The trials of study `name`.

  Args:
    name: One of `STUDIES`.
    base_config: The shared settings and budget (handles, epochs, batch, sequence length).
    seeds: Seeds of every point; the ablation trains with the first only.
    num_layers: Transformer layers of the base (top-k's k runs over 1 ... num_layers).
    paper: Use the paper's grids (see the module constants) instead of the CPU ones.
    rates: The learning rates a learning-rate study selected (`selected_rates`), each
      method's points train at; the learning-rate study itself sets its own.

  Returns:
    The `Study`.

  Raises:
    ValueError: An unknown study or no seeds.
  """
  if name not in STUDIES:
    raise ValueError(f"Unknown study {name!r}; choose one of {', '.join(STUDIES)}.")
  if not seeds:
    raise ValueError("A study needs at least one seed (seeds=[0, 1, 2]).")
  adapters = _method(base_config, "adapters", num_layers, rates)
  trials = []
  if name == "ablation":
    trials = _trials(dict(method="adapters"), [adapters], seeds[:1])
  elif name == "init_scale":
    for stddev in INIT_STDDEVS:
      trials += _trials(dict(adapter_init_stddev=stddev),
                        [sweep.with_settings(adapters, adapter_init_stddev=stddev)], seeds)
  elif name == "tradeoff":
    swept = PAPER_SWEEP_LEARNING_RATES if paper else None
    points = [(dict(method="adapters", adapter_size=size),
               sweep.with_settings(adapters, adapter_size=size)) for size in ADAPTER_SIZES]
    points += [(dict(method="top_k", top_k=k), _method(base_config, "top_k", num_layers, rates,
                                                       top_k=k))
               for k in range(1, num_layers + 1)]
    points += [(dict(method=method), _method(base_config, method, num_layers, rates))
               for method in ("layer_norm", "full")]
    # alpha stays at its default over the ranks, as Hu et al. keep it (scaling alpha / r).
    points += [(dict(method="lora", lora_r=rank),
                _method(base_config, "lora", num_layers, rates, lora_r=rank))
               for rank in LORA_RANKS]
    points.append((dict(method="ia3"), _method(base_config, "ia3", num_layers, rates)))
    for point, config in points:
      trials += _trials(point, _options(config, learning_rates=swept), seeds)
  elif name == "adapter_drop":
    for sixths in DROPPED_SIXTHS:
      dropped = sixths * num_layers // 6
      trials += _trials(dict(method="adapters", lowest_left_out=dropped),
                        [sweep.with_settings(adapters, leave_out=list(range(dropped)),
                                             freeze_below_adapters=dropped > 0)], seeds)
  else:  # learning_rate
    for method, rates in (PAPER_LEARNING_RATES if paper else LEARNING_RATES).items():
      for rate in rates:
        config = _method(base_config, method, num_layers, learning_rate=rate)
        trials += _trials(dict(method=method, learning_rate=rate),
                          _options(config, epochs=PAPER_EPOCH_OPTIONS if paper else None),
                          seeds)
  return Study(name, FIGURES[name], tuple(trials))


def run_study(study: Study,
              spec: examples_lib.TaskSpec,
              splits: Mapping[str, examples_lib.TextExamples],
              root_dir: str,
              summary_path: str,
              budget: Budget,
              run_fn: Callable[..., Mapping[str, Any]] = classification.run_task,
              export_trials: bool = False,
              note: Optional[str] = None,
              log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Runs every trial not finished yet and writes the study's JSON after each.

  The trials are the points of a `core.grid` whose records are the JSON's runs. A trial is
  finished where its folder holds its results or the study's JSON records it under the same
  `shared_settings` (a JSON of other settings is dropped, its trials run again). A trial whose
  training diverges is recorded as such (the paper's large init scales may diverge) and not
  run again by a resumed study; every other error stops the study.

  Args:
    study: The study.
    spec: The task.
    splits: "train" and `EVAL_SPLIT`; only these are given to the runs.
    root_dir: Folder of the trials' folders (shared by the studies of one task and budget).
    summary_path: The study's JSON.
    budget: The budget, recorded in the JSON.
    run_fn: Runs one config (`classification.run_task`; replaceable in tests).
    export_trials: Export each trial to `<its folder>/export` (the ablation needs the
      adapter artifact).
    note: A sentence the JSON and the figure carry (e.g. that the base saw the task).
    log: Where progress lines go.

  Returns:
    The summary written to `summary_path`.

  Raises:
    run_records.RunSettingsError: A trial's folder holds a run with other settings; raised
      before any trial trains.
  """
  splits = {name: splits[name] for name in ("train", EVAL_SPLIT)}
  sweep.check_run_dirs(spec, splits, [(trial.config, os.path.join(root_dir, trial.name))
                                      for trial in study.trials])
  settings = shared_settings(study, spec, splits)
  previous = grid.read(summary_path, settings,
                       identity_of=lambda summary: _recorded_settings(summary, settings),
                       on_other_identity=grid.drop)
  recorded = _recorded_outcomes(previous, keep_scores=not export_trials)
  # What later steps added to the summary (the ablation's spans) stays in it.
  kept = {key: value for key, value in previous.items() if key not in _SUMMARY_KEYS}
  kept.update({} if note is None else dict(note=note))

  def write(outcomes):
    return write_json(summary_path, {**summarize(study, spec, splits, budget, outcomes),
                                     "settings": settings, **kept})

  pending = [trial for trial in study.trials if not tf.io.gfile.exists(
      os.path.join(root_dir, trial.name, run_records.RESULTS_FILE))
             and trial.name not in recorded]
  log(f"Study {study.name} ({study.figure}) on {spec.name}: {len(study.trials)} run(s), "
      f"{len(study.trials) - len(pending)} finished already. "
      + budget_line(budget, splits, study.trials))
  numbers = {trial.name: number for number, trial in enumerate(study.trials, start=1)}

  def run_trial(point):
    trial, run_dir = point.settings, os.path.join(root_dir, point.key)
    log(f"[{numbers[trial.name]}/{len(study.trials)}] {trial.name}")
    try:
      results = run_fn(spec, splits, trial.config, run_dir,
                       **(dict(export_dir=os.path.join(run_dir, "export"))
                          if export_trials else {}), progress_bar=False)
    except trainer.TrainingDivergedError as error:
      log(f"  diverged: {error}")
      return dict(name=trial.name, diverged=str(error))
    outcome = _outcome(trial, results, spec.metrics[0])
    log(f"  {EVAL_SPLIT} {spec.metrics[0]}: {outcome['score']:.2f}")
    return outcome

  return write(grid.run([grid.Point(trial.name, trial) for trial in study.trials], run_trial,
                        done=recorded, write=write))


class SelectionError(ValueError):
  """A learning-rate study's record selects no usable rate; the message says why and how."""


def selected_rates(summary: Mapping[str, Any],
                   source: str) -> method_comparison.SelectedRates:
  """Each method's best rate in a finished learning-rate study's record (`summary`).

  The best rate of a method is its point with the best mean over seeds. One at an end of the
  method's grid is refused: a rate past it may be better, so the grid (`LEARNING_RATES`)
  must grow until the best is inside it.

  Args:
    summary: The learning-rate study's JSON.
    source: Where it was read from, as the rows that train at its rates will name it.

  Returns:
    The `method_comparison.SelectedRates`.

  Raises:
    SelectionError: Not a finished learning-rate study, or a best rate at its grid's end.
  """
  if summary.get("study") != "learning_rate" or not summary.get("complete"):
    raise SelectionError(f"{source} is no finished learning-rate study; run "
                         "--study=learning_rate to the end first.")
  by_method: Dict[str, List[Mapping[str, Any]]] = {}
  for point in summary["points"]:
    if point["mean"] is not None:
      by_method.setdefault(point["method"], []).append(point)
  rates = {}
  for method, points in by_method.items():
    grid_rates = sorted(point["learning_rate"] for point in points)
    best = max(points, key=lambda point: point["mean"])["learning_rate"]
    if best in (grid_rates[0], grid_rates[-1]):
      raise SelectionError(
          f"{source}: {method}'s best rate {best:g} is at the end of its grid "
          f"({', '.join(f'{rate:g}' for rate in grid_rates)}); widen LEARNING_RATES[{method!r}] "
          "past it and run --study=learning_rate again.")
    rates[method] = best
  return method_comparison.SelectedRates(rates, source)


def shared_settings(study: Study, spec, splits) -> Dict[str, Any]:
  """What every trial of `study` shares: the task, the data sizes and the fixed config fields.

  A run recorded in a study's JSON counts as finished for a later study only where these are
  equal, so a committed JSON resumes a study on a machine without its run folders.
  """
  config = study.trials[0].settings
  return paths.portable(dict(
      task=spec.name, train_examples=len(splits["train"]),
      eval_examples=len(splits[EVAL_SPLIT]),
      config={field: value for field, value in sorted(config.items())
              if field not in VARIED_FIELDS}), os.getcwd())


def _recorded_settings(summary, settings):
  """The `shared_settings` a study's JSON records, in the terms of `settings`: a config field
  added since it was written reads as the value every run had then
  (`sweep.recorded_settings`). `None` where it records none."""
  recorded = summary.get("settings")
  if recorded is None:
    return None
  return dict(recorded, config=sweep.recorded_settings(recorded.get("config", {}),
                                                        settings["config"]))


def _recorded_outcomes(previous, keep_scores):
  """The outcomes `previous` (a study's JSON of the same settings) holds.

  Diverged runs always count; scored ones only with `keep_scores` (the ablation needs its
  run's folder for the adapters it removes, so it trains again where that folder is gone).
  """
  fields = ("score", "trainable_parameters", "train_seconds", "total_seconds")
  recorded = {}
  for run in previous.get("runs", []):
    if run.get("diverged"):
      recorded[run["name"]] = dict(name=run["name"], diverged=run["diverged"])
    elif keep_scores and "score" in run:
      # Runs recorded before studies kept their sessions have none to keep.
      sessions = {provenance.KEY: run[provenance.KEY]} if provenance.KEY in run else {}
      recorded[run["name"]] = dict(name=run["name"], **{key: run[key] for key in fields},
                                   **sessions)
  return recorded


def budget_line(budget: Budget, splits, trials: Sequence[Trial]) -> str:
  """The budget in words, e.g. "Budget cpu: 1,000 training examples, 2 epoch(s), ..."."""
  epochs = sorted({trial.settings["epochs"] for trial in trials})
  config = trials[0].settings
  return (f"Budget {budget.name}: {len(splits['train']):,} training examples, "
          f"{'/'.join(f'{e:g}' for e in epochs)} epoch(s), batch {config['batch_size']}, "
          f"{config['max_seq_length']} tokens max; scored on {len(splits[EVAL_SPLIT]):,} "
          f"{EVAL_SPLIT} examples.")


def _outcome(trial, results, metric):
  # The run's own sessions: a study resumed over several sessions, or reading runs another
  # study trained, names the command and commit behind each score; its top-level provenance
  # names only the session that wrote it last.
  return dict(name=trial.name, score=100.0 * results["metrics"][EVAL_SPLIT][metric],
              trainable_parameters=results["parameters"]["trainable"],
              train_seconds=results["train_seconds"],
              total_seconds=results.get("total_seconds", results["train_seconds"]),
              **{provenance.KEY: results[provenance.KEY]})


_SUMMARY_KEYS = ("study", "figure", "task", "metric", "eval_split", "complete", "budget",
                 "runs", "points", "settings")


def summarize(study: Study, spec, splits, budget: Budget,
              outcomes: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
  """The study's record: its budget and cost, every run, and every point of its figure.

  Args:
    study: The study.
    spec: The task.
    splits: "train" and `EVAL_SPLIT`.
    budget: The budget.
    outcomes: Trial name → `{"score", "trainable_parameters", "train_seconds",
      "total_seconds", provenance.KEY}` of a finished trial (the last, the sessions that made
      the run, where recorded), or `{"diverged": message}`.

  Returns:
    A JSON-ready dict; `complete` says whether every trial has an outcome.
  """
  finished = [outcome for outcome in outcomes.values() if "score" in outcome]
  config = study.trials[0].settings
  runs = [dict(name=trial.name, point=dict(trial.point),
               **{field: value for field, value in trial.settings.items()
                  if field in VARIED_FIELDS},
               **{key: value for key, value in outcomes.get(trial.name, {}).items()
                  if key != "name"})
          for trial in study.trials]
  return dict(
      study=study.name, figure=study.figure, task=spec.name, metric=spec.metrics[0],
      eval_split=EVAL_SPLIT, complete=len(outcomes) == len(study.trials),
      budget=dict(
          name=budget.name, train_examples=len(splits["train"]),
          max_train_examples=budget.max_train_examples,
          epochs=sorted({trial.settings["epochs"] for trial in study.trials}),
          batch_size=config["batch_size"], max_seq_length=config["max_seq_length"],
          eval_examples=len(splits[EVAL_SPLIT]), runs=len(study.trials),
          runs_finished=len(finished),
          runs_diverged=sum(1 for outcome in outcomes.values() if "diverged" in outcome),
          # What the finished runs cost on this machine, from their own records.
          train_minutes=sum(outcome["train_seconds"] for outcome in finished) / 60.0,
          run_minutes=sum(outcome["total_seconds"] for outcome in finished) / 60.0),
      runs=runs, points=reduce_points(study.trials, outcomes))


def reduce_points(trials: Sequence[Trial],
                  outcomes: Mapping[str, Mapping[str, Any]]) -> List[Dict[str, Any]]:
  """One entry per point, in trial order: its best option's scores over seeds.

  A point's options (see `OPTION_FIELDS`) are compared on their mean score over the seeds
  that finished; ties go to the earlier option. Diverged seeds count in `diverged`, not in
  the mean. A point with no finished seed has `mean` `None`.
  """
  by_point: Dict[tuple, Dict[tuple, List[Trial]]] = {}
  for trial in trials:
    option = tuple(trial.settings[field] for field in OPTION_FIELDS)
    by_point.setdefault(trial.point, {}).setdefault(option, []).append(trial)
  points = []
  for point, options in by_point.items():
    best = None
    for option, option_trials in options.items():
      done = [outcomes[t.name] for t in option_trials if "score" in outcomes.get(t.name, {})]
      scores = [outcome["score"] for outcome in done]
      entry = dict(
          **dict(point), option=dict(zip(OPTION_FIELDS, option)),
          seeds=[t.settings["seed"] for t in option_trials
                 if "score" in outcomes.get(t.name, {})],
          scores=scores, **grid.aggregate(scores),
          diverged=sum(1 for t in option_trials if "diverged" in outcomes.get(t.name, {})),
          trainable_parameters=done[0]["trainable_parameters"] if done else None)
      if best is None or (entry["mean"] is not None and (
          best["mean"] is None or entry["mean"] > best["mean"])):
        best = entry
    points.append(best)
  return points


# Writes a study's JSON atomically, without this machine's folders and with how it was made.
write_json = grid.write


def run_ablation(summary: Dict[str, Any], summary_path: str, num_layers: int,
                 load_model: Callable[[], Any], score: Callable[[Any], float],
                 log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Scores the ablation study's trained model with each span of adapters removed.

  The scores go into `summary["ablation"]` (`trial`, `num_layers`, `scores` by
  `ablation.span_key`, `changes`: the heatmap) and the JSON is rewritten after each, so a
  resumed study scores only the spans it lacks.

  Args:
    summary: The ablation study's summary from `run_study`, its one trial finished.
    summary_path: The study's JSON.
    num_layers: Transformer layers of the base.
    load_model: Builds the trained task model afresh.
    score: Its score (%) on the evaluation split.
    log: Where progress lines go.

  Returns:
    The summary as written.
  """
  (run,) = summary["runs"]
  if "score" not in run:
    raise ValueError(f"The ablation's model {run['name']} did not finish training "
                     f"({run.get('diverged', 'no result')}): there are no adapters to remove.")
  recorded = summary.get("ablation") or {}
  scores = dict(recorded.get("scores", {})) if recorded.get("trial") == run["name"] else {}
  total = 1 + len(ablation.layer_spans(num_layers))
  log(f"Ablation: {total - len(scores)} of {total} evaluations to run (the whole model, then "
      "each span of layers without its adapters).")

  def record(key, value):
    scores[key] = value
    summary["ablation"] = dict(trial=run["name"], num_layers=num_layers, scores=dict(scores),
                               changes=ablation.change_matrix(scores, num_layers))
    write_json(summary_path, summary)
    log(f"  adapters removed from layers {key}: {value:.2f}")

  ablation.evaluate_spans(load_model, score, num_layers, scores, record)
  summary["ablation"] = dict(trial=run["name"], num_layers=num_layers, scores=scores,
                             changes=ablation.change_matrix(scores, num_layers))
  return write_json(summary_path, summary)

"""SQuAD v1.1 at the paper's schedule, on a CPU budget: each method its own epochs and rate.

The paper does not give adapters and fine-tuning one budget on SQuAD: adapters train 3, 10 or
20 epochs, fine-tuning 2, 3 or 5, each at its own learning rate (Houlsby et al. 2019,
Section 3.5). Here, in two resumable grids of runs (`core.grid`):

1. **Search**, never on the dev set: each point trains on a seeded subset of the training
   file and is scored on held-out training questions (`SquadConfig.holdout_questions`).
   Adapters (m=64 and m=256) over epochs {1, 2, 3} and rates 1e-3 to 5e-3, LoRA (r=8,
   peft's default, and 16) over the same epochs and rates 1e-3 to 2e-2; full fine-tuning over
   epochs {1, 2} and rates 5e-5 to 1e-3.
2. **Selected**: each method's best point by held-out F1 within its parameter budget (adapters
   and LoRA: at most `PARAMETER_BUDGET_PERCENT` of the base, so m=256 on this 384-wide base is
   searched to show what size buys, not selected), trained on the budget's training questions
   and scored once on the full dev set. A method's selected run is kept while the search
   selects the same point, so a method added to the search adds its own run only.
"""

import dataclasses
import itertools
import os
from typing import Any, Callable, Dict, List, Mapping, Optional

from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.core import grid
from keras_adapters.data import squad
from keras_adapters.tasks import question_answering
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance

SEARCH_FILE = "schedule_search.json"
SELECTED_FILE = "paper_schedule.json"
SELECTED_MARKDOWN = "paper_schedule.md"
# The search grid of each method: the paper's grids cut to a CPU budget.
# Each rate axis reaches past the rate the method selected on a narrower grid, so that a
# selection at an edge of its axis is seen (`at_rate_edge`) and the axis widened.
SEARCH = dict(
    adapters=dict(adapter_size=(64, 256), learning_rate=(1e-3, 2e-3, 5e-3),
                  epochs=(1.0, 2.0, 3.0)),
    full=dict(learning_rate=(5e-5, 1e-4, 3e-4, 5e-4, 1e-3), epochs=(1.0, 2.0)),
    lora=dict(lora_r=(8, 16), learning_rate=(1e-3, 2e-3, 5e-3, 1e-2, 2e-2),
              epochs=(1.0, 2.0, 3.0)))
# Questions each search point trains on, and the held-out training questions it is scored
# on (about 2,000 windows, a tenth of the final budget, and 1,000 questions).
SEARCH_TRAIN_QUESTIONS = 2000
HOLDOUT_QUESTIONS = 1000
# Trained parameters, in % of the base, a method's selected point may have: 3% for adapters and
# LoRA (the paper's SQuAD adapters of size 64 train 2%, its GLUE ones 3.6%). Full fine-tuning
# has none.
PARAMETER_BUDGET_PERCENT = dict(adapters=3.0, lora=3.0)

RunSquad = Callable[..., Mapping[str, Any]]


def search_points(base_config: config_definitions.ExperimentConfig,
                  num_layers: int) -> List[grid.Point]:
  """Every point of `SEARCH`: key `<method>[-m<size>]-lr<rate>-e<epochs>`, its config."""
  points = []
  for method, axes in SEARCH.items():
    method_config = method_comparison.method_config(base_config, method, num_layers)
    names = list(axes)
    for values in itertools.product(*(axes[name] for name in names)):
      settings = dict(zip(names, values))
      key = "-".join([method] + [f"{letter}{settings[name]}" for name, letter in
                                 method_comparison.SIZE_TAGS if name in settings]
                     + [f"lr{settings['learning_rate']:g}", f"e{settings['epochs']:g}"])
      points.append(grid.Point(key, method_config.replace(**settings)))
  return points


def run_search(train: squad.SquadData, base_config: config_definitions.ExperimentConfig,
               squad_config: question_answering.SquadConfig, num_layers: int, model_dir: str,
               results_dir: str, *, run_squad: RunSquad) -> Dict[str, Dict[str, Any]]:
  """Runs the search grid (`<model_dir>/search/<key>`); writes and returns its records.

  Args:
    train: The training file; the search trains on a subset and scores held-out questions.
    base_config: The settings every point shares (base, batch, windows).
    squad_config: Windows and answer search; the subsets are the search's own.
    num_layers: The base's layers (for the method configs).
    model_dir: Root of the runs.
    results_dir: Where `schedule_search.json` is written.
    run_squad: `question_answering.run_squad`, or a stand-in in tests.
  """
  search_config = dataclasses.replace(squad_config, max_train_examples=SEARCH_TRAIN_QUESTIONS,
                                      max_eval_examples=0,
                                      holdout_questions=HOLDOUT_QUESTIONS)
  path = os.path.join(results_dir, SEARCH_FILE)
  identity = _identity(train, base_config, search_config)
  previous = grid.read(path, identity, identity_of=lambda content: content.get("identity"))

  def run_point(point):
    results = run_squad(train, train, point.settings, search_config,
                        os.path.join(model_dir, "search", point.key))
    return _row(point.settings, results)

  def write(records):
    grid.write(path, dict(identity=identity, points=records))

  return grid.run(search_points(base_config, num_layers), run_point,
                  done=previous.get("points"), write=write)


def select(search: Mapping[str, Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """Each method's point with the best held-out F1 (ties: the fewer epochs) among those
  within its `PARAMETER_BUDGET_PERCENT`."""
  best: Dict[str, Dict[str, Any]] = {}
  for key, row in search.items():
    method = row["method"]
    if row["trainable_percent_of_base"] > PARAMETER_BUDGET_PERCENT.get(method, float("inf")):
      continue
    if method not in best or (row["f1"], -row["epochs"]) > (best[method]["f1"],
                                                            -best[method]["epochs"]):
      best[method] = dict(row, key=key)
  return best


def run_selected(train: squad.SquadData, dev: squad.SquadData,
                 base_config: config_definitions.ExperimentConfig,
                 squad_config: question_answering.SquadConfig,
                 search: Mapping[str, Mapping[str, Any]], num_layers: int, model_dir: str,
                 results_dir: str, *, run_squad: RunSquad,
                 equal_budget: Optional[Mapping[str, Mapping[str, Any]]] = None
                 ) -> Dict[str, Any]:
  """Trains each method's selected point on `squad_config`'s budget, scores it on `dev`;
  writes and returns `paper_schedule.json`.

  `paper_schedule.md` (with `equal_budget`'s rows, see `markdown`) is written beside it after
  every row, so that a run stopped before its last method leaves the two files alike.
  """
  selection = select(search)
  points = {point.key: point for point in search_points(base_config, num_layers)}
  path = os.path.join(results_dir, SELECTED_FILE)
  identity = dict(_identity(train, base_config, squad_config), eval_file_sha256=dev.sha256)
  previous = grid.read(path, identity, identity_of=lambda content: content.get("identity"))
  done = {method: row for method, row in previous.get("methods", {}).items()
          if method in selection and row["selected_by"]["search_key"] == selection[method]["key"]}

  def run_point(point):
    method_dir = os.path.join(model_dir, "schedule", point.key)
    results = run_squad(train, dev, points[selection[point.key]["key"]].settings,
                        squad_config, method_dir, export_dir=os.path.join(method_dir, "export"))
    chosen = selection[point.key]
    return dict(_row(points[chosen["key"]].settings, results),
                selected_by=dict(search_key=chosen["key"], heldout_f1=chosen["f1"],
                                 at_rate_edge=chosen["learning_rate"] in (
                                     min(SEARCH[point.key]["learning_rate"]),
                                     max(SEARCH[point.key]["learning_rate"]))))

  def write(records):
    grid.write(path, dict(identity=identity, methods=records))
    write_markdown(results_dir, dict(methods=records), search, equal_budget)

  records = grid.run([grid.Point(method) for method in selection], run_point,
                     done=done, write=write)
  return dict(identity=identity, methods=records)


def _identity(train, config, squad_config):
  """What a results file's rows share: the data, the base, the batch and the windows."""
  shared = config.settings()
  return dict(train_file_sha256=train.sha256, squad=dataclasses.asdict(squad_config),
              **{name: shared[name] for name in ("hub_handle", "batch_size",
                                                 "max_seq_length", "seed")})


def _row(config, results):
  """One run's line of a table, with the sessions that made the run (a table's rows may come
  from several sessions, and a run may span several)."""
  method = config.model.method_name
  return dict(method=method, **_grid_settings(method, config.settings()), **_scores(results),
              train_questions=results["train_questions"],
              eval_questions=results["eval_questions"],
              **{provenance.KEY: results[provenance.KEY]})


def _grid_settings(method, settings):
  """The settings a table shows of a run: its schedule, and the size its method's grid tries."""
  return {name: settings.get(name) for name in ("epochs", "learning_rate", *SEARCH.get(method, ()))}


def _scores(results):
  """A run's scores, size and training time, as a table shows them."""
  return dict(exact_match=results["metrics"]["exact_match"], f1=results["metrics"]["f1"],
              trained_parameters=results["parameters"]["trainable"],
              trainable_percent_of_base=results["parameters"]["trainable_percent_of_base"],
              train_minutes=results["train_seconds"] / 60)


def markdown(selected: Mapping[str, Any], search: Mapping[str, Mapping[str, Any]],
             equal_budget: Optional[Mapping[str, Mapping[str, Any]]]) -> str:
  """The selected runs' table, the equal-budget rows beside them, then the search."""
  lines = ["SQuAD v1.1 dev set (official v1.1 metric, %), each method at its own selected "
           "schedule, and at one equal budget.", "",
           "| method | schedule | size | epochs | learning rate | EM | F1 | trained params | "
           "% of base | train min (2 cores) |", "|---|---|---|---|---|---|---|---|---|---|"]
  for method, row in selected["methods"].items():
    lines.append(_markdown_row(method, "selected", row))
  for method, results in (equal_budget or {}).items():
    lines.append(_markdown_row(method, "equal budget", dict(
        _grid_settings(method, results["config"]), **_scores(results))))
  lines += ["", f"The search: {SEARCH_TRAIN_QUESTIONS:,} training questions per point, scored "
            f"on {HOLDOUT_QUESTIONS:,} held-out training questions (never the dev set). Its "
            "minutes are wall time beside other work on the machine, not timed alone.", "",
            "| point | held-out EM | held-out F1 | train min |", "|---|---|---|---|"]
  lines += [f"| {key} | {row['exact_match']:.2f} | {row['f1']:.2f} | "
            f"{row['train_minutes']:.1f} |" for key, row in search.items()]
  return "\n".join(lines) + "\n"


def write_markdown(results_dir: str, selected: Mapping[str, Any],
                   search: Mapping[str, Mapping[str, Any]],
                   equal_budget: Optional[Mapping[str, Mapping[str, Any]]]) -> str:
  """Writes `markdown(...)` to `<results_dir>/paper_schedule.md`; returns it."""
  table = markdown(selected, search, equal_budget)
  atomic_io.write_text(os.path.join(results_dir, SELECTED_MARKDOWN), table)
  return table


def _markdown_row(method, schedule, row):
  size = " ".join(f"{letter}={row[name]}" for name, letter in method_comparison.SIZE_TAGS
                  if name in SEARCH.get(method, ()) and row.get(name) is not None) or "–"
  return (f"| {method} | {schedule} | {size} | {row['epochs']:g} | {row['learning_rate']:g} | "
          f"{row['exact_match']:.2f} | {row['f1']:.2f} | {row['trained_parameters']:,} | "
          f"{row['trainable_percent_of_base']:.2f} | {row['train_minutes']:.1f} |")

"""The project's Table 2: every task's method comparison in one table, and what serving all
the tasks costs in parameters.

The rows come from `<results_dir>/<task>/comparison.json`, written by
`run_classification.py --methods` (the BERT methods, mean ± s.e.m. over seeds) and
`run_automl.py` (the "no BERT" baselines). A task whose comparison lacks a BERT method has
the missing methods compared (`run_suite`'s `run_comparison`), resuming their finished runs.

Serving N tasks (the paper's "total number of params", 1.19x for adapters, 17x for full
fine-tuning) is counted per method as the base's copies plus what every task trained:
adapters, LayerNorm-only and top-k keep one base for all tasks (top-k shares its frozen lower
layers and stores its top layers per task), so `base + sum of the tasks' trained parameters`
(their adapters, LayerNorms, layers and heads); full fine-tuning keeps a whole trained model
per task, `sum of the tasks' trained parameters`; the baselines without BERT likewise store
one model per task, counted whole (`total_parameters` of their rows: a no-BERT model carries
its frozen GloVe or USE table). Totals are also given as multiples of one base.
"""

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from keras_adapters.analysis import method_comparison
from keras_adapters.core import grid
from keras_adapters.utils import atomic_io

BERT_METHODS = tuple(method_comparison.METHODS)
# The methods whose tasks share one copy of the base.
SHARED_BASE_METHODS = ("adapters", "layer_norm", "top_k", "lora", "ia3")
COMPARISON_FILE = method_comparison.COMPARISON_FILE
SUITE_JSON = "suite.json"
SUITE_MARKDOWN = "suite.md"


def read_comparison(results_dir: str, task: str) -> Optional[Dict[str, Any]]:
  """`<results_dir>/<task>/comparison.json`, or `None` where there is none."""
  return atomic_io.read_json(os.path.join(results_dir, task, COMPARISON_FILE))


def missing_methods(comparison: Optional[Mapping[str, Any]],
                    rates: Optional[method_comparison.SelectedRates] = None) -> List[str]:
  """The BERT methods without a row in `comparison` (all of them without a comparison), or
  whose row trained at another rate than `rates` selects for them."""
  present = {row["method"] for row in (comparison or {}).get("rows", [])
             if not (rates and rates.source_of(row["method"]))
             or rates.source_for(row["method"], _learning_rate(row))}
  return [method for method in BERT_METHODS if method not in present]


def _rate_source(row: Mapping[str, Any],
                 rates: Optional[method_comparison.SelectedRates]) -> Optional[str]:
  """The study record that selected the rate `row` trained at, if any."""
  return ((rates and rates.source_for(row["method"], _learning_rate(row)))
          or row.get("learning_rate_from"))


def _learning_rate(row: Mapping[str, Any]) -> Optional[float]:
  """The rate a row's runs trained at (`None` for a baseline without one)."""
  return row.get("config", {}).get("learning_rate")


def run_suite(tasks: Sequence[str], results_dir: str,
              run_comparison: Callable[[str, Optional[Mapping[str, Any]], List[str]],
                                       Mapping[str, Any]],
              notes: Optional[Mapping[str, str]] = None,
              log: Callable[[str], None] = print,
              rerun: Sequence[str] = (),
              rates: Optional[method_comparison.SelectedRates] = None) -> Dict[str, Any]:
  """Completes every task's comparison, then writes `suite.json` and `suite.md`.

  Args:
    tasks: The tasks, in table order.
    results_dir: Holds `<task>/comparison.json`; receives `suite.json` and `suite.md`.
    run_comparison: Given a task, its comparison so far (or `None`) and the BERT methods to
      run (those it lacks, and `rerun`), compares them on the comparison's budget (finished
      runs are not trained again unless rerun; the other methods keep their rows) and
      returns the summary it wrote to `<results_dir>/<task>/comparison.json`.
    notes: Task → what a reader of its row must know (the data, a caveat), shown under the
      table.
    log: Where progress lines go.
    rerun: BERT methods every task trains again, although its comparison has their rows.
    rates: The learning rates a study selected; a method's row trained at another rate is
      missing, so `run_comparison` trains it at the selected one.

  Returns:
    The suite written (see `build_suite`).
  """
  comparisons = {}
  for task in tasks:
    comparison = read_comparison(results_dir, task)
    missing = missing_methods(comparison, rates)
    to_run = [method for method in BERT_METHODS if method in missing or method in rerun]
    if missing:
      log(f"{task}: no {', '.join(missing)} row in {results_dir}/{task}/{COMPARISON_FILE}"
          + (f" at the rates of {rates.source}" if rates else "")
          + "; running the comparison (finished runs are not trained again).")
    if rerun:
      log(f"{task}: training {', '.join(rerun)} again.")
    if to_run:
      comparison = run_comparison(task, comparison, to_run)
    else:
      log(f"{task}: read {results_dir}/{task}/{COMPARISON_FILE}.")
    comparisons[task] = comparison
  suite = grid.write(os.path.join(results_dir, SUITE_JSON), dict(
      build_suite(comparisons, rates),
      notes={task: notes[task] for task in tasks if task in (notes or {})}))
  atomic_io.write_text(os.path.join(results_dir, SUITE_MARKDOWN), markdown_table(suite))
  return suite


def build_suite(comparisons: Mapping[str, Mapping[str, Any]],
                rates: Optional[method_comparison.SelectedRates] = None) -> Dict[str, Any]:
  """Aggregates per-task comparisons into the suite table.

  Args:
    comparisons: Task → its `comparison.json` summary, in table order.
    rates: The learning rates a study selected: a row trained at its method's selected rate
      names that study's record, also a row trained before the record was read.

  Returns:
    A JSON-ready dict: `tasks` (each task's metric, split and budget), `methods` (the BERT
    methods, then the others in order of appearance), `cells` (task → method → `mean`, `sem`,
    `seeds`, `scores`, `trainable_parameters`, `served_parameters`: all the parameters of a
    task's own model, frozen ones included; `learning_rate` and `learning_rate_from`, the
    study record that selected it, `None` where none did), `average` (method → mean over
    the tasks that have it, and how many), `base_parameters` and `serving` (method →
    `tasks`, `total_parameters`, `base_multiple`).

  Raises:
    ValueError: No tasks, or tasks compared on different bases.
  """
  if not comparisons:
    raise ValueError("The suite needs at least one task's comparison.")
  methods = list(BERT_METHODS)
  for comparison in comparisons.values():
    methods += [row["method"] for row in comparison["rows"] if row["method"] not in methods]
  bases = {task: _base_parameters(comparison) for task, comparison in comparisons.items()}
  if len({base for base in bases.values() if base is not None}) > 1:
    raise ValueError(f"The tasks were compared on different bases ({bases} parameters); a "
                     "suite shares one base. Compare them again on the same --hub_handle.")
  base = next((base for base in bases.values() if base is not None), None)
  # Recomputed from the scores, so a table never disagrees with the scores it shows.
  cells = {task: {row["method"]: dict(**grid.aggregate(row["scores"]), seeds=row["seeds"],
                                      scores=row["scores"],
                                      trainable_parameters=row["trainable_parameters"],
                                      served_parameters=_served_parameters(row),
                                      learning_rate=_learning_rate(row),
                                      learning_rate_from=_rate_source(row, rates))
                  for row in comparison["rows"]}
           for task, comparison in comparisons.items()}
  average, serving = {}, {}
  for method in methods:
    present = [row[method] for row in cells.values() if method in row]
    if not present:
      continue
    average[method] = dict(mean=float(np.mean([cell["mean"] for cell in present])),
                           tasks=len(present))
    if method in SHARED_BASE_METHODS:
      total = sum(cell["trainable_parameters"] for cell in present) + (base or 0)
    else:
      total = sum(cell["served_parameters"] for cell in present)
    serving[method] = dict(tasks=len(present), total_parameters=int(total),
                           base_multiple=None if base is None else total / base)
  return dict(
      tasks=[dict(task=task, metric=comparison["metric"],
                  eval_split=comparison["eval_split"],
                  eval_examples=comparison["eval_examples"],
                  **{key: comparison.get(key) for key in (
                      "train_examples", "epochs", "max_seq_length", "batch_size")})
             for task, comparison in comparisons.items()],
      methods=methods, cells=cells, average=average, base_parameters=base, serving=serving)


def _served_parameters(row: Mapping[str, Any]) -> int:
  """Parameters a task's own model carries when served: all of them where the row records
  them (frozen embedding tables included), else its trained ones (a fine-tuned BERT row's
  are the whole model its mean-pooled head reads; the unused pooler need not be served)."""
  return row.get("total_parameters") or row["trainable_parameters"]


def _base_parameters(comparison) -> Optional[int]:
  """The base's parameter count, from a BERT row's trained parameters and their share."""
  for row in comparison["rows"]:
    if row["method"] in BERT_METHODS and row.get("trainable_percent_of_base"):
      return round(row["trainable_parameters"] * 100.0 / row["trainable_percent_of_base"])
  return None


def markdown_table(suite: Mapping[str, Any]) -> str:
  """The suite as Markdown: tasks in rows, methods in columns, then the average and the
  parameters for serving every task."""
  methods = suite["methods"]
  splits = sorted({task["eval_split"] for task in suite["tasks"]})
  lines = [
      f"Score (%) on the {'/'.join(splits)} split, mean ± s.e.m. over seeds (the number in "
      "brackets where it is not 3); each task on its own budget.", "",
      "| task | metric | train examples | epochs | tokens | " + " | ".join(methods) + " |",
      "|---" * (5 + len(methods)) + "|"]
  for task in suite["tasks"]:
    cells = suite["cells"][task["task"]]
    lines.append(
        f"| {task['task']} | {task['metric']} | {_count(task['train_examples'])} | "
        f"{_number(task['epochs'], 'g')} | {_count(task['max_seq_length'])} | "
        + " | ".join(_cell(cells.get(method)) for method in methods) + " |")
  num_tasks = len(suite["tasks"])
  average = suite["average"]
  lines.append("| average | | | | | " + " | ".join(
      "–" if method not in average else f"{average[method]['mean']:.2f}"
      + _of_tasks(average[method]["tasks"], num_tasks) for method in methods) + " |")
  serving = suite["serving"]
  lines.append(f"| total params, {num_tasks} tasks | | | | | " + " | ".join(
      "–" if method not in serving else _serving(serving[method], num_tasks)
      for method in methods) + " |")
  base = suite["base_parameters"]
  lines += ["", f"Total params: what serving every task takes, as multiples of one base "
            f"({_count(base)} parameters): the base once plus each task's trained parameters "
            f"for {', '.join(SHARED_BASE_METHODS)}; each task's own model, all its parameters "
            "frozen ones included, for the others (full fine-tuning: a whole model per task; "
            "no_bert: its network and its GloVe or USE table)."]
  lines += [f"- `{task}`: {note}" for task, note in suite.get("notes", {}).items()]
  return "\n".join(lines) + "\n"


def _cell(cell) -> str:
  if cell is None:
    return "–"
  seeds = len(cell["seeds"])
  spread = f" ± {cell['sem']:.2f}" if seeds > 1 else ""
  return f"{cell['mean']:.2f}{spread}" + ("" if seeds == 3 else f" ({seeds})")


def _of_tasks(count, num_tasks):
  return "" if count == num_tasks else f" ({count} of {num_tasks} tasks)"


def _serving(entry, num_tasks):
  multiple = entry["base_multiple"]
  text = (f"{multiple:.2f}× " if multiple is not None else "") + (
      f"({entry['total_parameters'] / 1e6:.1f}M)")
  return text + _of_tasks(entry["tasks"], num_tasks)


def _count(value):
  return "–" if value is None else f"{value:,}"


def _number(value, spec):
  return "–" if value is None else format(value, spec)

"""Compares transfer methods on one task over several seeds: the paper's tables, small."""

import dataclasses
import os
import time
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.analysis import sweep
from keras_adapters.core import grid
from keras_adapters.methods import registry
from keras_adapters.tasks import classification
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

COMPARISON_FILE = "comparison.json"
COMPARISON_MARKDOWN = "comparison.md"
# What the rows of `compare_methods` share besides `table_identity`: their budget.
_BUDGET = ("epochs", "max_seq_length", "batch_size")

# The tunings of the base the paper compares the methods with (the bottleneck adapters'
# section under another `tuning`), as settings overrides. Learning rates follow the paper's
# findings: LayerNorm-only wants larger rates than fine-tuning.
BASE_TUNINGS = {
    tuning: dict(method=config_definitions.ADAPTERS_METHOD, tuning=tuning,
                 learning_rate=learning_rate)
    for tuning, learning_rate in (("full", 5e-5), ("top_k", 1e-4), ("layer_norm", 3e-3))}


def _registered(method):
  """A registered method's settings overrides: at the learning rate it registered."""
  return dict(method=method.name, **method.comparison_settings,
              learning_rate=method.learning_rate)


# The methods of the paper's comparison as settings overrides, the one list of them: the
# paper's (the bottleneck adapters, then the tunings of the base), then every method
# registered after them, each at its registered rate (`methods.registry`).
_FIRST, *_FOLLOWERS = registry.methods()
METHODS = {_FIRST.name: _registered(_FIRST), **BASE_TUNINGS,
           **{method.name: _registered(method) for method in _FOLLOWERS}}
# The setting that sizes a method's trained parameters, and the letter that tags a point of it
# in tables and figures (m=64, k=3, r=8): each registered method's (`registry.Method.size`),
# the tunings' after the adapters'.
SIZE_TAGS = tuple(tag for tag in (_FIRST.size_tag, ("top_k", "k"),
                                  *(method.size_tag for method in _FOLLOWERS)) if tag)


@dataclasses.dataclass(frozen=True)
class SelectedRates:
  """Each method's learning rate as a learning-rate study selected it, and where.

  Attributes:
    rates: Method name → its selected rate; the methods it lacks keep their `METHODS` rate.
    source: The study record they were read from, as rows and cells name it.
  """
  rates: Mapping[str, float]
  source: str

  def source_of(self, method):
    """The record `method`'s rate comes from, or `None` where it keeps its `METHODS` rate."""
    return self.source if method in self.rates else None

  def source_for(self, method, learning_rate):
    """The record that selected `learning_rate` for `method`, or `None` where it did not."""
    return self.source if self.rates.get(method) == learning_rate else None


def method_config(base_config, method, num_layers, rates: Optional[SelectedRates] = None):
  """`base_config` with `method`'s overrides (at its rate in `rates`, where it has one);
  top-k trains the top half of the layers."""
  if method not in METHODS:
    raise ValueError(f"Unknown method {method!r}; choose from {sorted(METHODS)}.")
  overrides = dict(METHODS[method])
  if rates and rates.source_of(method):
    overrides["learning_rate"] = rates.rates[method]
  if method == "top_k":
    overrides["top_k"] = sweep.settings_of(base_config)["top_k"] or max(1, num_layers // 2)
  return sweep.with_settings(base_config, **overrides)


def compare_methods(spec, splits, base_config, methods: Sequence[str], seeds: Sequence[int],
                    root_dir, results_dir, num_layers, eval_split="test",
                    run_fn: Callable[..., Mapping] = classification.run_task,
                    rerun: Sequence[str] = (), rates: Optional[SelectedRates] = None):
  """Runs every method with every seed; writes `comparison.json` and `comparison.md`.

  The methods are the points of a `core.grid` whose records are the table's rows. Each run
  has its own folder under `root_dir`, so an interrupted comparison resumes where it stopped
  and finished runs are not trained again; a method whose row the table holds for the same
  seeds and settings is not run again at all (so a committed table resumes on a clone without
  the run folders). A folder holding a run with other settings (another `epochs`, task or
  data) is refused before the first run trains, never reused under the new settings (a
  `rerun` method's folders are moved aside instead, so a rerun may change its settings). So is a
  table in `results_dir` of other data or another budget (`check_results_dir`): its rows are
  never dropped nor mixed with these. The table is written after every method and keeps the
  rows of methods not run here (a comparison run in parts) and the rows `merge_rows` added.

  Args:
    spec: The task.
    splits: Split name → examples, with "train" and `eval_split`.
    base_config: Shared `ExperimentConfig` (budget, sequence length, handles).
    methods: Names from `METHODS`.
    seeds: Seeds to run each method with.
    root_dir: Folder of the runs (checkpoints, logs).
    results_dir: Folder of the summary files.
    num_layers: Transformer layers of the encoder (for top-k's default k).
    eval_split: The split the table reports.
    run_fn: Runs one configuration (`classification.run_task`; replaceable in tests).
    rerun: Methods among `methods` to train again from the first step although the table
      holds their rows or their folders hold finished runs (after a change of the code).
      Once every check has passed, their rows leave the table and their run folders are
      moved aside to `<folder>.replaced-<UTC time>`, never deleted. A stopped rerun resumes
      by the same call without `rerun`.
    rates: The learning rates a study selected (`SelectedRates`); a row of a method there
      names the record as its `learning_rate_from`, and a row trained at another rate is
      trained again.

  Returns:
    The summary dict written to `comparison.json`.

  Raises:
    ValueError: No methods, or a `rerun` method that is not compared.
    run_records.RunSettingsError: A run folder holds a run with other settings.
    ResultsTableError: `results_dir` holds a table of other data or another budget.
  """
  if not methods:
    raise ValueError("No methods to compare; choose from " + ", ".join(METHODS) + ".")
  metric = spec.metrics[0]
  points = [grid.Point(method, method_config(base_config, method, num_layers, rates))
            for method in dict.fromkeys(methods)]
  configs = {point.key: point.settings for point in points}
  not_compared = [method for method in rerun if method not in configs]
  if not_compared:
    raise ValueError(f"Cannot rerun {', '.join(not_compared)}: only the methods compared "
                     f"({', '.join(configs)}) can be; add them to the methods.")
  # Every method and every existing run folder is checked before the first (long) run starts,
  # but for the folders of `rerun` methods: they are moved aside, so their settings may change.
  sweep.check_run_dirs(spec, splits, [
      (sweep.with_settings(point.settings, seed=seed), _run_dir(root_dir, point.key, seed))
      for point in points if point.key not in rerun for seed in seeds])
  budget = sweep.settings_of(base_config)
  identity = dict(table_identity(spec, splits, eval_split),
                  train_examples=len(splits["train"]), **{key: budget[key] for key in _BUDGET})
  previous = check_results_dir(results_dir, identity)
  # A rerun method's new row takes the place of its old one.
  places = previous.get("rows", [])
  if rerun:
    previous = _start_over(results_dir, root_dir, previous, rerun, seeds)
  previous_rows = previous.get("rows", [])
  kept = [row for row in previous_rows if row["method"] not in configs]
  done = {row["method"]: _with_rate_source(row, rates) for row in previous_rows
          if row["method"] in configs and _same_runs(row, configs[row["method"]], seeds)}

  def run_method(point):
    runs = []
    for seed in seeds:
      # Tens of minutes in all: say which run is on, and let its progress bar show.
      print(f"[{points.index(point) * len(seeds) + len(runs) + 1}/{len(points) * len(seeds)}] "
            f"{point.key}, seed {seed}", flush=True)
      runs.append(run_fn(spec, splits, sweep.with_settings(point.settings, seed=seed),
                         _run_dir(root_dir, point.key, seed)))
      print(f"  {eval_split} {metric}: {100.0 * runs[-1]['metrics'][eval_split][metric]:.2f}",
            flush=True)
    scores = [100.0 * run["metrics"][eval_split][metric] for run in runs]
    return dict(
        method=point.key, config=sweep.settings_of(point.settings), seeds=list(seeds),
        scores=scores, **grid.aggregate(scores),
        trainable_parameters=runs[0]["parameters"]["trainable"],
        trainable_percent_of_base=runs[0]["parameters"]["trainable_percent_of_base"],
        seconds_per_epoch=float(np.mean([run["seconds_per_epoch"] for run in runs])),
        **_rate_source(point.key, rates), **{provenance.KEY: provenance.record()})

  def write(rows):
    # After every method, so a stopped comparison keeps the methods it finished.
    return _write_summary(results_dir, dict(
        identity, rows=_ordered(places, kept, list(rows.values()))))

  return write(grid.run(points, run_method, done=done, write=write))


def _rate_source(method, rates):
  """A row's `learning_rate_from`: the study record its rate was selected by, if any."""
  source = rates and rates.source_of(method)
  return dict(learning_rate_from=source) if source else {}


def _with_rate_source(row, rates):
  """A row kept at the rate `rates` selects, naming the record that selects it."""
  return dict(row, **_rate_source(row["method"], rates))


def _start_over(results_dir, root_dir, table, methods, seeds):
  """Moves `methods`' run folders aside and drops their rows from `table` (also on disk, so
  a rerun stopped before its first method ends resumes as one); returns the table."""
  stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
  for method in methods:
    for seed in seeds:
      run_dir = _run_dir(root_dir, method, seed)
      if tf.io.gfile.exists(run_dir):
        tf.io.gfile.rename(run_dir, f"{run_dir}.replaced-{stamp}")
  rows = [row for row in table.get("rows", []) if row["method"] not in methods]
  if not table or len(rows) == len(table["rows"]):
    return table
  return _write_summary(results_dir, dict(table, rows=rows))


def _same_runs(row, config, seeds):
  """Whether a table's `row` records the runs of `config` with `seeds`: the same seeds and
  the same settings, those added since it was written read as every run had them then. How
  runs execute (`config_definitions.EXECUTION_SETTINGS`) and the config's own seed (the row's runs
  have `seeds`) do not count."""
  if row.get("seeds") != list(seeds) or "config" not in row:
    return False
  asked = {name: value for name, value in paths.portable(
      sweep.settings_of(config), os.getcwd()).items()
           if name not in config_definitions.EXECUTION_SETTINGS + ("seed",)}
  return sweep.recorded_settings(row["config"], asked) == asked


class ResultsTableError(errors.UsageError):
  """`results_dir` holds a table of other data or another budget; the message says which."""


def table_identity(spec, splits, eval_split="test"):
  """What a table's rows must share besides their budget: the task, the metric, and the
  training and evaluation data (fingerprints of their ids, texts and labels)."""
  return dict(task=spec.name, metric=spec.metrics[0], eval_split=eval_split,
              eval_examples=len(splits[eval_split]),
              data_fingerprints={name: classification.data_fingerprint(splits[name])
                                 for name in ("train", eval_split)})


def check_results_dir(results_dir, identity):
  """Returns the table in `results_dir` (`{}` if none) if rows of `identity` may join it.

  A table records what its rows share (`table_identity`, and for the BERT methods their
  budget: training examples, epochs, sequence length, batch size); rows of anything else
  would be mixed with them or replace them, so they are refused. A key the table does not
  record is no difference: tables written before data fingerprints are identified by their
  task, splits' sizes and budget, and get the fingerprints at their next write; a table of
  merged rows only records no budget.

  Args:
    results_dir: Folder of `comparison.json`.
    identity: What the new rows share, as `comparison.json` records it.

  Returns:
    The table, as a dict.

  Raises:
    ResultsTableError: The table records other values; the message names them and
      `results_dir`.
  """
  return grid.read(os.path.join(results_dir, COMPARISON_FILE), identity,
                   on_other_identity=refuse_other_results)


def refuse_other_results(path, recorded, identity):
  """Raises `ResultsTableError` unless the results file `path`, recording `recorded`, may take
  results of `identity`: they agree on every key `recorded` holds.

  Args:
    path: The results file, for the message.
    recorded: What its rows share (data fingerprints, budget...).
    identity: The same keys for the new results.
  """
  differences = [_difference(key, recorded[key], identity[key])
                 for key in grid.differences(recorded, identity)]
  if differences:
    raise ResultsTableError(
        f"{path} holds results of other data or another budget ({'; '.join(differences)}); "
        "these would replace its rows or be mixed with them. Pass results_dir=<another "
        "folder> for them.")


def _difference(key, there, now):
  """`key` as it differs between a table and new rows, fingerprints shortened."""
  if key == "data_fingerprints":
    splits = [name for name in now if there.get(name) != now[name]]
    return "; ".join(f"the {name} data: {str(there.get(name))[:19]}... there, "
                     f"{now[name][:19]}... now" for name in splits)
  return f"{key}={there!r} there, {now!r} now"


def _ordered(previous_rows, kept, rows):
  """The methods' rows where the table had them, new methods after, merged rows last."""
  order = [row["method"] for row in previous_rows + rows]
  ranked = [row for row in kept if row["method"] in METHODS] + rows
  return (sorted(ranked, key=lambda row: order.index(row["method"]))
          + [row for row in kept if row["method"] not in METHODS])


def merge_rows(results_dir, rows: Sequence[Mapping], *, task, metric, eval_split="test",
               eval_examples, data_fingerprints=None):
  """Adds rows of other methods (baselines without BERT) to `comparison.json` and `.md`.

  A merged row replaces an earlier one of the same method and is kept when
  `compare_methods` rewrites the table. Beside the keys of a method's row, it may hold
  `search_seconds`, `train_examples` and a `note` shown under the table; keys that do not
  apply (`trainable_percent_of_base`, `seconds_per_epoch`) are `None`.

  Args:
    results_dir: Folder of the summary files; they are created if missing.
    rows: The rows, each with `method`, `seeds`, `scores`, `mean`, `sem` and
      `trainable_parameters`.
    task: The task's name; must match the existing summary's.
    metric: The metric of the scores; must match the existing summary's.
    eval_split: The split of the scores; must match the existing summary's.
    eval_examples: Examples in that split; must match the existing summary's.
    data_fingerprints: Split name → `classification.data_fingerprint` of the training and
      evaluation data; must match the existing summary's (`table_identity` gives all of
      these arguments).

  Returns:
    The summary written to `comparison.json`.

  Raises:
    ResultsTableError: If the existing summary is of another task, metric, evaluation split
      or data.
  """
  identity = dict(task=task, metric=metric, eval_split=eval_split, eval_examples=eval_examples)
  if data_fingerprints is not None:
    identity["data_fingerprints"] = dict(data_fingerprints)
  summary = dict(check_results_dir(results_dir, identity) or dict(rows=[]), **identity)
  methods = {row["method"] for row in rows}
  # Each row keeps the command that made it: a table merges the rows of several commands.
  summary["rows"] = [row for row in summary["rows"] if row["method"] not in methods] + [
      provenance.stamped(row) for row in rows]
  return _write_summary(results_dir, summary)


def markdown_table(summary):
  """The comparison as a Markdown table: mean ± s.e.m. over seeds, gap to full, size, speed."""
  full_mean = next((row["mean"] for row in summary["rows"] if row["method"] == "full"), None)
  # A table of merged rows only has no budget of the BERT methods to state.
  budget = (f"{summary['train_examples']:,} training examples, {summary['epochs']:g} "
            f"epoch(s), batch {summary['batch_size']}, {summary['max_seq_length']} tokens "
            "max, " if "train_examples" in summary else "")
  lines = [
      f"Task `{summary['task']}`: {summary['eval_split']} {summary['metric']} (%), mean ± "
      f"s.e.m. over seeds; {budget}{summary['eval_examples']:,} evaluation examples.", "",
      "| method | seeds | score | vs full | trained params / task | % of base | s / epoch |",
      "|---|---|---|---|---|---|---|"]
  for row in summary["rows"]:
    # The paper's headline: how many points a method gives up against full fine-tuning.
    gap = ("–" if full_mean is None or row["method"] == "full"
           else f"{row['mean'] - full_mean:+.2f}")
    lines.append(
        f"| {row['method']} | {len(row['seeds'])} | {row['mean']:.2f} ± {row['sem']:.2f} | "
        f"{gap} | {row['trainable_parameters']:,} | "
        f"{_optional(row['trainable_percent_of_base'], '.2f')} | "
        f"{_optional(row['seconds_per_epoch'], '.0f')} |")
  notes = [f"- `{row['method']}`: {row['note']}" for row in summary["rows"] if row.get("note")]
  return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _optional(value, spec):
  return "–" if value is None else format(value, spec)


def _run_dir(root_dir, method, seed):
  return os.path.join(root_dir, f"{method}-seed{seed}")


def _write_summary(results_dir, summary):
  """Writes comparison.json and .md and returns the summary as written: committed with the
  repository, it holds no folder of this machine, and it says how it was last written (each
  row, how it was made)."""
  summary = grid.write(os.path.join(results_dir, COMPARISON_FILE), summary)
  atomic_io.write_text(os.path.join(results_dir, COMPARISON_MARKDOWN), markdown_table(summary))
  return summary

r"""The paper's analysis on a real task, one study per `--study`, and the suite table.

  keras-adapters-analysis --study=ablation       # Figure 6, left and centre
  keras-adapters-analysis --study=init_scale     # Figure 6, right
  keras-adapters-analysis --study=tradeoff       # Figures 3-4
  keras-adapters-analysis --study=learning_rate  # Figure 7
  keras-adapters-analysis --study=adapter_drop   # AdapterDrop: adapters out of the lowest layers
  keras-adapters-analysis --study=suite          # Table 2: results/suite.{json,md}

A study trains the runs of its grid (`keras_adapters.analysis.studies`) on `--task` (airline by
default; `--data_path` for a file), scores them on the recorded validation split, and writes
`<results_dir>/analysis/<study>.json` after each run and `<study>.png` at the end
(`<study>_paper.*` with `--paper_budget`). Runs live in `--model_dir`, one folder per setting
shared by the studies, so a setting two studies share trains once, a finished run is never
trained again and a killed study resumes where it stopped. The budget is stated before the
first run and measured (the runs' own training time) at the end. The default budget suits 2
CPU cores (1,000 training examples, 2 epochs, batch 16); `--paper_budget` is the paper's (the
whole training split, 20 epochs, batch 32, its grids); `--max_train_examples`, `--epochs` and
`--batch_size` override either. A study's JSON records its finished runs, so committed JSON
resumes a study on a fresh clone.

`--study=suite` reads `<results_dir>/<task>/comparison.json` for each of `--tasks` (default:
every built-in task), runs the comparison of a task lacking a BERT method (on its recorded
budget, or on run_classification's: 2,000 training examples, 2 epochs; runs in
`<model_dir>/<task>`, as the README's comparisons), and writes `<results_dir>/suite.json` and
`suite.md`. `--rerun=<methods>` trains those methods of every task in `--tasks` again (after
a change of the code), their old run folders moved aside.

Every study but the learning-rate one and the suite train each method at the rate the
learning-rate study selected for it (its best mean over seeds, refused at its grid's end):
`--learning_rates_from` names that study's JSON, by default `<results_dir>/analysis/
learning_rate.json` for a study and `<results_dir>/airline/analysis/learning_rate.json` for the
suite. Each suite row and cell names the rate and the record; a row trained at another rate
is trained again at the selected one. Where no record exists at the default, each method keeps
its registered rate and the run says so.

In a clone of the repository, `python experiments/run_analysis.py` runs the same.
"""

import dataclasses
import os

from absl import app
from absl import flags

from keras_adapters.cli import cli
from keras_adapters.cli import common_flags
from keras_adapters.cli import task_flags
from keras_adapters.analysis import plots
from keras_adapters.analysis import studies
from keras_adapters.analysis import suite as suite_lib
from keras_adapters.core import config_definitions
from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.models import saving
from keras_adapters.data import builtin_datasets
from keras_adapters.data import metrics
from keras_adapters.analysis import method_comparison
from keras_adapters.tasks import classification
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths

_SUITE = "suite"
flags.DEFINE_enum("study", None, list(studies.STUDIES) + [_SUITE],
                  "What to run: one of the paper's analysis studies, or the suite table.")
flags.DEFINE_bool("paper_budget", False,
                  "The paper's budget and grids: every training example, 20 epochs, the best "
                  "of its learning rates (trade-off) or epochs (learning rate) per point.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds of every point (the ablation: the first).")
common_flags.validate_number_list("seeds", int, 0, "0,1,2")
flags.DEFINE_list("tasks", None,
                  "Tasks of --study=suite; default: every built-in task "
                  f"({', '.join(builtin_datasets.BUILTIN_TASKS)}).")
common_flags.define_rerun_flag("--study=suite's comparisons of --tasks")
common_flags.define_output_flags(
    "<runs/analysis/<task>/<cpu|paper> for a study, runs for the suite>",
    results_dir="<results/<task> for a study, results for the suite>", export_dir=None)
common_flags.define_run_flags(learning_rate=1e-3, epochs=studies.CPU_BUDGET.epochs)
# The task whose learning-rate study selects the suite's rates: the studies' default task.
_RATES_TASK = "airline"
_RATES_FILE = os.path.join("analysis", "learning_rate.json")
flags.DEFINE_string("learning_rates_from", None,
                    "The learning-rate study's JSON whose selected rates the methods train at "
                    f"(default: <results_dir>/{_RATES_FILE} for a study, "
                    f"<results_dir>/{_RATES_TASK}/{_RATES_FILE} for the suite).")

FLAGS = flags.FLAGS
# What the studies and the suite set for each run themselves.
_SET_BY_STUDY = ("method", "tuning", "top_k", "adapter_size", "adapter_init_stddev", "learning_rate",
                 "seed")


def _budget():
  """The budget of the flags: CPU or paper, with --max_train_examples and --epochs given."""
  if FLAGS.paper_budget:
    budget = studies.PAPER_BUDGET
  elif FLAGS.study == _SUITE:
    # run_classification's budget, for a task without a comparison: the defaults of the task
    # and run flags both scripts define, over the CPU budget's epochs.
    budget = dataclasses.replace(
        studies.CPU_BUDGET, max_train_examples=FLAGS["max_train_examples"].default,
        batch_size=FLAGS["batch_size"].default)
  else:
    budget = studies.CPU_BUDGET
  given = {name: FLAGS[name].value for name in ("max_train_examples", "epochs", "batch_size")
           if FLAGS[name].present}
  return dataclasses.replace(budget, **given)


def _results_dir():
  return FLAGS.results_dir or (
      "results" if FLAGS.study == _SUITE else os.path.join("results", task_flags.task_name()))


def _selected_rates():
  """The rates of `--learning_rates_from`, else of the record at its default place, or
  `None` where that default holds no record: each method keeps its own."""
  default = os.path.join(_results_dir(), *((_RATES_TASK,) if FLAGS.study == _SUITE else ()),
                         _RATES_FILE)
  path = FLAGS.learning_rates_from or default
  summary = atomic_io.read_json(path)
  if summary is None and not FLAGS.learning_rates_from:
    print(f"No learning-rate study at {path}: each method trains at its registered rate "
          "(run --study=learning_rate to select them).")
    return None
  if summary is None:
    raise app.UsageError(f"--learning_rates_from={path}: no such file; give the JSON "
                         "--study=learning_rate wrote.")
  try:
    return studies.selected_rates(summary, paths.portable(path, os.getcwd()))
  except studies.SelectionError as error:
    raise app.UsageError(str(error)) from None


def _num_layers(config):
  return hub_encoder.read_hub_encoder(config.model.hub_handle).config["num_layers"]


def _note(task):
  """What the figure says of the task: a built-in task's description, with its caveats."""
  builtin = builtin_datasets.BUILTIN_TASKS.get(task)
  return None if FLAGS.data_path or builtin is None else f"{task}: {builtin.description}"


def _run_study(config, budget, rates):
  spec_name = task_flags.task_name()
  model_dir = FLAGS.model_dir or os.path.join("runs", "analysis", spec_name, budget.name)
  results_dir = _results_dir()
  suffix = "_paper" if FLAGS.paper_budget else ""
  summary_path = os.path.join(results_dir, "analysis", f"{FLAGS.study}{suffix}.json")
  atomic_io.make_writable_dir(model_dir, "model_dir")
  atomic_io.make_writable_dir(os.path.dirname(summary_path), "results_dir")
  spec, splits = task_flags.load_splits(model_dir, budget.max_train_examples)
  num_layers = _num_layers(config)
  study = studies.build_study(FLAGS.study, config, [int(seed) for seed in FLAGS.seeds],
                              num_layers, paper=FLAGS.paper_budget, rates=rates)
  summary = studies.run_study(study, spec, splits, model_dir, summary_path, budget,
                              export_trials=FLAGS.study == "ablation",
                              note=_note(spec.name))
  if FLAGS.study == "ablation":
    summary = _ablate(summary, summary_path, spec, splits, config, model_dir, num_layers)
  png = plots.plot_study(summary, os.path.splitext(summary_path)[0] + ".png")
  cost = summary["budget"]
  print(f"{studies.budget_line(budget, splits, study.trials)} Measured: "
        f"{cost['runs_finished']} of {cost['runs']} runs finished"
        + (f", {cost['runs_diverged']} diverged" if cost["runs_diverged"] else "")
        + f"; {cost['train_minutes']:.1f} min of training, {cost['run_minutes']:.1f} min in "
        "all (the runs' own records; shared runs count in every study).")
  print(f"Written: {summary_path} and {png}")


def _ablate(summary, summary_path, spec, splits, config, model_dir, num_layers):
  (run,) = summary["runs"]
  artifact = os.path.join(model_dir, run["name"], "export", "adapters")
  preprocessor = compatibility.load_preprocessor(config.model.preprocess_handle)
  evaluated = splits[studies.EVAL_SPLIT]

  def score(model):
    predictions = classification.predict(model, evaluated, preprocessor, config).argmax(-1)
    return 100.0 * metrics.compute_metrics(spec, evaluated.labels, predictions)[
        spec.metrics[0]]

  return studies.run_ablation(
      summary, summary_path, num_layers,
      lambda: saving.load_task_model(artifact, base_handle=config.model.hub_handle), score)


def _run_suite(config, budget, rates):
  tasks = FLAGS.tasks or list(builtin_datasets.BUILTIN_TASKS)
  model_dir = FLAGS.model_dir or "runs"
  results_dir = _results_dir()
  num_layers = _num_layers(config)
  seeds = [int(seed) for seed in FLAGS.seeds]

  def run_comparison(task, comparison, methods):
    # A comparison missing a method is completed on its own recorded budget; the methods it
    # has keep their rows.
    recorded = comparison if comparison and "epochs" in comparison else None
    task_config = config if recorded is None else config.replace(
        epochs=recorded["epochs"], max_seq_length=recorded["max_seq_length"],
        batch_size=recorded["batch_size"])
    spec, splits = task_flags.load_splits(
        model_dir, recorded["train_examples"] if recorded else budget.max_train_examples,
        task=task)
    return method_comparison.compare_methods(
        spec, dict(train=splits["train"], test=splits["test"]), task_config,
        methods, seeds, os.path.join(model_dir, task), os.path.join(results_dir, task),
        num_layers, rerun=FLAGS.rerun or (), rates=rates)

  suite = suite_lib.run_suite(
      tasks, results_dir, run_comparison,
      notes={task: builtin_datasets.BUILTIN_TASKS[task].description for task in tasks},
      rerun=FLAGS.rerun or (), rates=rates)
  print(suite_lib.markdown_table(suite))
  print(f"Written: {results_dir}/{suite_lib.SUITE_JSON} and {suite_lib.SUITE_MARKDOWN}")


def main(argv):
  del argv  # cli.run refuses arguments.
  if FLAGS.study is None:
    raise app.UsageError(f"--study is required: one of {', '.join(studies.STUDIES)}, "
                         f"{_SUITE}.")
  given = [name for name in _SET_BY_STUDY + studies.SET_BY_STUDY.get(FLAGS.study, ())
           if FLAGS[name].present]
  if given:
    raise app.UsageError(f"--{given[0]} is set by --study={FLAGS.study} for each run; drop it.")
  if FLAGS.study == _SUITE and FLAGS.data_path:
    raise app.UsageError("--data_path: the suite runs the built-in --tasks; run a file's "
                         "comparison with run_classification.py --methods.")
  if FLAGS.study != _SUITE and FLAGS.tasks:
    raise app.UsageError(f"--tasks is for --study=suite; --study={FLAGS.study} runs --task.")
  if FLAGS.study != _SUITE and FLAGS.rerun:
    raise app.UsageError(f"--rerun is for --study=suite; to train --study={FLAGS.study}'s "
                         f"runs again, move <results_dir>/analysis/{FLAGS.study}.json and its "
                         "runs in --model_dir aside.")
  unknown = [task for task in FLAGS.tasks or () if task not in builtin_datasets.BUILTIN_TASKS]
  if unknown:
    raise app.UsageError(f"--tasks={','.join(FLAGS.tasks)}: {', '.join(unknown)} is no "
                         f"built-in task; choose from "
                         f"{', '.join(builtin_datasets.BUILTIN_TASKS)}.")
  if FLAGS.study == "learning_rate" and FLAGS.learning_rates_from:
    raise app.UsageError("--learning_rates_from: --study=learning_rate selects the rates "
                         "itself; drop it.")
  rates = None if FLAGS.study == "learning_rate" else _selected_rates()
  common_flags.create_strategy()
  budget = _budget()
  # A study's points and the suite's comparisons train every method.
  config = common_flags.run_config_from_flags(trained=config_definitions.METHODS,
                                              epochs=budget.epochs,
                                              batch_size=budget.batch_size)
  common_flags.check_base(config)
  if FLAGS.study == _SUITE:
    _run_suite(config, budget, rates)
  else:
    _run_study(config, budget, rates)


def run():
  """The console script `keras-adapters-analysis`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

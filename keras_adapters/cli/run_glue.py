r"""Adapters on GLUE (Houlsby et al., 2019, Table 1): train, evaluate, submit, export.

The data is read locally, never downloaded: either the folder written by the GLUE download
script (`python download_glue_data.py --data_dir=glue_data --tasks=all`, from
https://github.com/nyu-mll/GLUE-baselines) with `--data_dir`, or a TensorFlow Datasets data
directory where `tfds build glue` ran with `--tfds_data_dir`.

One run per task, for the paper's eight tasks (`all` leaves out WNLI, as the paper does; name
it, e.g. `--task=all,wnli`, to run it too):

  keras-adapters-glue --task=all --data_dir=glue_data --model_dir=runs/glue \
      --export_dir=exports/glue

Other methods train with `--method` (`lora`, `ia3`, or the paper's baselines `top_k`,
`layer_norm`, `full`); `--methods=lora,top_k` runs each of them as a run of its own, in
`<model_dir>/<method>` (exported to `<export_dir>/<method>`), at its comparison learning
rate (`keras_adapters.analysis.method_comparison`).

The paper's model selection: per task, learning rate {3e-5, 3e-4, 3e-3} x epochs {3, 20} x
adapter size {8, 64, 256} x seeds {0, 1, 2}, the setting with the best mean validation score
over seeds, then its best seed:

  keras-adapters-glue --task=all --data_dir=glue_data --sweep \
      --model_dir=runs/glue_sweep --export_dir=exports/glue_sweep

Written under --model_dir: `<task>/run/` (or `<task>/sweep/`, with `sweep.json` and
`sweep.md`), the GLUE server files in `submission/` (zip them to submit; MNLI's model also
predicts the diagnostic set, AX.tsv, when `diagnostic/` is there), and `glue_results.json`
and `glue_results.md`, the validation scores of every task run into this --model_dir. Under
--export_dir: `<task>/saved_model` (raw strings in) and `<task>/adapters`. Rerunning resumes.

`--keras=3 [--backend=jax]` runs the same tasks, splits and results on Keras 3 (keras-hub,
the TF Hub base converted; `keras_adapters.keras3.training`): one run of --method per task,
checkpointed and resumable as on Keras 2; --sweep and --methods run on Keras 2.

In a clone of the repository, `python experiments/run_glue.py` runs the same.
"""

import os

from absl import app
from absl import flags

from keras_adapters.cli import cli
from keras_adapters.cli import common_flags
from keras_adapters.cli import keras_choice
from keras_adapters.data import glue
from keras_adapters.data import glue_submission
from keras_adapters.data import text_classification
from keras_adapters.analysis import sweep
from keras_adapters.core import config_definitions
from keras_adapters.tasks import classification
from keras_adapters.utils import atomic_io

flags.DEFINE_list("task", None,
                  f"GLUE task(s): {', '.join(glue.GLUE_TASKS)}, or all (= "
                  f"{','.join(glue.PAPER_GLUE_TASKS)}, the paper's tasks).")
flags.DEFINE_string("data_dir", None,
                    "GLUE folder of download_glue_data.py, holding CoLA/, SST-2/, MNLI/, ...")
flags.DEFINE_string("tfds_data_dir", None,
                    "TFDS data_dir holding glue/<task> prepared by `tfds build`; instead of "
                    "--data_dir.")
common_flags.define_output_flags("runs/glue", export_dir="none; each task to <export_dir>/<task>")
flags.DEFINE_bool("sweep", False,
                  "Run the grid of the --sweep_* flags per task and select on validation; "
                  "they replace --learning_rate, --epochs, --adapter_size and --seed.")
flags.DEFINE_list("sweep_learning_rates", ["3e-5", "3e-4", "3e-3"], "Sweep learning rates.")
flags.DEFINE_list("sweep_epochs", ["3", "20"], "Sweep numbers of epochs.")
flags.DEFINE_list("sweep_adapter_sizes", ["8", "64", "256"],
                  "Sweep adapter sizes (of --method=adapters; the other methods have none).")
flags.DEFINE_list("sweep_seeds", ["0", "1", "2"],
                  "Sweep seeds; a setting's score is its mean over them.")
flags.DEFINE_integer("max_train_examples", 0,
                     "Train on a fixed subset of this many training examples (0 = all), for "
                     "quick runs.", lower_bound=0)
common_flags.define_methods_flag(
    "Run each of these methods on every --task, in <model_dir>/<method> (exported to "
    "<export_dir>/<method>) at its comparison learning rate, instead of one run of --method")
common_flags.define_run_flags()
keras_choice.define_flags()
common_flags.validate_number_list("sweep_learning_rates", float, 0, "3e-4,3e-3")
common_flags.validate_number_list("sweep_epochs", float, 0, "3,20")
common_flags.validate_number_list("sweep_adapter_sizes", int, 1, "8,64")
common_flags.validate_number_list("sweep_seeds", int, 0, "0,1,2")
flags.mark_flag_as_required("task")

FLAGS = flags.FLAGS

RESULTS_JSON = "glue_results.json"
RESULTS_MARKDOWN = "glue_results.md"
SUBMISSION_DIR = "submission"
# MNLI's splits also hold the diagnostic set under this name: the server wants the MNLI
# model's predictions of it as AX.tsv.
_AX_SPLIT = "ax"


def _tasks():
  """The task names of --task, in the order given, `all` expanded."""
  tasks = []
  for name in FLAGS.task:
    if name == "all":
      tasks.extend(glue.PAPER_GLUE_TASKS)
      continue
    try:
      task = glue.glue_task(name).name
    except ValueError as e:
      raise app.UsageError(f"--task: {e} Or give 'all'.") from None
    if task not in glue.GLUE_TASKS:
      raise app.UsageError(f"--task={name}: the diagnostic set is not trained on; the MNLI "
                           "model predicts it: run --task=mnli with diagnostic/ in --data_dir.")
    tasks.append(task)
  return list(dict.fromkeys(tasks))


def _sweep_grid(method):
  """The grid of the --sweep_* flags (checked when parsed) for `method`, in the order of the
  trial names."""
  grid = dict(learning_rate=[float(value) for value in FLAGS.sweep_learning_rates],
              epochs=[float(value) for value in FLAGS.sweep_epochs])
  # The other methods have no adapters: their adapter size is not a dimension.
  if method in config_definitions.setting_methods("adapter_size"):
    grid["adapter_size"] = [int(value) for value in FLAGS.sweep_adapter_sizes]
  grid["seed"] = [int(value) for value in FLAGS.sweep_seeds]
  return grid


def _sweep_grids(methods):
  """The grid of each of `methods` with --sweep (else `None`); --sweep_adapter_sizes given
  where no method has adapters is refused."""
  if FLAGS["sweep_adapter_sizes"].present and not set(methods) & set(
      config_definitions.setting_methods("adapter_size")):
    raise app.UsageError(f"--sweep_adapter_sizes sizes adapters, which none of "
                         f"{', '.join(methods)} has: drop it.")
  return {method: _sweep_grid(method) if FLAGS.sweep else None for method in methods}


def _read(task, split):
  if FLAGS.data_dir:
    return glue.read_glue_split(FLAGS.data_dir, task, split)
  return glue.read_glue_tfds(task, split, FLAGS.tfds_data_dir)


def load_splits(task):
  """Training, labelled evaluation and test splits of `task`; for MNLI also the diagnostic set."""
  names = ("train", *glue.splits_for(task), *glue.test_splits_for(task))
  splits = {name: _read(task, name) for name in names}
  if task == "mnli":
    try:
      splits[_AX_SPLIT] = _read("ax", "test")
    except FileNotFoundError:
      print("No GLUE diagnostic set found: AX.tsv, which the GLUE server wants too, is not "
            "written (download_glue_data.py --tasks=diagnostic, or tfds build glue/ax).")
  splits["train"] = text_classification.training_subset(splits["train"],
                                                        FLAGS.max_train_examples)
  return splits


def _load_all(tasks):
  """Reads every task before any trains, so a missing file cannot end a long run midway."""
  try:
    return {task: load_splits(task) for task in tasks}
  except FileNotFoundError as e:
    if not FLAGS.data_dir:
      raise
    raise FileNotFoundError(f"{e} With run_glue.py, a prepared TFDS copy is read with "
                            "--tfds_data_dir instead of --data_dir.") from None


def run_glue_task(task, splits, config, grid, model_dir, export_root, runner=classification):
  """Runs (or sweeps) one task in `model_dir/<task>`, exported to `export_root/<task>` (not
  without), with `runner.run_task` (Keras 2's `classification`, or Keras 3's `training`);
  returns its results and the chosen trial (`None` without)."""
  spec = glue.glue_task(task)
  task_dir = os.path.join(model_dir, task)
  export_dir = os.path.join(export_root, task) if export_root else None
  if grid:
    result = sweep.run_sweep(spec, splits, config, grid, os.path.join(task_dir, "sweep"),
                             export_best_dir=export_dir)
    return result.best, result.summary["choice"]["trial"]
  run_dir = os.path.join(task_dir, "run")
  # A finished run exports from its final checkpoint when an export is asked for later.
  return runner.run_task(spec, splits, config, run_dir, export_dir=export_dir), None


def write_submission(task, predictions, model_dir):
  """Writes the GLUE server file of each predicted test split under `model_dir`; returns
  their paths."""
  paths = []
  for split, predicted in predictions.items():
    file_task, file_split = ("ax", "test") if split == _AX_SPLIT else (task, split)
    paths.append(glue_submission.write_glue_submission(
        os.path.join(model_dir, SUBMISSION_DIR), file_task, file_split,
        predicted["ids"], predicted["values"]))
  return paths


def _scores(task, values):
  """One split's metrics in %, in the task's order (its first is the one selected on)."""
  return ", ".join(f"{metric} {100 * values[metric]:.2f}"
                   for metric in glue.glue_task(task).metrics)


def markdown_table(table, model_dir):
  """`glue_results.json`'s content as Markdown: one row per task and evaluation split."""
  lines = [f"GLUE validation scores (%) of the runs in `{model_dir}`; test predictions "
           f"for the GLUE server in `{SUBMISSION_DIR}/`.", "",
           "| task | split | scores | trained params | % of base | train min | run |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
  for task in [task for task in glue.GLUE_TASKS if task in table]:
    entry = table[task]
    for split, values in entry["metrics"].items():
      lines.append(
          f"| {task} | {split} | {_scores(task, values)} | {entry['parameters']['trainable']:,} | "
          f"{entry['parameters']['trainable_percent_of_base']:.2f} | "
          f"{entry['train_seconds'] / 60:.1f} | {entry['trial'] or 'single run'} |")
  return "\n".join(lines) + "\n"


def run_method(data, config, grid, model_dir, export_dir, runner=classification):
  """Runs every task of `data` with `config` (swept over `grid`, if any) in `model_dir`
  with `runner` (`run_glue_task`); writes the submission files and the results tables
  there."""
  prefix = f"{config.model.method_name}: " if FLAGS.methods else ""
  results_path = os.path.join(model_dir, RESULTS_JSON)
  table = atomic_io.read_json(results_path) or {}
  for task, splits in data.items():
    print(f"{prefix}{task}: "
          f"{', '.join(f'{name} {len(split):,}' for name, split in splits.items())} examples")
    results, trial = run_glue_task(task, splits, config, grid, model_dir, export_dir,
                                   runner)
    submission = write_submission(task, results["predictions"], model_dir)
    for split, values in results["metrics"].items():
      print(f"{prefix}{task} {split}: {_scores(task, values)}")
    parameters = results["parameters"]
    print(f"{prefix}{task}: {parameters['trainable']:,} trained parameters "
          f"({parameters['trainable_percent_of_base']:.2f}% of the base)"
          f"{f', chosen trial {trial}' if trial else ''}; wrote {', '.join(submission)}")
    if results.get("export_dir"):
      print(f"{prefix}{task}: exported to {results['export_dir']}")
    table[task] = dict(metrics=results["metrics"], parameters=results["parameters"],
                       train_seconds=results["train_seconds"], config=results["config"],
                       trial=trial, export_dir=results.get("export_dir"),
                       submission=[os.path.basename(path) for path in submission])
    # Written after every task, so a long run's finished tasks are on record.
    atomic_io.write_json(results_path, table)
    atomic_io.write_text(os.path.join(model_dir, RESULTS_MARKDOWN),
                         markdown_table(table, model_dir))
  print(f"{prefix}Results: {results_path} and {RESULTS_MARKDOWN}; submission files in "
        f"{os.path.join(model_dir, SUBMISSION_DIR)}.")


def _runner():
  """The module whose `run_task` runs each task: Keras 2's `classification`, or with
  --keras=3 Keras 3's `training`, which refuses here the flags it lacks."""
  if not keras_choice.keras3_chosen():
    common_flags.create_strategy()
    return classification
  for flag in ("sweep", "methods"):
    if FLAGS[flag].value:
      raise app.UsageError(f"--{flag} runs on Keras 2; --keras=3 trains one --method per "
                           f"task: drop --{flag} or --keras=3.")
  # Here, not above: Keras 2 runs do not load keras-hub.
  from keras_adapters.keras3 import training  # pylint: disable=g-import-not-at-top
  return training


def main(argv):
  del argv  # cli.run refuses arguments.
  runner = _runner()
  if bool(FLAGS.data_dir) == bool(FLAGS.tfds_data_dir):
    raise app.UsageError(
        "Give exactly one of --data_dir (the GLUE folder of download_glue_data.py, from "
        "https://github.com/nyu-mll/GLUE-baselines: python download_glue_data.py "
        "--data_dir=glue_data --tasks=all) and --tfds_data_dir (a TFDS data_dir where `tfds "
        "build glue` ran).")
  tasks = _tasks()
  config = common_flags.run_config_from_flags()
  if runner is not classification:
    runner.check_config(config)  # Settings Keras 3 lacks, before anything is read.
  configs = common_flags.check_base(config, FLAGS.methods or ())
  grids = _sweep_grids(list(configs))
  for method, grid in grids.items():
    if grid:
      sweep.expand_grid(configs[method], grid)
  data = _load_all(tasks)
  for method, method_config in configs.items():
    if FLAGS.methods:
      run_method(data, method_config, grids[method], os.path.join(FLAGS.model_dir, method),
                 FLAGS.export_dir and os.path.join(FLAGS.export_dir, method), runner)
    else:
      run_method(data, method_config, grids[method], FLAGS.model_dir, FLAGS.export_dir,
                 runner)


def run():
  """The console script `keras-adapters-glue`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

r"""The paper's "no BERT" baseline and a TF-IDF floor, beside the BERT methods' results.

keras-tuner searches the paper's Table 5 space (feed-forward and convolutional heads on TF Hub
text embeddings, deep-and-wide) on the task's recorded train/validation split, retrains the
best configuration, tests it once and exports it; the TF-IDF + logistic regression floor runs
on the same split. Both rows are merged into `results/<task>/comparison.{json,md}`, beside
the adapter, full, top-k and LayerNorm rows of `run_classification.py --methods=...`:

  keras-adapters-automl --task=airline --max_trials=30

Rerunning resumes the search where it stopped (keras-tuner's state in --model_dir); a
finished search is not repeated, and raising --max_trials continues it. `--methods=tfidf_logreg`
runs the floor alone (a minute or two). The task flags and the training subset
(--max_train_examples) are those of `run_classification.py`, so the rows compare like with
like; --max_train_examples=0 trains on the whole training split, as the paper did.

In a clone of the repository, `python experiments/run_automl.py` runs the same.
"""

import math
import os

from absl import app
from absl import flags

from keras_adapters.cli import cli
from keras_adapters.cli import common_flags
from keras_adapters.cli import keras_choice
from keras_adapters.cli import task_flags
from keras_adapters.baselines import automl
from keras_adapters.baselines import embeddings
from keras_adapters.baselines import search_space
from keras_adapters.baselines import tfidf_floor
from keras_adapters.baselines import tuner
from keras_adapters.analysis import method_comparison
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

_METHODS = (automl.METHOD, tfidf_floor.METHOD)

flags.DEFINE_list("methods", list(_METHODS),
                  f"What to run: {automl.METHOD} (the AutoML search) and/or {tfidf_floor.METHOD} "
                  "(the floor).")
flags.DEFINE_enum("oracle", "random", list(tuner.ORACLES),
                  "keras-tuner oracle: random search, Bayesian optimisation or Hyperband.")
flags.DEFINE_integer("max_trials", 30, "Most trials of the search.")
flags.DEFINE_list("embeddings", list(embeddings.DEFAULT_EMBEDDINGS),
                  "Text embeddings to choose from: built-in names "
                  f"({', '.join(embeddings.EMBEDDINGS)}) or TF Hub handles / SavedModel paths.")
flags.DEFINE_float("max_epochs", search_space.DEFAULT_MAX_EPOCHS,
                   "Longest training of a trial in passes over the training set (Table 5's "
                   "largest 'number of training samples'; also Hyperband's budget).")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_integer("seed", 0, "Seed of the oracle, the trials and the floor.")
common_flags.define_output_flags("<runs/automl/<task>>", results_dir="<results/<task>>")
keras_choice.define_flags()

FLAGS = flags.FLAGS


def main(argv):
  del argv  # cli.run refuses arguments.
  keras_choice.keras2_only()
  unknown = sorted(set(FLAGS.methods) - set(_METHODS))
  if unknown or not FLAGS.methods:
    raise app.UsageError(f"--methods must name some of {list(_METHODS)}, got {FLAGS.methods}.")
  if FLAGS.max_trials < 1 or not 0 < FLAGS.max_epochs < math.inf:
    raise app.UsageError(f"--max_trials={FLAGS.max_trials} --max_epochs={FLAGS.max_epochs}: "
                         "--max_trials must be at least 1 and --max_epochs positive and finite.")
  # Checked before any data is read: a misspelt --embeddings fails here, not in every trial.
  settings = automl.SearchSettings(
      oracle=FLAGS.oracle, embeddings=tuple(FLAGS.embeddings), max_trials=FLAGS.max_trials,
      max_epochs=FLAGS.max_epochs, batch_size=FLAGS.batch_size, seed=FLAGS.seed)
  model_dir = FLAGS.model_dir or os.path.join("runs", "automl", task_flags.task_name())
  spec, splits = task_flags.load_splits(model_dir, FLAGS.max_train_examples)
  results_dir = FLAGS.results_dir or os.path.join("results", spec.name)
  # Before anything is written there: a table of other data is never replaced or mixed into.
  identity = method_comparison.table_identity(spec, splits)
  method_comparison.check_results_dir(results_dir, identity)
  print(f"{spec.name}: {', '.join(f'{k} {len(v):,}' for k, v in splits.items())} examples; "
        f"classes {list(spec.label_names)}", flush=True)
  rows = []
  if tfidf_floor.METHOD in FLAGS.methods:
    floor = tfidf_floor.run_tfidf_floor(spec, splits, seed=FLAGS.seed)
    atomic_io.write_json(os.path.join(results_dir, f"{tfidf_floor.METHOD}.json"), paths.portable(
        provenance.stamped(floor), os.getcwd()))
    rows.append(tfidf_floor.comparison_row(floor, seed=FLAGS.seed))
    print(f"{tfidf_floor.METHOD}: test {floor['metric']} "
          f"{100 * floor['test'][floor['metric']]:.2f} (C={floor['c']:g} chosen on validation)",
          flush=True)
  if automl.METHOD in FLAGS.methods:
    results = automl.run_automl(spec, splits, settings, model_dir, FLAGS.export_dir)
    atomic_io.write_json(os.path.join(results_dir, f"{automl.METHOD}.json"),
                         paths.portable(results, os.getcwd()))
    rows.append(automl.comparison_row(results))
    final, metric = results["final"], results["metric"]
    print(f"{automl.METHOD}: {len(results['trials'])} trial(s) in "
          f"{results['search_seconds'] / 60:.1f} min; best trial {results['best']['trial_id']}: "
          f"validation {100 * final['validation'][metric]:.2f} after retraining, test "
          f"{100 * final['test'][metric]:.2f}; exported to {final['export_dir']}", flush=True)
  rows.sort(key=lambda row: _METHODS.index(row["method"]))
  summary = method_comparison.merge_rows(results_dir, rows, **identity)
  print(method_comparison.markdown_table(summary))
  print(f"Written: {results_dir}/comparison.json and comparison.md")


def run():
  """The console script `keras-adapters-automl`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

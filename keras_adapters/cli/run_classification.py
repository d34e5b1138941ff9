r"""Trains, evaluates and exports a text classifier: the paper's additional tasks.

The default is the README's main job: adapters (m=64) on the real Crowdflower airline
sentiment task with the embedded all-MiniLM-L6-v2 encoder, on a quick budget (a 2,000-example
subset of the training split, 2 epochs), then test accuracy and an export:

  keras-adapters-classify

`--full` trains on the whole training split for the paper's 20 epochs. Several `--methods`
run the method comparison over `--seeds` and write a results table:

  keras-adapters-classify --task=bbc_news \
      --methods=adapters,full,top_k,layer_norm --model_dir=runs/bbc_news

A rerun resumes and trains nothing finished; `--rerun=<methods>` trains those methods again
(after a change of the code), their old run folders moved aside.

Any CSV/TSV/JSONL file or folder-per-class tree works with `--data_path`, `--text_column`,
`--label_column`. Splits are fixed, seeded and stratified, and recorded in a manifest so that
every method sees the same examples. Data already split, as Hugging Face's
`run_classification.py` takes it, is given with `--train_file`, `--validation_file` and
`--test_file`; its manifest records the files' examples, so a rerun on changed files stops.

In a clone of the repository, `python experiments/run_classification.py` runs the same.
"""

import os

from absl import app
from absl import flags

from keras_adapters.cli import cli
from keras_adapters.cli import common_flags
from keras_adapters.cli import keras_choice
from keras_adapters.cli import task_flags
from keras_adapters.hub import hub_encoder
from keras_adapters.analysis import method_comparison
from keras_adapters.tasks import classification
from keras_adapters.utils import atomic_io

flags.DEFINE_bool("full", False, "Paper budget: every training example, 20 epochs.")
common_flags.define_methods_flag("Compare these methods over --seeds and write a results "
                                  "table, instead of one run of --method")
common_flags.define_rerun_flag("--methods")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds of the comparison.")
common_flags.validate_number_list("seeds", int, 0, "0,1,2")
common_flags.define_output_flags("runs/classification", results_dir="<results/<task>>")
common_flags.define_run_flags(learning_rate=1e-3, epochs=2.0)
keras_choice.define_flags()

FLAGS = flags.FLAGS


def load_splits():
  """The task spec and its train/validation/test splits, as recorded in the manifest."""
  return task_flags.load_splits(FLAGS.model_dir, 0 if FLAGS.full else FLAGS.max_train_examples)


def main(argv):
  del argv  # cli.run refuses arguments.
  not_compared = sorted(set(FLAGS.rerun or ()) - set(FLAGS.methods or ()))
  if not_compared:
    raise app.UsageError(f"--rerun={','.join(FLAGS.rerun)}: --methods does not compare "
                         f"{', '.join(not_compared)}; list them in --methods too.")
  runner = classification
  if keras_choice.keras3_chosen():
    if FLAGS.methods:
      raise app.UsageError("--keras=3 trains one --method; comparisons of --methods run on "
                           "Keras 2: drop --methods or --keras=3.")
    # Here, not above: Keras 2 runs do not load keras-hub.
    from keras_adapters.keras3 import training as runner  # pylint: disable=g-import-not-at-top
  else:
    common_flags.create_strategy()
  config = common_flags.run_config_from_flags(**({"epochs": 20.0} if FLAGS.full else {}))
  if runner is not classification:
    runner.check_config(config)  # Settings Keras 3 lacks, before anything is read.
  common_flags.check_base(config, FLAGS.methods or ())
  # Before anything is written there (a --data_path task's split manifest).
  atomic_io.make_writable_dir(FLAGS.model_dir, "model_dir")
  spec, splits = load_splits()
  print(f"{spec.name}: {', '.join(f'{k} {len(v):,}' for k, v in splits.items())} examples; "
        f"classes {list(spec.label_names)}")

  if FLAGS.methods:
    num_layers = hub_encoder.read_hub_encoder(config.model.hub_handle).config["num_layers"]
    results_dir = FLAGS.results_dir or os.path.join("results", spec.name)
    # The table reports the test split; validation is only for choosing settings.
    summary = method_comparison.compare_methods(
        spec, dict(train=splits["train"], test=splits["test"]), config, FLAGS.methods,
        [int(seed) for seed in FLAGS.seeds], FLAGS.model_dir, results_dir, num_layers,
        rerun=FLAGS.rerun or ())
    print(method_comparison.markdown_table(summary))
    print(f"Written: {results_dir}/comparison.json and comparison.md")
    return

  export_dir = FLAGS.export_dir or os.path.join(FLAGS.model_dir, "export")
  results = runner.run_task(spec, splits, config, FLAGS.model_dir, export_dir=export_dir)
  for split, values in results["metrics"].items():
    print(f"{split}: " + ", ".join(f"{k} {100 * v:.2f}%" for k, v in values.items()))
  parameters = results["parameters"]
  print(f"Trained {parameters['trainable']:,} parameters "
        f"({parameters['trainable_percent_of_base']:.2f}% of the base) in "
        f"{results['train_seconds'] / 60:.1f} min.")
  if results.get("backend", "tensorflow") == "tensorflow":
    print(f"Exported: {export_dir}/saved_model (strings in, probabilities out) and "
          f"{export_dir}/adapters (adapter-only artifact).")
  else:  # A SavedModel is a TensorFlow graph.
    print(f"Exported: {export_dir}/adapters (adapter-only artifact); the serving SavedModel "
          "needs --backend=tensorflow (or kak.export_task on the artifact).")


def run():
  """The console script `keras-adapters-classify`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

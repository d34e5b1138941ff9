"""The flags naming a text-classification task and its recorded split, and reading them.

Shared by `run_classification.py` and `run_automl.py`, so that every method of a comparison
reads the same task the same way and trains and scores on the same examples.
"""

import os

from absl import flags
import numpy as np

from keras_adapters.tasks import builtin_datasets
from keras_adapters.tasks import splits as splits_lib
from keras_adapters.tasks import text_classification

_SPLITS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "splits")

flags.DEFINE_string("task", "airline",
                    f"Built-in task ({', '.join(builtin_datasets.BUILTIN_TASKS)}); ignored "
                    "when --data_path is given.")
flags.DEFINE_string("data_path", None, "CSV/TSV/JSONL file or folder-per-class tree.")
flags.DEFINE_string("text_column", "text", "Text column of --data_path.")
flags.DEFINE_string("label_column", "label", "Label column of --data_path.")
flags.DEFINE_list("encoding", ["utf-8"],
                  "Encoding of --data_path; several, comma-separated, are tried in order for "
                  "each file (e.g. utf-8,latin-1).")
flags.DEFINE_bool("drop_empty", False,
                  "Drop examples of --data_path whose text is empty instead of stopping.")
flags.DEFINE_string("split_manifest", None,
                    "Where the train/validation/test split is recorded; default: "
                    "experiments/splits/<task>.json for built-in tasks, else in --model_dir.")
flags.DEFINE_integer("max_train_examples", 2000,
                     "Train on a seeded subset of this many training examples (0 = all).",
                     lower_bound=0)

FLAGS = flags.FLAGS


def task_name():
  """The task's name: the --data_path file or folder name without extension, or --task."""
  if FLAGS.data_path:
    return os.path.splitext(os.path.basename(os.path.normpath(FLAGS.data_path)))[0]
  return FLAGS.task


def load_splits(model_dir, max_train_examples):
  """The task spec and its train/validation/test splits, as recorded in the manifest.

  Args:
    model_dir: Where the manifest of a `--data_path` task goes without `--split_manifest`.
    max_train_examples: Keep a fixed subset of this many training examples (0 = all).

  Returns:
    The spec and a dict with the "train", "validation" and "test" examples.
  """
  if FLAGS.data_path:
    spec, examples = text_classification.read_text_classification(
        FLAGS.data_path, text_column=FLAGS.text_column, label_column=FLAGS.label_column,
        encoding=FLAGS.encoding, name=task_name(), drop_empty=FLAGS.drop_empty)
    manifest = FLAGS.split_manifest or os.path.join(model_dir, "split.json")
  else:
    spec, examples = builtin_datasets.load_builtin_task(FLAGS.task)
    manifest = FLAGS.split_manifest or os.path.join(_SPLITS_DIR, f"{spec.name}.json")
  train, validation, test = splits_lib.split_with_manifest(manifest, spec, examples)
  if 0 < max_train_examples < len(train):
    # A fixed subset (seed 0), the same for every method and seed of a comparison.
    keep = np.sort(np.random.default_rng(0).permutation(len(train))[:max_train_examples])
    train = text_classification.select_examples(train, keep)
  return spec, dict(train=train, validation=validation, test=test)

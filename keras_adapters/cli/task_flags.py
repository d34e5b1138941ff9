"""The flags naming a text-classification task and its recorded split, and reading them.

Shared by `run_classification.py` and `run_automl.py`, so that every method of a comparison
reads the same task the same way and trains and scores on the same examples. The data is a
built-in task (`--task`), one file split here (`--data_path`), or a user's own split in three
files (`--train_file`, `--validation_file`, `--test_file`, as Hugging Face's
`run_classification.py` takes them); each split is recorded in a manifest.
"""

import collections
import dataclasses
import os

from absl import app
from absl import flags
import numpy as np

from keras_adapters.data import builtin_datasets
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems

_SPLITS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "splits")

flags.DEFINE_string("task", "airline",
                    f"Built-in task ({', '.join(builtin_datasets.BUILTIN_TASKS)}); ignored "
                    "when --data_path is given.")
flags.DEFINE_string("data_path", None, "CSV/TSV/JSONL file or folder-per-class tree.")
flags.DEFINE_string("train_file", None,
                    "Training split of a data set split in advance (CSV/TSV/JSONL file or "
                    "folder-per-class tree), with --validation_file and --test_file, instead "
                    "of --task or --data_path; the task is named after its folder.")
flags.DEFINE_string("validation_file", None, "Validation split, with --train_file.")
flags.DEFINE_string("test_file", None, "Test split, with --train_file.")
flags.DEFINE_string("text_column", "text",
                    "Text column of --data_path or of the --train_file, ... files.")
flags.DEFINE_string("label_column", "label",
                    "Label column of --data_path or of the --train_file, ... files.")
flags.DEFINE_list("encoding", ["utf-8"],
                  "Encoding of --data_path or the --train_file, ... files; several, "
                  "comma-separated, are tried in order for each file (e.g. utf-8,latin-1).")
flags.DEFINE_string("delimiter", None,
                    "What separates the fields of --data_path or the --train_file, ... CSV/TSV "
                    f"files: {', '.join(text_classification.DELIMITERS)} or the character; "
                    "default: found from the header.")
flags.DEFINE_bool("merge_label_case", False,
                  "Read labels that differ only by case (Positive, positive) as one class, "
                  "spelt as most examples spell it, instead of stopping.")
flags.DEFINE_bool("drop_empty", False,
                  "Drop examples of --data_path or the --train_file, ... files whose text is "
                  "empty instead of stopping.")
flags.DEFINE_string("split_manifest", None,
                    "Where the train/validation/test split is recorded; default: "
                    "keras_adapters/cli/splits/<task>.json for built-in tasks, else in "
                    "--model_dir.")
flags.DEFINE_integer("max_train_examples", 2000,
                     "Train on a seeded subset of this many training examples (0 = all).",
                     lower_bound=0)

FLAGS = flags.FLAGS

# The flags of a data set split in advance, in the order of `splits_lib.SPLIT_NAMES`.
_SPLIT_FILE_FLAGS = ("train_file", "validation_file", "test_file")


def task_name():
  """The task's name: the folder of --train_file, the --data_path file or folder name
  without extension, or --task."""
  if FLAGS.train_file:
    return os.path.basename(os.path.dirname(os.path.abspath(FLAGS.train_file)))
  if FLAGS.data_path:
    return os.path.splitext(os.path.basename(os.path.normpath(FLAGS.data_path)))[0]
  return FLAGS.task


def load_splits(model_dir, max_train_examples, task=None):
  """The task spec and its train/validation/test splits, as recorded in the manifest.

  Args:
    model_dir: Where the manifest of a `--data_path` or `--train_file` task goes without
      `--split_manifest`.
    max_train_examples: Keep a fixed subset of this many training examples (0 = all).
    task: A built-in task to read in place of the flags' data (`--task`, `--data_path`, ...).

  Returns:
    The spec and a dict with the "train", "validation" and "test" examples.

  Raises:
    app.UsageError: Only some of the split file flags are given, or with --data_path or
      --task.
  """
  # A URL TensorFlow cannot read, or storage it cannot reach, named by its flag.
  for name in ("data_path", "split_manifest") + _SPLIT_FILE_FLAGS:
    if FLAGS[name].value:
      file_systems.check_reachable(FLAGS[name].value, name)
  local_manifest = FLAGS.split_manifest or os.path.join(model_dir, "split.json")
  if task is not None:
    spec, splits = builtin_datasets.split_builtin_task(
        task, os.path.join(_SPLITS_DIR, f"{task}.json"))
  elif any(FLAGS[name].value for name in _SPLIT_FILE_FLAGS):
    spec, examples, given = _read_split_files()
    splits = splits_lib.split_with_manifest(local_manifest, spec, examples, given=given)
  elif FLAGS.data_path:
    spec, examples = _read(FLAGS.data_path)
    splits = splits_lib.split_with_manifest(local_manifest, spec, examples)
  else:
    spec, splits = builtin_datasets.split_builtin_task(
        FLAGS.task, FLAGS.split_manifest or os.path.join(_SPLITS_DIR, f"{FLAGS.task}.json"))
  train, validation, test = splits
  splits = dict(train=text_classification.training_subset(train, max_train_examples),
                validation=validation, test=test)
  # On stdout, with the run's other output: stderr is for the one line of an error.
  print(class_counts(spec, splits), flush=True)
  return spec, splits


def class_counts(spec, splits):
  """A line giving each class's examples in each split, e.g. `Classes (train/validation/test
  examples): 'bad' 8/1/1, 'good' 9/1/1`: a wrong label column or a missing class shows."""
  counts = {name: collections.Counter(split.labels.tolist()) for name, split in splits.items()}
  return (f"Classes ({'/'.join(splits)} examples): " + ", ".join(
      f"{label!r} " + "/".join(str(counts[name][class_id]) for name in splits)
      for class_id, label in enumerate(spec.label_names)))


def _read(path):
  """Reads a --data_path or --train_file, ... file with the reading flags."""
  return text_classification.read_text_classification(
      path, text_column=FLAGS.text_column, label_column=FLAGS.label_column,
      encoding=FLAGS.encoding, name=task_name(), drop_empty=FLAGS.drop_empty,
      delimiter=FLAGS.delimiter, merge_label_case=FLAGS.merge_label_case)


def _read_split_file(name):
  """Reads the file of the split flag `name`; a column the training file has and this one
  has not is named as a difference between the files, not a wrong column flag."""
  try:
    return _read(FLAGS[name].value)
  except text_classification.MissingColumnError as e:
    if name == _SPLIT_FILE_FLAGS[0]:
      raise
    raise errors.DataError(
        f"--{name} {FLAGS[name].value} has the columns {e.columns}, not the column "
        f"{e.column!r} (--{e.argument}) that --train_file has: the three files share "
        f"--text_column and --label_column. Rename its columns as in --train_file.") from e


def _read_split_files():
  """The examples of --train_file, --validation_file and --test_file, and their splits.

  Ids are `<split>/<id in the file>`, e.g. `train/12` for a CSV file's row 12; label ids
  follow the training file's classes.
  """
  given = [f"--{name}" for name in _SPLIT_FILE_FLAGS if FLAGS[name].value]
  if len(given) < len(_SPLIT_FILE_FLAGS):
    raise app.UsageError(
        f"Got only {' and '.join(given)}: a data set split in advance needs all of "
        "--train_file, --validation_file and --test_file. For data in one file, give "
        "--data_path instead; it is split here.")
  others = [flag for flag, present in (("--data_path", bool(FLAGS.data_path)),
                                       ("--task", FLAGS["task"].present)) if present]
  if others:
    raise app.UsageError(
        f"{' and '.join(others)} and --train_file, --validation_file, --test_file each name "
        "the data: give only one of them.")
  parts = [_read_split_file(name) for name in _SPLIT_FILE_FLAGS]
  spec = parts[0][0]
  if len(spec.label_names) < 2:
    raise errors.DataError(
        f"--train_file {FLAGS.train_file} has examples of one class only, "
        f"{spec.label_names[0]!r}: a classifier learns nothing from it. Check --label_column "
        "and that the file holds every class.")
  class_id = {label: i for i, label in enumerate(spec.label_names)}
  examples = []
  for name, split, (part_spec, part) in zip(_SPLIT_FILE_FLAGS, splits_lib.SPLIT_NAMES, parts):
    unseen = [label for label in part_spec.label_names if label not in class_id]
    if unseen:
      raise errors.DataError(
          f"--{name} {FLAGS[name].value} has examples of classes {unseen} that --train_file "
          f"has none of, so no model learns them (--train_file's classes are "
          f"{list(spec.label_names)}). Add training examples of them, or remove them from "
          f"--{name}.")
    examples.append(dataclasses.replace(
        part, ids=[f"{split}/{example_id}" for example_id in part.ids],
        labels=np.array([class_id[label] for label in part_spec.label_names],
                        np.int32)[part.labels]))
  return (spec, text_classification.concatenate_examples(examples),
          {split: part.ids for split, part in zip(splits_lib.SPLIT_NAMES, examples)})

"""Data as users export it, through the flags of `run_classification.py` and
`run_automl.py`: `--delimiter` and `--merge_label_case` reach the reader, a validation file
with other column names is named as such, and the classes are counted before training.

The reader's own cases (delimiters found from the header, byte-order marks, a missing header,
swapped columns, missing-value labels) are tested in `tasks/text_classification_test`.
"""

import contextlib
import io
import os
import re

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import tensorflow as tf

from experiments import cli
from experiments import run_classification
from experiments import task_flags
from keras_adapters.utils import errors

FLAGS = flags.FLAGS


def _write(path, content):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(content)
  return path


def _rows(count, delimiter=",", labels=("bad", "good")):
  return "".join(f"w{i} w{i + 1}{delimiter}{labels[i % len(labels)]}\n" for i in range(count))


class UserDataTest(parameterized.TestCase, tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path

  def _load(self, *args):
    with flagsaver.flagsaver():
      FLAGS(["run_classification", "--max_train_examples=0", f"--model_dir={self.root}",
             f"--split_manifest={os.path.join(self.root, 'split.json')}", *args])
      return run_classification.load_splits()

  @parameterized.parameters(("semicolon", ";"), ("pipe", "|"), (";", ";"))
  def test_the_delimiter_flag_reaches_the_reader(self, flag, delimiter):
    # A comma inside each text, and no comma between the columns.
    path = _write(os.path.join(self.root, "d.csv"),
                  f"text{delimiter}label\n" + _rows(30, delimiter).replace(" ", ", "))
    _, splits = self._load(f"--data_path={path}", f"--delimiter={flag}")
    self.assertEqual(sum(len(split) for split in splits.values()), 30)
    with self.assertRaisesRegex(errors.DataError,
                                rf"the columns are \['text{re.escape(delimiter)}label'\]"):
      self._load(f"--data_path={path}", "--delimiter=comma")

  def test_merge_label_case_reaches_the_reader(self):
    path = _write(os.path.join(self.root, "d.csv"),
                  "text,label\n" + _rows(32, labels=("bad", "good", "good", "Good")))
    with self.assertRaisesRegex(errors.DataError, "differ only by case") as raised:
      self._load(f"--data_path={path}")
    self.assertIn("or pass --merge_label_case to read", cli.flag_message(str(raised.exception)))
    spec, _ = self._load(f"--data_path={path}", "--merge_label_case")
    self.assertEqual(spec.label_names, ("bad", "good"))

  def test_a_validation_file_with_other_columns_is_named(self):
    folder = os.path.join(self.root, "reviews")
    os.makedirs(folder)
    files = {name: _write(os.path.join(folder, f"{name}.csv"), "review,sentiment\n" + _rows(8))
             for name in ("train", "test")}
    files["dev"] = _write(os.path.join(folder, "dev.csv"), "text,label\n" + _rows(8))
    with self.assertRaisesRegex(
        errors.DataError, r"^--validation_file .*dev\.csv has the columns \['text', 'label'\], "
        r"not the column 'review' \(--text_column\) that --train_file has: the three files "
        r"share --text_column and --label_column\. Rename its columns as in --train_file\.$"):
      self._load(f"--train_file={files['train']}", f"--validation_file={files['dev']}",
                 f"--test_file={files['test']}", "--text_column=review",
                 "--label_column=sentiment")

  def test_classes_are_counted_in_every_split_before_training(self):
    path = _write(os.path.join(self.root, "d.csv"),
                  "text,label\n" + _rows(30, labels=("bad", "good", "meh")))
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
      spec, splits = self._load(f"--data_path={path}")
    self.assertEqual(stdout.getvalue(), task_flags.class_counts(spec, splits) + "\n")
    self.assertEqual(task_flags.class_counts(spec, splits),
                     "Classes (train/validation/test examples): 'bad' 8/1/1, 'good' 8/1/1, "
                     "'meh' 8/1/1")


if __name__ == "__main__":
  tf.test.main()

"""`run_classification.py --train_file --validation_file --test_file`: a data set split in
advance, as Hugging Face's `run_classification.py` takes it, recorded like a drawn split.

Command lines are parsed for real (`flags.FLAGS(argv)` inside `flagsaver`) and the splits read
by `run_classification.load_splits`, which gives `main` the splits it trains and scores on
(`run_classification_test.py` tests such runs).
"""

import os

from absl import app
from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import run_classification
from keras_adapters.hub import testing
from keras_adapters.data import splits as splits_lib

FLAGS = flags.FLAGS


def _write(path, rows):
  """A CSV file with the columns review and sentiment."""
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("review,sentiment\n" + "".join(f"{text},{label}\n" for text, label in rows))
  return path


def _rows(count, first_word, labels=("bad", "good")):
  return [(f"w{first_word + i} w{first_word + i + 1}", labels[i % len(labels)])
          for i in range(count)]


class SplitFilesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = os.path.join(self.create_tempdir().full_path, "reviews")
    os.makedirs(self.folder)
    self.files = dict(
        train_file=_write(os.path.join(self.folder, "train.csv"), _rows(12, 0)),
        validation_file=_write(os.path.join(self.folder, "dev.csv"), _rows(4, 20)),
        test_file=_write(os.path.join(self.folder, "test.csv"), _rows(4, 30)))
    self.model_dir = os.path.join(self.create_tempdir().full_path, "run")

  def _argv(self, **values):
    values = dict(self.files, text_column="review", label_column="sentiment",
                  model_dir=self.model_dir, max_train_examples="0", **values)
    return ["run_classification"] + [f"--{k}={v}" for k, v in values.items() if v is not None]

  def _load(self, **values):
    with flagsaver.flagsaver():
      FLAGS(self._argv(**values))
      return run_classification.load_splits()

  def test_files_are_the_splits_and_the_manifest_records_them(self):
    """Each file is one split, in file order; ids name the split and the row; the manifest
    in --model_dir records all three as given, and a rerun reuses it unchanged."""
    spec, splits = self._load()
    self.assertEqual((spec.name, tuple(spec.label_names)), ("reviews", ("bad", "good")))
    self.assertEqual({name: len(split) for name, split in splits.items()},
                     dict(train=12, validation=4, test=4))
    self.assertEqual(list(splits["test"].ids), ["test/1", "test/2", "test/3", "test/4"])
    self.assertEqual(list(splits["validation"].texts[0][:2]), ["w20 w21", "w21 w22"])
    self.assertEqual(splits["test"].labels.tolist(), [0, 1, 0, 1])
    path = os.path.join(self.model_dir, "split.json")
    manifest = splits_lib.load_split_manifest(path)
    self.assertEqual(manifest.given_splits, ("train", "validation", "test"))
    self.assertEqual(manifest.fractions, (0.6, 0.2, 0.2))
    digest = testing.folder_digest(path)
    _, again = self._load()
    self.assertEqual(list(again["train"].ids), list(splits["train"].ids))
    self.assertEqual(testing.folder_digest(path), digest)

  def test_changed_files_are_refused_against_the_recorded_split(self):
    self._load()
    _write(self.files["test_file"], _rows(4, 40))
    with self.assertRaisesRegex(ValueError, "not the ones split manifest .* was made from"):
      self._load()

  def test_class_ids_follow_the_training_file(self):
    """A test file listing fewer classes, or in another order, keeps the training ids."""
    for name in ("train_file", "validation_file"):
      _write(self.files[name], _rows(12, 0, labels=("a", "b", "c")))
    _write(self.files["test_file"], [("w1", "c"), ("w2", "c"), ("w3", "b")])
    spec, splits = self._load()
    self.assertEqual(tuple(spec.label_names), ("a", "b", "c"))
    self.assertEqual(splits["test"].labels.tolist(), [2, 2, 1])

  def test_a_class_missing_from_training_is_an_error(self):
    _write(self.files["validation_file"], [("w1", "bad"), ("w2", "meh")])
    with self.assertRaisesRegex(
        ValueError, r"--validation_file .*dev.csv has examples of classes \['meh'\] that "
        r"--train_file has none of.*\['bad', 'good'\]"):
      self._load()

  def test_one_class_to_learn_is_an_error(self):
    _write(self.files["train_file"], _rows(4, 0, labels=("bad",)))
    with self.assertRaisesRegex(ValueError, "--train_file .* has examples of one class only"):
      self._load()

  def test_some_of_the_three_files_is_a_usage_error(self):
    with self.assertRaisesRegex(
        app.UsageError, r"Got only --train_file and --test_file: a data set split in advance "
        r"needs all of --train_file, --validation_file and --test_file"):
      self._load(validation_file="")

  def test_other_data_flags_are_usage_errors(self):
    with self.assertRaisesRegex(app.UsageError, r"^--data_path and --train_file, "
                                r"--validation_file, --test_file each name the data"):
      self._load(data_path=self.files["train_file"])
    with self.assertRaisesRegex(app.UsageError, r"^--task and --train_file"):
      self._load(task="airline")


if __name__ == "__main__":
  tf.test.main()

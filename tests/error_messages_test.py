"""Messages name the problem and the fix, in the caller's terms, and what they recommend
exists: a folder that cannot be written, library arguments shown as the flags a user types,
the flags those messages recommend (`--drop_empty`, several `--encoding`s).

Other messages of this kind are tested beside their code: CSV quotes and long fields in
`text_classification_test`, non-finite settings in `task_runner_test`, an unreadable latest
checkpoint in `trainer_test`, preprocessing models in `base_limits_test`, and every CLI's
one-line errors in `cli_errors_test`.
"""

import os

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import cli
from experiments import run_classification
from keras_adapters.training import task_runner
from keras_adapters.training import testing
from keras_adapters.utils import atomic_io

FLAGS = flags.FLAGS
# Writing there fails even for root.
_READ_ONLY = "/sys/kernel"


class ErrorMessagesTest(tf.test.TestCase):

  def test_a_folder_that_cannot_be_written_is_named_before_training(self):
    spec, splits = testing.colour_task()
    model_dir = os.path.join(_READ_ONLY, "run")
    with self.assertRaisesRegex(PermissionError, f"model_dir='{model_dir}' cannot be written "
                                r"to \(.+\): pass a model_dir= folder you can write to\."):
      task_runner.run_task(spec, splits, testing.run_config(), model_dir)
    with self.assertRaisesRegex(PermissionError, f"export_dir='{_READ_ONLY}' cannot be written"):
      atomic_io.make_writable_dir(_READ_ONLY, "export_dir")
    a_file = os.path.join(self.create_tempdir().full_path, "notes.txt")
    open(a_file, "w").close()
    with self.assertRaisesRegex(NotADirectoryError, "model_dir='.*notes.txt/run' is a file, or "
                                "inside one: pass a folder."):
      atomic_io.make_writable_dir(os.path.join(a_file, "run"), "model_dir")

  def test_library_arguments_are_shown_as_typed_flags(self):
    with flagsaver.flagsaver():
      FLAGS(["run_classification"])
      self.assertEqual(
          cli.flag_message('Pass encoding="latin-1", or encoding=("utf-8", "latin-1"); or '
                           "drop_empty=True; not drop_empty=False; max_seq_length=600 is too "
                           "long; label_names=None; a new model_dir=<folder> (a rerun)."),
          'Pass --encoding="latin-1", or --encoding=utf-8,latin-1; or --drop_empty; not '
          "--nodrop_empty; --max_seq_length=600 is too long; label_names=None; a new "
          "--model_dir=<folder> (a rerun).")

  def test_the_recommended_options_exist_as_flags(self):
    """The messages about empty texts and undecodable bytes recommend --drop_empty and
    several --encoding values; both work."""
    root = self.create_tempdir().full_path
    path = os.path.join(root, "reviews.csv")
    testing.write_csv(path)
    with open(path, "ab") as f:
      f.write(b"   ,good\nw1 w2 caf\xe9,bad\n")
    argv = ["run_classification", f"--data_path={path}", "--text_column=review",
            "--label_column=sentiment", f"--split_manifest={root}/split.json"]
    with flagsaver.flagsaver():
      FLAGS(argv)
      with self.assertRaisesRegex(ValueError, "not valid utf-8"):
        run_classification.load_splits()
      FLAGS(argv + ["--encoding=utf-8,latin-1"])
      with self.assertRaisesRegex(ValueError, "the text is empty") as raised:
        run_classification.load_splits()
      self.assertIn("or pass --drop_empty to drop examples", cli.flag_message(
          str(raised.exception)))
      FLAGS(argv + ["--encoding=utf-8,latin-1", "--drop_empty"])
      _, splits = run_classification.load_splits()
    texts = [text for split in splits.values() for text in split.texts[0]]
    self.assertLen(texts, 31)
    self.assertIn("w1 w2 caf\u00e9", texts)


if __name__ == "__main__":
  tf.test.main()

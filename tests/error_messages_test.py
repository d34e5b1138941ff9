"""Messages name the problem and the fix, in the caller's terms, and what they recommend
exists: a folder that cannot be written (a run's, the model cache's), library arguments shown
as the flags a user types, the flags those messages recommend (`--drop_empty`, several
`--encoding`s).

Other messages of this kind are tested beside their code: CSV quotes and long fields in
`text_classification_test`, non-finite settings in `classification_test`, an unreadable latest
checkpoint in `trainer_test`, preprocessing models in `base_limits_test`, and every CLI's
one-line errors in `cli_errors_test`.
"""

import os
from unittest import mock

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import cli
from experiments import common_flags
from experiments import run_classification
from keras_adapters.hub import default_model
from keras_adapters.models import adapter_config
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

FLAGS = flags.FLAGS
# Writing there fails even for root.
_READ_ONLY = "/sys/kernel"


class ErrorMessagesTest(tf.test.TestCase):

  def test_a_folder_that_cannot_be_written_is_named_before_training(self):
    spec, splits = testing.colour_task()
    model_dir = os.path.join(_READ_ONLY, "run")
    with self.assertRaisesRegex(PermissionError, f"model_dir='{model_dir}' cannot be written "
                                r"to \(.+\): pass a model_dir= folder you can write to\."):
      classification.run_task(spec, splits, testing.run_config(), model_dir)
    with self.assertRaisesRegex(PermissionError, f"export_dir='{_READ_ONLY}' cannot be written"):
      atomic_io.make_writable_dir(_READ_ONLY, "export_dir")
    a_file = os.path.join(self.create_tempdir().full_path, "notes.txt")
    open(a_file, "w").close()
    with self.assertRaisesRegex(NotADirectoryError, "model_dir='.*notes.txt/run' is a file, or "
                                "inside one: pass a folder."):
      atomic_io.make_writable_dir(os.path.join(a_file, "run"), "model_dir")

  def test_a_model_cache_that_cannot_be_written_is_named_with_its_variable(self):
    a_file = os.path.join(self.create_tempdir().full_path, "notes.txt")
    open(a_file, "w").close()
    for cache, problem in ((os.path.join(_READ_ONLY, "cache"), "cannot be created or written "
                            "to"), (os.path.join(a_file, "cache"), "is a file, or inside one")):
      with mock.patch.dict(os.environ, KERAS_ADAPTERS_CACHE=cache):
        for default_handle in (default_model.default_hub_handle,
                               default_model.default_preprocess_handle):
          with self.assertRaisesRegex(
              errors.UsageError, rf"^The model cache \(KERAS_ADAPTERS_CACHE={cache}\) "
              f"{problem}: the default base model is converted into it on first use. Set "
              "KERAS_ADAPTERS_CACHE to a folder you can write to"):
            default_handle()

  def test_a_package_missing_from_a_moved_cache_names_the_cache(self):
    cache = self.create_tempdir().full_path
    with mock.patch.dict(os.environ, KERAS_ADAPTERS_CACHE=cache):
      with self.assertRaisesRegex(FileNotFoundError, "^The default base model is not installed "
                                  f"in KERAS_ADAPTERS_CACHE={cache}. Install it with:"):
        default_model.source_model_dir()

  def test_the_cli_accepts_the_adapter_init_stddev_the_library_accepts(self):
    """0 makes every adapter an exact identity (README, `AdapterConfig`); the flag takes it,
    and refuses what `AdapterConfig` refuses, named as the flag."""
    with flagsaver.flagsaver():
      FLAGS(["run_classification", "--hub_handle=h", "--preprocess_handle=p",
             "--adapter_init_stddev=0"])
      self.assertEqual(common_flags.run_config_from_flags().model.adapter.init_stddev, 0.0)
      FLAGS(["run_classification", "--hub_handle=h", "--preprocess_handle=p",
             "--adapter_init_stddev=-0.5"])
      with self.assertRaises(ValueError) as raised:
        common_flags.run_config_from_flags()
    with self.assertRaisesRegex(ValueError, "init_stddev must be a finite number >= 0"):
      adapter_config.AdapterConfig(init_stddev=-0.5)
    self.assertEqual(cli.flag_message(str(raised.exception)),
                     "--adapter_init_stddev=-0.5: init_stddev must be a finite number >= 0 "
                     "(0: identity adapters), got -0.5.")
    with self.assertRaisesRegex(ValueError, r"^adapter_init_stddev=nan: init_stddev must be a "
                                            r"finite number >= 0 \(0: identity adapters\), "
                                            r"got nan\.$"):
      testing.run_config(adapter_init_stddev=float("nan"))

  def test_library_arguments_are_shown_as_typed_flags(self):
    with flagsaver.flagsaver():
      FLAGS(["run_classification"])
      self.assertEqual(
          cli.flag_message('Pass encoding="latin-1", or encoding=("utf-8", "latin-1"); or '
                           "drop_empty=True; not drop_empty=False; max_seq_length=600 is too "
                           "long; label_names=None; epochs=1.0 there, epochs=2.0 now; a new "
                           "model_dir=<folder> (a rerun)."),
          'Pass --encoding="latin-1", or --encoding=utf-8,latin-1; or --drop_empty; not '
          "--nodrop_empty; --max_seq_length=600 is too long; label_names=None; --epochs=1.0 "
          "there, --epochs=2.0 now; a new --model_dir=<folder> (a rerun).")

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

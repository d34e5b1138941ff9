"""A bug ends a CLI with one line, "this is a bug" and status 1; data as users export it (no
header, the same column for texts and labels) and an unwritable model cache are usage errors
(status 2) in one line naming the cause and the fix; the exit status of each kind of error.

The scripts run in subprocesses, as a user runs them, on the tiny random encoder and a small
CSV file. The other CLI errors (a bad flag of every script, a run that diverges, `--verbose`,
a rerun with another task's data) are replayed, each checked for its status and its one line,
by tests/bad_inputs_test.py; their in-process refusals are `rerun_settings_test`'s and
`user_mistakes_test`'s.
"""

import concurrent.futures
import os
import shutil
import subprocess
import sys
import textwrap

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from experiments import cli
from keras_adapters.hub import testing as hub_testing
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import text_classification
from keras_adapters.tasks import testing
from keras_adapters.utils import errors
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Scripts whose main fails inside a library (numpy) or Python, as a bug of this project would.
_BUGGY_SCRIPT = ("from experiments import cli; import numpy as np\n"
                 "cli.run(lambda argv: np.zeros(2).reshape(3))")
_SILENT_BUG_SCRIPT = "from experiments import cli\ncli.run(lambda argv: next(iter(())))"


def _run(script, *args, **env_overrides):
  # As a user's shell runs it: without the test process's TensorFlow log level.
  env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
  env.update(env_overrides)
  command = (warm_python.command(os.path.join("experiments", script)) if script.endswith(".py")
             else [sys.executable, "-c", script])
  return subprocess.run([*command, *args], cwd=_REPO_ROOT, capture_output=True, text=True,
                        check=False, env=env)


class CliErrorsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "cli_errors_test")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    encoder = hub_testing.tiny_hub_handle()
    preprocess = hub_testing.tiny_preprocess_handle(testing.SEQ_LENGTH)
    reviews = testing.write_csv(os.path.join(root, "reviews.csv"))
    headerless = os.path.join(root, "headerless.csv")
    with open(reviews, encoding="utf-8") as source, open(headerless, "w",
                                                         encoding="utf-8") as target:
      target.write("".join(source.readlines()[1:]))
    model_flags = [f"--hub_handle={encoder}", f"--preprocess_handle={preprocess}",
                   f"--max_seq_length={testing.SEQ_LENGTH}", "--adapter_size=4", "--epochs=1",
                   "--batch_size=8", "--max_train_examples=0"]

    def classify(name, data_path, *args):
      return _run("run_classification.py", f"--data_path={data_path}", "--text_column=review",
                  "--label_column=sentiment", f"--model_dir={os.path.join(root, name)}",
                  f"--split_manifest={os.path.join(root, name + '_split.json')}",
                  *model_flags, *args)

    commands = dict(
        headerless=lambda: classify("headerless", headerless),
        same_columns=lambda: classify("same_columns", reviews, "--text_column=sentiment"),
        unwritable_cache=lambda: _run("run_classification.py",
                                      KERAS_ADAPTERS_CACHE="/sys/kernel/keras_adapters"),
        bug=lambda: _run(_BUGGY_SCRIPT),
        silent_bug=lambda: _run(_SILENT_BUG_SCRIPT))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      futures = {name: pool.submit(command) for name, command in commands.items()}
    cls.results = {name: future.result() for name, future in futures.items()}

  def assertOneLineError(self, process, status, line):
    self.assertEqual(process.returncode, status, process.stderr[-3000:])
    self.assertEqual(process.stderr.strip().splitlines(), [line])

  def test_an_unusable_model_cache_names_the_variable_and_the_fix(self):
    self.assertOneLineError(self.results["unwritable_cache"], 2,
                            "run_classification.py: error: The model cache "
                            "(KERAS_ADAPTERS_CACHE=/sys/kernel/keras_adapters) cannot be created "
                            "or written to: the default base model is converted into it on first "
                            "use. Set KERAS_ADAPTERS_CACHE to a folder you can write to (the "
                            "README's set-up commands install the model's package there).")

  def test_data_as_users_export_it_is_a_usage_error_naming_the_fix(self):
    headerless = os.path.join(self.root, "headerless.csv")
    self.assertOneLineError(self.results["headerless"], 2,
                            f"run_classification.py: error: {headerless} has no header row: its "
                            "first line looks like data ('bad' is also a value of that column "
                            "in later rows). Add a first line naming the columns, e.g. "
                            "'review,sentiment' (--text_column='review', "
                            "--label_column='sentiment').")
    self.assertOneLineError(self.results["same_columns"], 2,
                            "run_classification.py: error: --text_column='sentiment' and "
                            "--label_column='sentiment' name the same column: a model would "
                            "learn each label from itself. Pass the column holding the texts as "
                            "--text_column= and the one holding the classes as --label_column=.")

  def test_a_bug_says_so_with_status_1_and_never_an_empty_error(self):
    hint = ("This is a bug, not a mistake in what you gave: rerun with --verbose and report "
            "the traceback.")
    for name, message in (
        ("bug", "ValueError: cannot reshape array of size 2 into shape (3,)"),
        # An exception without a message is named by its type.
        ("silent_bug", "StopIteration")):
      process = self.results[name]
      self.assertEqual(process.returncode, 1, process.stderr[-3000:])
      self.assertEqual(process.stderr.strip().splitlines(), [f"-c: error: {message}", hint])


class LogLinesTest(tf.test.TestCase):

  def test_a_run_shows_its_own_log_lines_and_only_the_errors_of_other_code(self):
    """A script's own INFO lines (and the package's) show, plainly; another folder's show
    only from ERROR on."""
    script, elsewhere = self.create_tempdir(), self.create_tempdir()
    elsewhere.create_file("other_code.py", textwrap.dedent("""\
        from absl import logging
        def log():
          logging.info("their info")
          logging.error("their error")
        """))
    path = script.create_file("script.py", textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {elsewhere.full_path!r})
        from absl import logging
        from experiments import cli
        import other_code
        def main(argv):
          logging.info("our info")
          other_code.log()
        cli.run(main)
        """)).full_path
    process = subprocess.run(warm_python.command(path), cwd=_REPO_ROOT, capture_output=True,
                             text=True, check=False,
                             env=dict(os.environ, PYTHONPATH=_REPO_ROOT))
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])
    lines = process.stderr.splitlines()
    self.assertIn("our info", lines)
    self.assertIn("their error", lines)
    self.assertNotIn("their info", process.stderr)


def _raised(function):
  try:
    function()
  except Exception as error:  # pylint: disable=broad-except
    return error
  raise AssertionError("nothing raised")


class ErrorKindTest(parameterized.TestCase):
  """Exit statuses by who can fix the error, in-process."""

  def test_a_check_in_the_script_s_own_folder_is_ours_for_its_run_only(self):
    """A `raise` in a module beside the script (bench/'s harness) wrote its message for the
    user in that script's run; elsewhere the file is not this project's."""
    folder = self.create_tempdir()
    folder.create_file("beside_script.py", "def check():\n  raise ValueError('bad')\n")
    sys.path.insert(0, folder.full_path)
    self.addCleanup(sys.path.remove, folder.full_path)
    import beside_script  # pylint: disable=g-import-not-at-top,import-error
    self.addCleanup(sys.modules.pop, "beside_script")
    error = _raised(beside_script.check)
    self.assertEqual(cli.error_kind(error, cli.project_roots(beside_script.check)), (2, None))
    self.assertEqual(cli.error_kind(error)[0], 1)
    self.assertIn("a bug", cli.error_kind(error)[1])

  @parameterized.named_parameters(
      ("library_usage_error", lambda: errors.UsageError("x"), 2, None),
      ("library_data_error", lambda: errors.DataError("x"), 2, None),
      ("missing_file", lambda: FileNotFoundError("x"), 2, None),
      ("failed_run", lambda: errors.RunFailedError("x"), 1, "Rerun with --verbose"),
      ("disk_error", lambda: OSError(28, "No space left on device"), 1, "Rerun with --verbose"),
      # What tf.io.gfile raises for a folder on GCS.
      ("bucket_not_writable",
       lambda: tf.errors.PermissionDeniedError(None, None, "gs://b/run: 403"), 2, None),
      ("storage_unreachable",
       lambda: tf.errors.UnavailableError(None, None, "gs://b/run: 503"), 1,
       "Rerun with --verbose"),
      # A check of this project that still raises a built-in type.
      ("a_check_of_ours",
       lambda: _raised(lambda: testing.run_config(hub_handle="hub", preprocess_handle="p",
                                                  epochs=float("nan"))), 2, None),
      ("raised_inside_numpy", lambda: _raised(lambda: np.zeros(2).reshape(3)), 1, "a bug"),
      ("operation_of_ours", lambda: _raised(lambda: text_classification.select_examples(
          examples_lib.TextExamples(["a"], (["x"],)), [5])), 1, "a bug"),
  )
  def test_status_and_hint(self, make_error, status, hint):
    got_status, got_hint = cli.error_kind(make_error())
    self.assertEqual(got_status, status)
    if hint is None:
      self.assertIsNone(got_hint)
    else:
      self.assertIn(hint, got_hint)


if __name__ == "__main__":
  tf.test.main()

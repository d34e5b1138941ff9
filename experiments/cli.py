"""What every experiment script shares around its `main`: quiet logs and one-line errors.

Import this module before TensorFlow loads. `run(main)` replaces `absl.app.run(main)`:

* TensorFlow's start-up lines and its INFO and WARNING logs (SavedModel internals, "untraced
  functions", fingerprints) are hidden, so that a run shows its own progress, log lines and
  results;
* an error in the user's hands (a bad value, a missing file, no TPU) ends the script with one
  line, `script.py: error: <message>`, and exit status 2; a run that fails (training
  diverged, a disk error) ends the same way with status 1. The library names its arguments
  (`strategy='tpu'`); the message names the script's flags instead (`--strategy='tpu'`);
* `--verbose` shows all of TensorFlow's logs and the traceback, for bug reports.
"""

import logging
import os
import re
import sys

if "--verbose" not in sys.argv:
  # Before TensorFlow loads: its C++ start-up lines (CUDA probing on a machine without GPUs,
  # CPU features) say nothing a user acts on.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging as absl_logging

flags.DEFINE_bool("verbose", False,
                  "Show TensorFlow's logs and the full traceback of an error (for bug reports).")

FLAGS = flags.FLAGS

# Errors that a different argument fixes: bad usage.
_USAGE_ERRORS = (app.UsageError, ValueError, TypeError, FileNotFoundError, FileExistsError,
                 NotADirectoryError, IsADirectoryError)
# Where this project's code lives: its log lines are shown.
_OUR_ROOTS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (
    __file__, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras_adapters",
                           "__init__.py")))
USAGE_EXIT_STATUS = 2
FAILURE_EXIT_STATUS = 1


def run(main):
  """Runs `main(argv)` like `absl.app.run`, with quiet logs and one-line errors."""
  app.run(lambda argv: _run_main(main, argv))


def _run_main(main, argv):
  if not FLAGS.verbose:
    _show_only_our_logs()
  try:
    return main(argv)
  except Exception as error:  # pylint: disable=broad-except
    if FLAGS.verbose:
      raise
    status = USAGE_EXIT_STATUS if isinstance(error, _USAGE_ERRORS) else FAILURE_EXIT_STATUS
    print(f"{os.path.basename(sys.argv[0])}: error: {flag_message(str(error))}",
          file=sys.stderr)
    if status == FAILURE_EXIT_STATUS:
      print("Rerun with --verbose for the traceback.", file=sys.stderr)
    sys.exit(status)


def _show_only_our_logs():
  """Shows this project's log lines, plainly, and only the errors of everything else.

  TensorFlow, Keras and the Model Garden log SavedModel internals and settings at INFO and
  WARNING, through absl and the "tensorflow" logger; an explicit --verbosity still applies.
  """
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  if not FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.INFO)
  handler = absl_logging.get_absl_handler()
  handler.setFormatter(logging.Formatter("%(message)s"))
  handler.addFilter(lambda record: record.levelno >= logging.ERROR or any(
      record.pathname.startswith(root) for root in _OUR_ROOTS))


def flag_message(message: str) -> str:
  """`message` with each library argument that is also a flag written as the flag.

  `strategy='tpu'` becomes `--strategy='tpu'`; names that are not flags stay as they are.
  """
  names = "|".join(sorted((re.escape(name) for name in FLAGS), key=len, reverse=True))
  return re.sub(rf"(?<![\w.-])({names})=", r"--\1=", message)

"""What every experiment script shares around its `main`: quiet logs and one-line errors.

Import this module before TensorFlow loads. `run(main)` replaces `absl.app.run(main)`:

* TensorFlow's start-up lines and its INFO and WARNING logs (SavedModel internals, "untraced
  functions", fingerprints) are hidden, so that a run shows its own progress, log lines and
  results;
* an error in the user's hands (a flag absl cannot parse, a bad value, a missing file, a
  folder that cannot be written, no TPU) ends the script with one line,
  `script.py: error: <message>`, and exit status 2; a run that fails (training diverged, a
  disk error) ends the same way with status 1. The library names its arguments
  (`strategy='tpu'`, `drop_empty=True`, `encoding=("utf-8", "latin-1")`); the message names
  the script's flags instead, as they are typed (`--strategy='tpu'`, `--drop_empty`,
  `--encoding=utf-8,latin-1`);
* `--verbose` shows all of TensorFlow's logs and the traceback, for bug reports.
"""

import ast
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
_USAGE_ERRORS = (app.UsageError, flags.Error, ValueError, TypeError, FileNotFoundError,
                 FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)
# Where this project's code lives: its log lines are shown.
_OUR_ROOTS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (
    __file__, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras_adapters",
                           "__init__.py")))
USAGE_EXIT_STATUS = 2
FAILURE_EXIT_STATUS = 1


def run(main):
  """Runs `main(argv)` like `absl.app.run`, with quiet logs and one-line errors."""
  app.run(lambda argv: _run_main(main, argv), flags_parser=_parse_flags)


def _parse_flags(argv):
  """Parses the flags; a value absl refuses is one line and status 2, like any bad usage."""
  try:
    return FLAGS(argv)
  except flags.Error as error:
    # "flag --seeds=['abc']: ..." as "--seeds=abc: ...": the value as it was typed.
    message = re.sub(r"^flag (--\w+=)(\[[^\]]*\])?",
                     lambda m: m[1] + (",".join(ast.literal_eval(m[2])) if m[2] else ""),
                     str(error))
    _exit(message, USAGE_EXIT_STATUS)


def _run_main(main, argv):
  if not FLAGS.verbose:
    _show_only_our_logs()
  try:
    return main(argv)
  except Exception as error:  # pylint: disable=broad-except
    if FLAGS.verbose:
      raise
    _exit(error, USAGE_EXIT_STATUS if isinstance(error, _USAGE_ERRORS) else FAILURE_EXIT_STATUS)


def _exit(error, status):
  # One line: a multi-line message (absl's flag errors list choices) is joined.
  message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
  print(f"{os.path.basename(sys.argv[0])}: error: {flag_message(message)}", file=sys.stderr)
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


# A Python literal after `argument=` that is written differently as a flag value.
_LITERAL = r"True|False|\([^()]*\)|\[[^\[\]]*\]"


def flag_message(message: str) -> str:
  """`message` with each library argument that is also a flag written as the flag.

  `strategy='tpu'` becomes `--strategy='tpu'`, `drop_empty=True` `--drop_empty`,
  `encoding=("utf-8", "latin-1")` `--encoding=utf-8,latin-1`; names that are not flags stay
  as they are.
  """
  names = "|".join(sorted((re.escape(name) for name in FLAGS), key=len, reverse=True))
  return re.sub(rf"(?<![\w.-])({names})=({_LITERAL})?", _as_flag, message)


def _as_flag(match):
  name, literal = match.group(1), match.group(2)
  if literal is None:
    return f"--{name}="
  try:
    value = ast.literal_eval(literal)
  except (ValueError, SyntaxError):  # Parentheses around prose, not a tuple.
    value = None
  if isinstance(value, bool):
    return f"--{name}" if value else f"--no{name}"
  if isinstance(value, (tuple, list)) and all(isinstance(item, (str, int, float))
                                              for item in value):
    return f"--{name}=" + ",".join(str(item) for item in value)
  return f"--{name}={literal}"

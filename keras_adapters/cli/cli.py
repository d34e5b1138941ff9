"""What every experiment script shares around its `main`: quiet logs and one-line errors.

Import this module before TensorFlow loads. `run(main)` replaces `absl.app.run(main)`:

* TensorFlow's start-up lines and its INFO and WARNING logs (SavedModel internals, "untraced
  functions", fingerprints) are hidden, so that a run shows its own progress, log lines and
  results;
* an error in the user's hands (a flag absl cannot parse, a bad value, a missing file, a
  config file that is not YAML, a bad TF_CONFIG, a URL TensorFlow cannot read, a folder that
  cannot be written, no TPU: the library's `errors.UsageError`) ends the script with one
  line, `script.py: error: <message>`, and exit status 2; a run that fails (training
  diverged, a disk error, Cloud Storage that cannot be reached: `errors.RunFailedError`,
  `OSError`) ends the same way, then a line pointing to `--verbose`, with status 1; anything
  else is a bug in this project, said so, with status 1. The line starts on a line of its
  own even over a progress bar. Before `main` runs, every output folder flag
  (`OUTPUT_DIR_FLAGS`) that cannot be used is refused, and a leading `~` of a flag's path is
  expanded, as a shell does. The library names its arguments (`strategy='tpu'`,
  `drop_empty=True`, `encoding=("utf-8", "latin-1")`); the message names the script's flags
  instead, as they are typed (`--strategy='tpu'`, `--drop_empty`,
  `--encoding=utf-8,latin-1`);
* `--verbose` shows all of TensorFlow's logs and the traceback, for bug reports.
"""

import ast
import dis
import logging
import os
import re
import sys

from keras_adapters.utils import startup_environment

# Before TensorFlow loads: its quiet log level (unless --verbose) and Keras 3's --backend.
os.environ.update(startup_environment.set_before_tensorflow(sys.argv, os.environ))

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging as absl_logging

from keras_adapters.cli import interruption
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems
import tensorflow as tf  # pylint: disable=g-bad-import-order

flags.DEFINE_bool("verbose", False,
                  "Show TensorFlow's logs and the full traceback of an error (for bug reports).")

FLAGS = flags.FLAGS

# Errors that a different argument, flag, path or file fixes: bad usage. Files go through
# `tf.io.gfile` (any file system, `gs://` too), which raises TensorFlow's errors, not OSError.
_USAGE_ERRORS = (errors.UsageError, app.UsageError, flags.Error, FileNotFoundError,
                 FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError,
                 tf.errors.PermissionDeniedError)
# A run that failed with valid settings: a disk or network error, no memory left.
_RUN_FAILURES = (errors.RunFailedError, OSError, MemoryError, tf.errors.UnavailableError,
                 tf.errors.DeadlineExceededError, tf.errors.DataLossError)
# Where this project's code lives: the package these command lines are part of (and, for a
# run, the folder of its script: `project_roots`).
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
USAGE_EXIT_STATUS = 2
FAILURE_EXIT_STATUS = 1
_VERBOSE_HINT = "Rerun with --verbose for the traceback."
_BUG_HINT = ("This is a bug, not a mistake in what you gave: rerun with --verbose and report "
             "the traceback.")

def run(main):
  """Runs `main(argv)` like `absl.app.run`, with quiet logs and one-line errors."""
  _help_from(sys.modules[main.__module__])
  sys.stdout = LineTracker(sys.stdout)
  roots = project_roots(main)
  app.run(lambda argv: _run_main(main, argv, roots), flags_parser=_parse_flags)


def project_roots(main):
  """The folders of this project's code for a run of `main`: the package's, and that of
  `main`'s file (bench/'s, beside its modules). Their log lines are shown, and a `raise` in
  them is a message for the user."""
  path = getattr(sys.modules[main.__module__], "__file__", None)
  return (_PACKAGE_ROOT,) + ((os.path.dirname(os.path.abspath(path)) + os.sep,) if path else ())


def _help_from(module):
  """Makes `--help` describe `module` when the program started elsewhere: a console script
  (`keras-adapters-glue`) or a repository wrapper (`experiments/run_glue.py`) that imports it.

  absl's `--help` prints the docstring of `__main__` and the flags defined by the file named
  `sys.argv[0]`: here, those of `module`.
  """
  main_module = sys.modules["__main__"]
  if module is main_module:
    return
  main_module.__doc__ = module.__doc__
  for flag in FLAGS.get_key_flags_for_module(module):
    FLAGS.register_key_flag_for_module(sys.argv[0], flag)


class LineTracker:
  """A text stream that remembers whether its last line is unfinished: a Keras progress bar
  (`0/1 [....] - ETA: 0s`) rewrites its line with `\\r` and ends it only when done, and an
  error printed then must start on a line of its own."""

  def __init__(self, stream):
    self._stream = stream
    self.line_open = False

  def write(self, text):
    if text:
      self.line_open = not text.endswith("\n")
    return self._stream.write(text)

  def end_line(self):
    """Ends an unfinished line (a progress bar's) with a newline."""
    if self.line_open:
      self.write("\n")
    self.flush()

  def __getattr__(self, name):
    return getattr(self._stream, name)


# The flags of the scripts that name a folder they write to: refused before any work when
# unusable (a file, inside a file, not writable, a URL TensorFlow cannot read or reach).
OUTPUT_DIR_FLAGS = ("model_dir", "results_dir", "export_dir", "feature_cache_dir", "glue_dir",
                    "to_artifact", "to_adapterhub")


def _parse_flags(argv):
  """Parses the flags; a value absl refuses is one line and status 2, like any bad usage."""
  try:
    remaining = FLAGS(argv)
    expand_home()
    return remaining
  except flags.Error as error:
    # "flag --seeds=['abc']: ..." as "--seeds=abc: ...": the value as it was typed.
    message = re.sub(r"^flag (--\w+=)(\[[^\]]*\])?",
                     lambda m: m[1] + (",".join(ast.literal_eval(m[2])) if m[2] else ""),
                     _one_line(error))
    _exit(message, USAGE_EXIT_STATUS)


def check_arguments(argv):
  """Refuses what is left on the command line after the flags, for a script takes none, and
  an output folder flag that cannot be used (see `OUTPUT_DIR_FLAGS`)."""
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for name in OUTPUT_DIR_FLAGS:
    if name in FLAGS and isinstance(FLAGS[name].value, str) and FLAGS[name].value:
      atomic_io.check_output_dir(FLAGS[name].value, name)


# `~/...` or `~user/...`: a path in a home folder (not a lone `~`, a delimiter's value); in a
# list, also after `name=` (`--tasks=reviews=~/runs/reviews`).
_HOME = re.compile(r"^~[\w.-]*/")
_HOME_IN_PAIR = re.compile(r"^(\w+=)?(~[\w.-]*/)")


def expand_home(flag_values=FLAGS):
  """Expands a leading `~` in every string flag given, as a shell does: the shell leaves the
  `~` of `--model_dir=~/runs` as it is, and a folder named `~` would be made."""
  for name in flag_values:
    flag = flag_values[name]
    if not flag.present or flag.value is None:
      continue
    if isinstance(flag.value, str) and _HOME.match(flag.value):
      flag.value = os.path.expanduser(flag.value)
    elif isinstance(flag.value, list) and any(
        isinstance(item, str) and _HOME_IN_PAIR.match(item) for item in flag.value):
      flag.value = [
          _HOME_IN_PAIR.sub(lambda m: (m[1] or "") + os.path.expanduser(m[2]), item)
          if isinstance(item, str) else item for item in flag.value]


def _run_main(main, argv, roots):
  if not FLAGS.verbose:
    _show_only_our_logs(roots)
  try:
    check_arguments(argv)
    return interruption.call(main, argv)  # Ctrl-C and SIGTERM: one line, no traceback.
  except Exception as error:  # pylint: disable=broad-except
    if FLAGS.verbose:
      raise
    status, lines = error_report(error, roots)
    _exit(lines[0], status, *lines[1:])


def error_report(error, roots=(_PACKAGE_ROOT,)):
  """The exit status of `error` and the lines `script.py: error: ` leads: its message on one
  line (library arguments written as flags), then the hint, if any; `roots` as
  `error_kind`'s."""
  status, hint = error_kind(error, roots)
  message = flag_message(_one_line(error, with_type=hint == _BUG_HINT))
  return status, [message] + ([hint] if hint else [])


def error_kind(error, roots=(_PACKAGE_ROOT,)):
  """The exit status of `error` and the line, if any, to print after its message; a `raise`
  in the files under `roots` (`project_roots`) wrote a message for the user."""
  if isinstance(error, _USAGE_ERRORS):
    return USAGE_EXIT_STATUS, None
  if isinstance(error, _RUN_FAILURES):
    return FAILURE_EXIT_STATUS, _VERBOSE_HINT
  # A path the library did not check first (`file_systems.reaching`): a URL TensorFlow has no
  # file system for is the user's to change; storage it cannot reach, the machine's.
  if isinstance(error, tf.errors.OpError) and file_systems.translated(error, "gs://",
                                                                        "path") is not None:
    return ((USAGE_EXIT_STATUS, None) if isinstance(error, tf.errors.UnimplementedError)
            else (FAILURE_EXIT_STATUS, _VERBOSE_HINT))
  if _raised_by_this_project(error, roots):
    # A message written here for the user, raised as a built-in type that says less
    # (`ValueError` for a bad argument, `RuntimeError` for a failed run).
    if isinstance(error, ValueError):
      return USAGE_EXIT_STATUS, None
    return FAILURE_EXIT_STATUS, _VERBOSE_HINT
  # Raised inside TensorFlow, Keras, numpy or Python, or by an operation of this project's
  # code rather than a `raise` statement: nothing tells the user what to change.
  return FAILURE_EXIT_STATUS, _BUG_HINT


def _raised_by_this_project(error, roots):
  """Whether a `raise` statement in this project's code (under `roots`) raised `error`."""
  traceback = error.__traceback__
  if traceback is None:
    return False
  while traceback.tb_next is not None:
    traceback = traceback.tb_next
  code = traceback.tb_frame.f_code
  # The instruction that raised, not the source line: the file may have changed since.
  return (os.path.abspath(code.co_filename).startswith(roots) and any(
      instruction.offset == traceback.tb_lasti and instruction.opname == "RAISE_VARARGS"
      for instruction in dis.get_instructions(code)))


def _one_line(error, with_type=False):
  """The message of `error` on one line (absl's flag errors list choices on several), led by
  its type where asked or where it has no message: never an empty `error:`."""
  message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
  if with_type or not message:
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
  return message


def _exit(message, status, hint=None):
  if isinstance(sys.stdout, LineTracker):
    sys.stdout.end_line()  # A progress bar on screen: the error starts on a new line.
  print(f"{os.path.basename(sys.argv[0])}: error: {flag_message(message)}", file=sys.stderr)
  if hint:
    print(hint, file=sys.stderr)
  sys.exit(status)


def _show_only_our_logs(roots):
  """Shows this project's log lines, plainly, and only the errors of everything else.

  TensorFlow, Keras and the Model Garden log SavedModel internals and settings at INFO and
  WARNING, through absl and the "tensorflow" logger; an explicit --verbosity still applies.
  """
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  if not FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.INFO)
  handler = absl_logging.get_absl_handler()
  handler.setFormatter(logging.Formatter("%(message)s"))
  handler.addFilter(lambda record: record.levelno >= logging.ERROR
                    or record.pathname.startswith(roots))


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

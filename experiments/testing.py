"""What the command-line tests share: a tiny two-class CSV in the tiny encoder's words, and a
CLI's `main` run in-process on a real command line."""

import contextlib
import io

from absl import flags
from absl.testing import flagsaver
import numpy as np

from experiments import cli
from keras_adapters.hub import testing


def write_two_class_csv(path, count=24):
  """Writes `count` rows of `text,label`: class `a` in the first 20 tiny words, class `b` in
  the next 20 (all in the SentencePiece test model too); returns `path`."""
  rng = np.random.default_rng(0)
  with open(path, "w", encoding="utf-8") as f:
    f.write("text,label\n")
    for i in range(count):
      words = testing.TINY_WORDS[(i % 2) * 20:(i % 2) * 20 + 20]
      f.write(f"{' '.join(rng.choice(words, size=3))},{'ab'[i % 2]}\n")
  return path


def run_main(main, argv):
  """Parses `argv` as the command line (flags restored afterwards) and runs `main` on what
  remains, as `cli.run` does; returns what it printed."""
  printed = io.StringIO()
  with flagsaver.flagsaver():
    remaining = flags.FLAGS(argv)
    cli.expand_home()
    cli.check_arguments(remaining)
    with contextlib.redirect_stdout(printed):
      main(remaining)
  return printed.getvalue()


def cli_error(main, argv):
  """Runs `main` on the command line `argv` as `cli.run` does, in-process (flags restored
  afterwards), and returns its exit status and the lines it would print after
  `script.py: error: ` (the message, then any hint); `(0, [])` when it succeeds."""
  try:
    run_main(main, argv)
  except Exception as error:  # pylint: disable=broad-except
    return cli.error_report(error, cli.project_roots(main))
  return 0, []


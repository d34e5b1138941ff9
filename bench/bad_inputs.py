r"""Replays the bad inputs and faults of tests/bad_input_cases.py; prints a table of verdicts.

The cases, and what each must end in (a clear error or the correct result), live in
`tests/bad_input_cases.py`, which `tests/bad_inputs_test.py` runs as tests of their own; this
runs the same cases in one process and records the verdicts with their counts per class.

  python bench/bad_inputs.py

writes bench/results/bad_inputs.json and exits with status 1 if a verdict is `WRONG`. This is
no timing benchmark: it may run on a busy machine.
"""

import os
import sys

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
import logging as std_logging
import platform
import shutil
import tempfile
import time

from absl import flags
from absl import logging
import tensorflow as tf

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
import bad_input_cases  # The cases: tests/bad_input_cases.py.

flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "bad_inputs.json"),
                    "Where to write the verdicts (JSON).")
flags.DEFINE_integer("cli_processes", 2, "CLI cases run at once.", lower_bound=1)


def main(argv):
  del argv
  start = time.perf_counter()
  # The table is the output: TensorFlow's and the library's own log lines are not.
  logging.set_verbosity(logging.ERROR)
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  root = tempfile.mkdtemp(prefix="bad_inputs_")
  try:
    rows = bad_input_cases.replay(bad_input_cases.cases(), bad_input_cases.Workspace(root),
                                  flags.FLAGS.cli_processes)
  finally:
    shutil.rmtree(root, ignore_errors=True)
  print(bad_input_cases.markdown_table(rows))
  harness.write_record(flags.FLAGS.output, dict(
      machine=dict(platform=platform.platform(), python=platform.python_version(),
                   tensorflow=tf.__version__),
      command="python bench/bad_inputs.py",
      seconds=round(time.perf_counter() - start, 1), counts=bad_input_cases.counts(rows),
      cases=rows))
  print(f"Written: {flags.FLAGS.output}")
  if any(row["verdict"] == bad_input_cases.WRONG for row in rows):
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)

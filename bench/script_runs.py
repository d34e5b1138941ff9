"""How the benchmarks' fast tests run a script: as a user runs it, then its record read back.

Each script's fast test runs the script whole on the tiny test encoders (forked from the warm
Python when one runs, `keras_adapters.utils.warm_python`) and checks what it recorded, or that
a bad flag is refused in one line, with nothing written.
"""

import json
import os
import subprocess

from keras_adapters.utils import warm_python

_BENCH = os.path.dirname(os.path.abspath(__file__))


def run(script, *flags):
  """`python bench/<script> *flags`, its output captured."""
  return subprocess.run(warm_python.command(os.path.join(_BENCH, script), *flags),
                        capture_output=True, text=True, check=False)


def record(script, output, *flags):
  """`(record, process)` of a run of `script` that writes its record to `output` (a path);
  fails with the end of its standard error unless the run succeeds."""
  process = run(script, *flags, f"--output={output}")
  assert process.returncode == 0, process.stderr[-4000:]
  return json.loads(output.read_text()), process


def assert_refused_in_one_line(script, message, output, *flags):
  """A run of `script` with `flags` fails with `message`, no traceback, and no `output`."""
  process = run(script, *flags, f"--output={output}")
  assert process.returncode != 0
  assert message in process.stderr, process.stderr[-4000:]
  assert "Traceback" not in process.stderr
  assert not output.exists()

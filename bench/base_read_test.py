"""A fast run of bench/base_read.py on a tiny export: what it records, not how fast."""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "base_read.py")


def test_times_both_reads_in_turns_and_checks_they_read_the_same_base(tmp_path):
  output = tmp_path / "base_read.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--rounds=2",
                          f"--output={output}"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  record = json.loads(output.read_text())
  assert record["provenance"]["command"]
  assert record["same_read"] is True
  timings = record["timings"]
  assert set(timings) == {"proven", "remembered"}
  assert all(len(t["times_ms"]) == 2 and t["median_ms"] > 0 for t in timings.values())
  assert record["remembered_over_proven"] == (timings["remembered"]["median_ms"] /
                                              timings["proven"]["median_ms"])
  assert "remembered / proven: " in process.stdout and "| proven |" in process.stdout

"""Tests for bench/process_memory.py: the memory guard stops a process and says so."""

import json
import os
import subprocess
import sys

_BENCH = os.path.dirname(os.path.abspath(__file__))


def _run(limit_mib, allocate_mib):
  """A fresh Python that starts the guard at its resident memory plus `limit_mib`, then
  allocates `allocate_mib`, waits, and prints "finished"."""
  program = (
      "import time, process_memory\n"
      f"process_memory.guard(process_memory.resident_mib() + {limit_mib}, where='test')\n"
      f"block = bytearray({allocate_mib} * 2**20)\n"
      "time.sleep(0.5)\n"
      "print('finished')\n")
  return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                        check=True, cwd=_BENCH).stdout.strip().splitlines()


def test_a_process_past_the_limit_is_stopped_with_a_line_saying_how_far_it_got():
  (line,) = _run(limit_mib=50, allocate_mib=300)
  report = json.loads(line)
  assert report["out_of_memory"] and report["where"] == "test"
  assert report["resident_mb"] > report["limit_mb"]


def test_a_process_under_the_limit_runs_to_its_end():
  assert _run(limit_mib=1000, allocate_mib=100) == ["finished"]


def test_memory_readings():
  sys.path.insert(0, _BENCH)
  import process_memory  # pylint: disable=g-import-not-at-top
  assert 0 < process_memory.resident_mib() <= process_memory.peak_rss_mib()
  assert process_memory.machine_mib() > process_memory.resident_mib()

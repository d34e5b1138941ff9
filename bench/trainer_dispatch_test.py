"""Fast test of bench/trainer_dispatch.py on the tiny test encoder: no timing, only what it
runs, compares and records."""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.utils import provenance
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainer_dispatch.py")


def test_tiny_run_records_both_loops_and_their_ratio(tmp_path):
  output = tmp_path / "dispatch.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--steps=2",
       "--warmup_steps=1", "--rounds=1", "--log_every_steps=1", f"--output={output}"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  (measured,) = record["rounds"]
  assert record["trainer_steps_per_sec"] == measured["trainer_steps_per_sec"] > 0
  assert record["bare_loop_steps_per_sec"] == measured["bare_loop_steps_per_sec"] > 0
  ratio = record["trainer_over_bare_loop"]
  assert ratio["value"] == (record["trainer_steps_per_sec"] /
                            record["bare_loop_steps_per_sec"])
  assert ratio["met"] == (ratio["value"] >= ratio["at_least"] == 0.9)
  assert record["settings"]["log_every_steps"] == 1
  assert record["machine"]["kernels"]["chosen_by"]
  assert provenance.KEY in record
  assert "Trainer / bare loop:" in process.stdout


def test_steps_off_the_log_interval_are_refused_in_one_line(tmp_path):
  process = subprocess.run(warm_python.command(_SCRIPT, "--steps=150", "--log_every_steps=100",
                            f"--output={tmp_path / 'x.json'}"),
                           capture_output=True, text=True, check=False)
  assert process.returncode != 0
  assert ("--steps=150 is not a multiple of --log_every_steps=100: the Trainer is timed by "
          "its logs, so make it one.") in process.stderr
  assert "Traceback" not in process.stderr
  assert not (tmp_path / "x.json").exists()

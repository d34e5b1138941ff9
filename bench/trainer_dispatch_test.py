"""Fast test of bench/trainer_dispatch.py on the tiny test encoder: no timing, only what it
runs, compares and records."""

import script_runs
from keras_adapters.hub import testing
from keras_adapters.utils import provenance

_SCRIPT = "trainer_dispatch.py"


def test_tiny_run_records_both_loops_and_their_ratio(tmp_path):
  record, process = script_runs.record(
      _SCRIPT, tmp_path / "dispatch.json", f"--hub_handle={testing.tiny_hub_handle()}",
      "--steps=2", "--warmup_steps=1", "--rounds=1", "--log_every_steps=1")
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
  script_runs.assert_refused_in_one_line(
      _SCRIPT, "--steps=150 is not a multiple of --log_every_steps=100: the Trainer is timed by "
      "its logs, so make it one.", tmp_path / "x.json", "--steps=150", "--log_every_steps=100")

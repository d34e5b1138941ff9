"""Fast test of bench/adapter_drop.py: no timing, only what it builds, freezes and records."""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_BENCH = os.path.dirname(os.path.abspath(__file__))


def _run(*flags):
  # As a user's shell runs it: without the test process's TensorFlow log level.
  env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
  return subprocess.run(warm_python.command(os.path.join(_BENCH, "adapter_drop.py"), *flags),
                        capture_output=True, text=True, check=False, env=env)


def test_tiny_run_records_each_setting_with_its_trainable_parameters_and_ratio(tmp_path):
  # The suite's two-layer encoder: --lowest_left_out counts the default base's six layers,
  # scaled to two (3 of 6 is 1 of 2).
  handle = testing.tiny_hub_handle()
  output = tmp_path / "adapter_drop.json"
  process = _run("--bases=default", f"--hub_handle={handle}", "--lowest_left_out=0,3",
                 f"--output={output}", "--steps=1", "--warmup_steps=0", "--batch_size=2",
                 "--seq_length=8", "--nochild_processes")
  assert process.returncode == 0, process.stderr[-4000:]
  rows = {(row["left_out"], row["layer_norms"]): row
          for row in json.loads(output.read_text())["measurements"]}
  assert set(rows) == {(0, "trained"), (1, "trained"), (1, "frozen")}
  assert all(row["base"] == "default" and row["num_layers"] == 2 for row in rows.values())
  assert rows[(0, "trained")]["step_over_none_left_out"] == 1.0
  assert all(row["median_ms"] > 0 for row in rows.values())
  # Frozen: the two LayerNorms of the left-out layer and the embeddings' (gamma and beta).
  hidden = testing.TINY_CONFIG["hidden_size"]
  assert (rows[(1, "trained")]["trainable_params"] - rows[(1, "frozen")]["trainable_params"]
          == (2 * 1 + 1) * 2 * hidden)
  assert rows[(0, "trained")]["trainable_params"] > rows[(1, "trained")]["trainable_params"]


def test_counts_without_the_baseline_are_refused_in_one_line():
  process = _run("--lowest_left_out=1,2")
  assert process.returncode != 0
  assert "--lowest_left_out takes counts 0 to 5, 0 included" in process.stderr
  assert "Traceback" not in process.stderr


def test_a_hub_handle_that_is_no_encoder_is_refused_in_one_line(tmp_path):
  # As a user runs it: each base measured in a child process, whose refusal is the script's.
  process = _run("--bases=default", f"--hub_handle={tmp_path / 'missing'}",
                 f"--output={tmp_path / 'adapter_drop.json'}")
  assert process.returncode == 2, process.stderr[-4000:]
  (line,) = process.stderr.strip().splitlines()
  assert line.startswith("adapter_drop.py: error: ") and str(tmp_path / "missing") in line
  assert not (tmp_path / "adapter_drop.json").exists()

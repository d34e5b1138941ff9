"""Fast test of bench/training_throughput.py on the tiny test encoders and a few airline
examples: no timing, only what it runs, compares and records."""

import math
import os

import pytest

import script_runs
from keras_adapters.hub import testing
from keras_adapters.utils import provenance

_SCRIPT = "training_throughput.py"
_MAX_SEQ_LENGTH = testing.TINY_CONFIG["max_sequence_length"]


def test_tiny_run_trains_every_setup_and_records_padding_speedups(tmp_path):
  record, process = script_runs.record(
      _SCRIPT, tmp_path / "throughput.json", f"--hub_handle={testing.tiny_hub_handle()}",
      f"--preprocess_handle={testing.tiny_preprocess_handle()}", "--num_examples=5",
      "--batch_size=2", f"--max_seq_length={_MAX_SEQ_LENGTH}", "--warmup_steps=0")
  runs = record["runs"]
  assert set(runs) == {"adapters/dynamic", "adapters/fixed", "full/dynamic", "full/fixed"}
  for name, run in runs.items():
    assert f"{run['tuning']}/{run['padding']}" == name
    # One pass over the full batches of the subset: the odd example is left out.
    assert (run["examples"], run["timed_steps"], len(run["times_ms"])) == (5, 2, 2), run
    for figure in ("examples_per_s", "median_ms", "peak_rss_mib"):
      assert math.isfinite(run[figure]) and run[figure] > 0, run
    assert run["examples_per_s"] == pytest.approx(2 * 2 / (sum(run["times_ms"]) / 1e3))
    assert 0 <= run["input_wait_share"] < 1, run
    assert 0 < run["trainable_params"] <= run["total_params"], run
  assert runs["full/fixed"]["trainable_params"] == runs["full/fixed"]["total_params"]
  assert runs["adapters/fixed"]["trainable_params"] < runs["adapters/fixed"]["total_params"]
  # Fixed padding pads every batch to --max_seq_length; per-batch padding to its longest.
  for tuning in ("adapters", "full"):
    assert runs[f"{tuning}/fixed"]["mean_padded_length"] == _MAX_SEQ_LENGTH
    assert runs[f"{tuning}/dynamic"]["mean_padded_length"] <= _MAX_SEQ_LENGTH
    assert record["dynamic_padding_speedup"][tuning] == (
        runs[f"{tuning}/dynamic"]["examples_per_s"] / runs[f"{tuning}/fixed"]["examples_per_s"])
  assert record["adapters_input_wait_share"] == {
      padding: runs[f"adapters/{padding}"]["input_wait_share"] for padding in ("dynamic", "fixed")}
  settings = record["settings"]
  assert (settings["task"], settings["split"], settings["adapter_size"]) == (
      "airline", os.path.join("keras_adapters", "cli", "splits", "airline.json"), 64)
  assert record["machine"]["kernels"]["chosen_by"]
  assert record[provenance.KEY]["command"].startswith("bench/training_throughput.py")
  assert "| Tuning | Padding | Examples/s |" in process.stdout
  assert "| Tuning | Speed-up of per-batch padding |" in process.stdout


def test_batch_larger_than_the_subset_is_refused_in_one_line(tmp_path):
  script_runs.assert_refused_in_one_line(
      _SCRIPT, "--batch_size is larger than --num_examples: there is no full batch to time.",
      tmp_path / "x.json", "--num_examples=4", "--batch_size=8")

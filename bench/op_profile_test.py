"""Fast test of bench/op_profile.py on the tiny test encoder: no timing, only what it runs,
sums and records (bench/profiler_trace_test.py tests the sums on a hand-made trace)."""

import math

import pytest

import script_runs
from keras_adapters.hub import testing
from keras_adapters.utils import provenance


def test_tiny_run_profiles_every_setup_and_records_ratios_to_full(tmp_path):
  record, process = script_runs.record(
      "op_profile.py", tmp_path / "op_profile.json", f"--hub_handle={testing.tiny_hub_handle()}",
      "--steps=1", "--warmup_steps=0", "--batch_size=2", "--seq_length=8")
  setups = record["setups"]
  assert set(setups) == {"adapters", "lora", "layer_norm", "full"}
  for setup, result in setups.items():
    assert result["setup"] == setup
    assert math.isfinite(result["wall_ms"]) and result["wall_ms"] > 0, result
    assert math.isfinite(result["total_ms"]) and result["total_ms"] > 0, result
    # Both breakdowns add up to the op time.
    assert min(result["by_op_type"].values()) >= 0, result
    assert sum(result["by_op_type"].values()) == pytest.approx(result["total_ms"])
    assert sum(result["by_pass"].values()) == pytest.approx(result["total_ms"])
    assert set(result["by_pass"]) == {"backward", "forward_and_update"}, result
    assert 0 < result["trainable_params"] <= result["total_params"], result
  assert setups["full"]["trainable_params"] == setups["full"]["total_params"]
  ratios = record["ratios_to_full"]
  assert set(ratios) == {"adapters", "lora", "layer_norm"}
  full = setups["full"]
  for setup, ratio in ratios.items():
    assert ratio == dict(op_time=setups[setup]["total_ms"] / full["total_ms"],
                         wall_time=setups[setup]["wall_ms"] / full["wall_ms"])
  assert (record["settings"]["steps"], record["settings"]["adapter_size"]) == (1, 64)
  assert record["machine"]["kernels"]["chosen_by"]
  assert record[provenance.KEY]["command"].startswith("bench/op_profile.py")
  assert "| Setup | Wall ms | Op ms | Backward op ms |" in process.stdout
  assert "| Ratio to full | Op time | Wall time |" in process.stdout

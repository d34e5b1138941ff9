"""Fast test of bench/attention_recompute.py on the tiny test encoder: no timing, only what
it runs, compares and records."""

import json
import os
import subprocess
import sys

from keras_adapters.hub import testing

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_recompute.py")


def test_tiny_run_measures_both_settings_and_records_their_ratios(tmp_path):
  output = tmp_path / "recompute.json"
  process = subprocess.run(
      [sys.executable, _SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--bases=default",
       "--shapes=2x16", "--methods=adapters,full", "--rounds=1", "--steps=1",
       "--warmup_steps=0", f"--output={output}"],
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  adapters, full = json.loads(output.read_text())["comparisons"]
  for comparison, method in ((adapters, "adapters"), (full, "full")):
    assert (comparison["base"], comparison["shape"], comparison["method"]) == (
        "default", "2x16", method)
    assert [row["setting"] for row in comparison["rows"]] == ["never", "always"]
    kept, recomputed = comparison["rows"]
    assert comparison["peak_ratio"] == recomputed["peak_mb"] / kept["peak_mb"]
    assert comparison["step_ratio"] == recomputed["step_ms"] / kept["step_ms"]
    assert kept["trainable_params"] == recomputed["trainable_params"] > 0
  # Full fine-tuning trains every weight, the adapters a part of theirs (m=64 outgrows the
  # tiny base, so the two counts are not compared).
  assert full["rows"][0]["trainable_params"] == full["rows"][0]["total_params"]
  assert adapters["rows"][0]["trainable_params"] < adapters["rows"][0]["total_params"]
  table = (tmp_path / "recompute.md").read_text()
  assert "| default | 2x16 | adapters |" in table and "| default | 2x16 | full |" in table


def test_an_unknown_base_or_method_is_refused_in_one_line(tmp_path):
  for flag, value, message in (
      ("bases", "huge", "Unknown --bases ['huge']: choose from ['default', 'base', 'large']."),
      ("methods", "prefix", "Unknown --methods ['prefix']: choose from ['adapters',")):
    process = subprocess.run([sys.executable, _SCRIPT, f"--{flag}={value}",
                              f"--output={tmp_path / 'x.json'}"],
                             capture_output=True, text=True, check=False)
    assert process.returncode != 0
    assert message in process.stderr
    assert not (tmp_path / "x.json").exists()


def test_bad_shape_is_refused_in_one_line(tmp_path):
  process = subprocess.run([sys.executable, _SCRIPT, "--shapes=8by512",
                            f"--output={tmp_path / 'x.json'}"],
                           capture_output=True, text=True, check=False)
  assert process.returncode != 0
  assert "--shapes takes BATCHxSEQ items such as 8x512; got '8by512'" in process.stderr
  assert not (tmp_path / "x.json").exists()

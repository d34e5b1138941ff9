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
      [sys.executable, _SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--shapes=2x16",
       "--rounds=1", "--steps=1", "--warmup_steps=0", f"--output={output}"],
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  (comparison,) = json.loads(output.read_text())["comparisons"]
  assert [row["setting"] for row in comparison["rows"]] == ["never", "always"]
  kept, recomputed = comparison["rows"]
  assert comparison["peak_ratio"] == recomputed["peak_mb"] / kept["peak_mb"]
  assert comparison["step_ratio"] == recomputed["step_ms"] / kept["step_ms"]
  assert kept["trainable_params"] == recomputed["trainable_params"] > 0
  assert "| 2x16 |" in (tmp_path / "recompute.md").read_text()


def test_bad_shape_is_refused_in_one_line(tmp_path):
  process = subprocess.run([sys.executable, _SCRIPT, "--shapes=8by512",
                            f"--output={tmp_path / 'x.json'}"],
                           capture_output=True, text=True, check=False)
  assert process.returncode != 0
  assert "--shapes takes BATCHxSEQ items such as 8x512; got '8by512'" in process.stderr
  assert not (tmp_path / "x.json").exists()

"""Fast test of bench/activation_gradient.py at a small shape: no timing, only what it runs,
compares and records."""

import json
import os
import subprocess

from keras_adapters.utils import provenance
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "activation_gradient.py")


def test_tiny_run_times_both_gradients_of_the_gelus_and_layer_norm_and_records_ratios(tmp_path):
  output = tmp_path / "activation_gradient.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, "--tokens=64", "--width=1024", "--hidden=1024", "--steps=2",
                          "--warmup_steps=1", f"--output={output}"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  # 64 × 1024 values: the one-pass gradients are XLA's from this size on.
  assert record["settings"]["fuse_from_elements"] <= 64 * 1024
  assert set(record["timings"]) == {
      f"{name}/{gradient}" for name in ("gelu", "gelu_approximate", "layer_norm")
      for gradient in ("autodiff", "one_pass")}
  for timing in record["timings"].values():
    assert len(timing["times_ms"]) == 2 and timing["median_ms"] > 0
  for name, ratio in record["one_pass_over_autodiff"].items():
    assert ratio == (record["timings"][f"{name}/one_pass"]["median_ms"]
                     / record["timings"][f"{name}/autodiff"]["median_ms"])
  assert record["machine"]["kernels"]["chosen_by"]
  assert provenance.KEY in record
  assert "| gelu_approximate |" in process.stdout and "| layer_norm |" in process.stdout

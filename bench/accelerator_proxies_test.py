"""A fast run of bench/accelerator_proxies.py on a tiny random encoder."""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerator_proxies.py")


def test_times_every_setup_in_turns_against_float32(tmp_path):
  output = tmp_path / "accelerator_proxies.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--steps=2",
       "--warmup_steps=1", "--batch_size=2", "--seq_length=16", f"--output={output}",
       "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  record = json.loads(output.read_text())
  assert set(record["train_step"]) == {"float32", "bfloat16", "float32_xla", "bfloat16_xla"}
  assert record["settings"]["setups"]["bfloat16_xla"] == dict(mixed_precision="bfloat16",
                                                              jit_compile=True)
  for setup, result in record["train_step"].items():
    assert len(result["times_ms"]) == 2
    assert record["ratios"][setup] == result["median_ms"] / record["train_step"]["float32"][
        "median_ms"]
  assert record["ratios"]["float32"] == 1.0
  assert "| bfloat16_xla | bfloat16 | yes |" in process.stdout

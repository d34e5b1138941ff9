"""Fast test of bench/roofline.py: no timing, only what it runs, counts and records.

A stand-in for the peers' Python (fixed step times and a fixed matmul rate) lets one whole run
go through our five setups on the tiny test encoder, the peers' calls and the record.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

import matmul_rate

_BENCH = os.path.dirname(os.path.abspath(__file__))
_PEER_MS = 100.0
_PEER_RATE = 50.0


def _fake_peers(folder):
  """A harness folder with a stand-in Python answering bench/peer_step.py (either mode) and
  bench/matmul_rate.py as they print, with fixed figures; it logs every call's arguments."""
  python = folder / "python"
  python.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
      import json, sys
      with open({str(folder / "calls.txt")!r}, "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
      if sys.argv[1].endswith("matmul_rate.py"):
        print(json.dumps(dict(framework="torch", gflops_per_s={_PEER_RATE})))
      else:
        assert sys.argv[1].endswith("peer_step.py"), sys.argv
        print(json.dumps(dict(median_ms={_PEER_MS})))
      """))
  python.chmod(python.stat().st_mode | stat.S_IEXEC)
  return python


def test_counted_flops_follow_the_step_definitions():
  shape = matmul_rate.Shape()
  forward = matmul_rate.forward_flops(shape) / 1e9
  assert 85 < forward < 95  # all-MiniLM-L6-v2 at 32 x 128: about 92 GFLOP per forward pass.

  def gflop(what):
    return matmul_rate.step_flops(what, shape, adapter_size=64, lora_rank=8) / 1e9

  assert gflop("full_step") == pytest.approx(3 * forward)
  assert gflop("inference_plain") == pytest.approx(forward)
  adapters = gflop("inference_adapters") - forward
  assert gflop("adapter_step") == pytest.approx(2 * forward + 3 * adapters)
  assert forward < gflop("lora_step") < gflop("adapter_step")


def test_tiny_run_records_every_row_fraction_and_target(tmp_path):
  peer_dir = tmp_path / "peer"
  peer_dir.mkdir()
  python = _fake_peers(peer_dir)
  output = tmp_path / "roofline.json"
  process = subprocess.run(
      warm_python.command(os.path.join(_BENCH, "roofline.py"),
       f"--hub_handle={testing.tiny_hub_handle()}", f"--peer_dir={peer_dir}",
       f"--peer_python={python}", f"--output={output}", "--rounds=1", "--steps=1",
       "--warmup_steps=0", "--batch_size=2", "--seq_length=8", "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  rows = {(row["library"], row["what"]): row for row in record["measurements"]}
  whats = ("adapter_step", "lora_step", "full_step", "inference_plain", "inference_adapters")
  assert set(rows) == ({("keras_adapters", what) for what in whats}
                       | {("adapterhub", "adapter_step"), ("adapterhub", "lora_step"),
                          ("peft", "lora_step"), ("transformers", "full_step"),
                          ("transformers", "inference_plain"),
                          ("adapterhub", "inference_adapters")})
  rates = record["matmul"]["gflops_per_s"]
  assert rates["torch"] == _PEER_RATE
  for (library, _), row in rows.items():
    assert row["gflops_per_s"] == pytest.approx(row["gflop"] / (row["ms"] / 1e3))
    rate = rates["tensorflow" if library == "keras_adapters" else "torch"]
    assert row["fraction_of_matmul"] == pytest.approx(row["gflops_per_s"] / rate)
    if library == "keras_adapters":
      assert row["largest_other_ops"], row
      others = sum(op["share"] for op in row["largest_other_ops"])
      assert 0 < row["matmul_share_of_op_time"] <= 1 - others + 1e-9, row
    else:
      assert row["ms"] == _PEER_MS
  # The peers ran the tiny encoder's shape with random weights, inference without gradients.
  tiny = testing.TINY_CONFIG
  calls = (peer_dir / "calls.txt").read_text().splitlines()
  assert all(f"--shape={tiny['num_layers']},{tiny['hidden_size']}," in call
             for call in calls if "peer_step.py" in call), calls
  assert sum("--mode=infer" in call for call in calls) == 2
  assert set(record["targets"]) == {"adapter_step", "inference_plain", "inference_adapters"}
  assert record["targets"]["adapter_step"]["at_least"] == 0.75
  assert record["machine"]["vector_extensions"]

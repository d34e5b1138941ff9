"""Fast test of bench/keras3_speed.py: no timing, only what it runs and records.

One whole run on the tiny test encoder: our Keras 2 path (in the script's own process:
`--nochild_processes`), Keras 3 on JAX and on TensorFlow, each in its own process, and a
stand-in for the peers' Python answering as bench/peer_step.py prints (fixed step times).
"""

import json
import os
import stat
import subprocess
import sys
import textwrap

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_BENCH = os.path.dirname(os.path.abspath(__file__))
_PEER_MS = 100.0
_PEER_TRAINABLE = 1234


def _fake_peer(folder):
  python = folder / "python"
  python.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
      import json, sys
      with open({str(folder / "calls.txt")!r}, "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
      assert sys.argv[1].endswith("peer_step.py"), sys.argv
      report = dict(median_ms={_PEER_MS})
      if "--mode=train" in sys.argv:  # As peer_step.py: parameter counts in training only.
        report["params"] = dict(trainable={_PEER_TRAINABLE})
      print(json.dumps(report))
      """))
  python.chmod(python.stat().st_mode | stat.S_IEXEC)
  return python


def test_tiny_run_times_every_stack_and_records_the_ratios(tmp_path):
  peer_dir = tmp_path / "peer"
  peer_dir.mkdir()
  python = _fake_peer(peer_dir)
  output = tmp_path / "keras3_speed.json"
  process = subprocess.run(
      warm_python.command(os.path.join(_BENCH, "keras3_speed.py"),
       f"--hub_handle={testing.tiny_hub_handle()}", f"--peer_dir={peer_dir}",
       f"--peer_python={python}", f"--output={output}", "--rounds=1", "--steps=1",
       "--warmup_steps=0", "--batch_size=2", "--seq_length=8", "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  rows = {(row["stack"], row["what"]): row for row in record["measurements"]}
  stacks = ("keras2", "keras3_jax", "keras3_tensorflow", "adapterhub")
  assert set(rows) == {(stack, what) for stack in stacks
                       for what in ("adapter_step", "inference_adapters")}
  for (stack, what), row in rows.items():
    assert row["ms"] > 0 and row["ms_by_round"] == [row["ms"]]
    assert row["over_keras2"] == row["ms"] / rows[("keras2", what)]["ms"]
  assert rows[("adapterhub", "adapter_step")]["ms"] == _PEER_MS
  # Both stacks train the same adapters, LayerNorms and head of the same encoder.
  trainable = record["trainable_params"]
  assert trainable["keras3_jax"] == trainable["keras3_tensorflow"] == trainable["keras2"]
  assert trainable["adapterhub"] == _PEER_TRAINABLE
  target = record["targets"]["keras3_tensorflow_adapter_step_over_keras2"]
  assert target["target"] == 1.10
  assert target["value"] == rows[("keras3_tensorflow", "adapter_step")]["over_keras2"]
  # The peer ran the tiny encoder's shape with random weights, in both modes.
  tiny = testing.TINY_CONFIG
  calls = (peer_dir / "calls.txt").read_text().splitlines()
  assert len(calls) == 2 and {"--mode=train" in c for c in calls} == {True, False}
  assert all(f"--shape={tiny['num_layers']},{tiny['hidden_size']}," in call for call in calls)
  # Every stack's process ran the CPU kernels keras_adapters chose in the script's.
  assert record["kernels"].keys() == {"keras2", "keras3_jax", "keras3_tensorflow"}
  assert {kernels["onednn"] for kernels in record["kernels"].values()} == {
      record["machine"]["kernels"]["onednn"]}
  assert record["machine"]["vector_extensions"]

"""Fast test of bench/lora_speed.py: no timing, only what it runs, compares and records.

A stand-in for the peers' Python (fixed step times, printed as bench/peer_step.py prints them)
lets one whole run go through our training step, the exports and every inference setup on the
tiny test encoders, and the record.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lora_speed.py")
_PEER_MS = {"adapterhub": 300.0, "peft": 200.0}


def _fake_peers(folder, vocab_size):
  """A harness folder with its batch (ids in the tiny vocabulary) and a stand-in for the
  peers' Python that prints fixed figures for the library and steps it is asked for."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  np.savez(folder / "synthetic_batch.npz", input_ids=rng.integers(0, vocab_size, (4, 8)),
           attention_mask=np.ones((4, 8), np.int64), token_type_ids=np.zeros((4, 8), np.int64),
           labels=rng.integers(0, 2, (4,)))
  python = folder / "python"
  python.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
      import json, sys
      assert sys.argv[1].endswith("peer_step.py"), sys.argv
      args = dict(a[2:].split("=", 1) for a in sys.argv[2:])
      ms = {_PEER_MS!r}[args["library"]]
      print(json.dumps(dict(
          library=args["library"], precision=args["precision"], threads=int(args["threads"]),
          warmup_steps=int(args["warmup"]), timed_steps=int(args["steps"]), median_ms=ms,
          foreign_cpu_cores=dict(mean=0.01, per_step=[0.01]), params=dict(trainable=74498),
          versions=dict(python="3.11.7", packages=dict(peft="0.21.2", adapters="1.3.0")))))
      """))
  python.chmod(python.stat().st_mode | stat.S_IEXEC)
  return python


def test_tiny_run_times_every_setup_and_records_ratios_and_differences(tmp_path):
  hub_handle = testing.tiny_hub_handle()
  peer_dir = tmp_path / "peer"
  peer_dir.mkdir()
  python = _fake_peers(peer_dir, testing.TINY_CONFIG["vocab_size"])
  output = tmp_path / "result.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={hub_handle}",
       f"--preprocess_handle={testing.tiny_preprocess_handle()}", f"--peer_dir={peer_dir}",
       f"--peer_python={python}", f"--output={output}", "--rounds=1", "--steps=1",
       "--infer_steps=1", "--warmup_steps=0", "--seq_length=16", "--precision=bfloat16",
       "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  summary = record["summary"]
  assert set(summary["train_ms"]) == {"keras_adapters", "adapterhub", "peft"}
  ratio = summary["ratios"]["train_ours_over_faster_peer"]
  assert ratio["faster_peer_per_round"] == ["peft"]
  assert len(ratio["per_round"]) == 1
  assert ratio["target"] == 0.60 and set(ratio) >= {"value", "met", "per_round"}
  assert set(summary["infer_ms"]) == {"plain", "lora_unmerged", "lora_merged", "export_plain",
                                      "export_merged"}
  assert summary["ratios"]["infer_merged_export_over_plain_export"]["target"] == 1.03
  assert summary["max_abs_difference_merged_vs_unmerged"]["value"] < 1e-5
  assert summary["max_abs_difference_merged_export_vs_unmerged_probabilities"] < 1e-5
  infer = record["infer"]
  assert infer["merged_projections"] == 2 * 2  # query and value of both tiny layers.
  assert infer["max_abs_difference_merged_vs_plain"] > 1e-3  # LoRA's B is not zero.
  assert infer["export"]["real_token_share"] == 1.0
  # Ours trains the LoRA and the head only: no LayerNorm.
  ours = record["rounds"][0]["train"]["keras_adapters"]
  assert ours["trainable_layer_norm"] == 0 and ours["timed_steps"] == 1
  # Every side trains in the precision asked for.
  assert record["settings"]["precision"] == "bfloat16"
  assert [figures["precision"] for figures in record["rounds"][0]["train"].values()] == [
      "bfloat16"] * 3
  assert record["trainable_params"]["peft"] == 74498
  assert "cpu_model" in record["machine"] and "vector_extensions" in record["machine"]
  assert set(record["machine_load"]) == {"load_average_before", "load_average_after",
                                         "peer_steps_mean_foreign_cpu_cores", "quiet"}
  assert record["provenance"]["command"].startswith("bench/lora_speed.py")
  assert "LoRA training step" in process.stdout


def test_without_the_peers_it_says_so_and_writes_nothing(tmp_path):
  output = tmp_path / "result.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--peer_python={tmp_path / 'missing'}",
       f"--output={output}"), capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  assert "Skipped" in process.stdout and not output.exists()

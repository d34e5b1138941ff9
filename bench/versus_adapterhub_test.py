"""Fast tests of bench/versus_adapterhub.py: no timing, only what it runs, compares and records.

A stand-in for the AdapterHub harness (fixed figures, written by the test) lets one whole run
go through our four setups on the tiny test encoder, the airline comparison and the record.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from keras_adapters.hub import testing

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "versus_adapterhub.py")
_THEIR_MS = {"train_adapter": 200.0, "train_full": 250.0, "infer_plain": 40.0,
             "infer_adapter": 50.0}
_THEIR_AIRLINE_SECONDS = 4.0


def _fake_harness(folder, vocab_size):
  """A harness folder: its batch (ids in the tiny vocabulary) and scripts printing fixed JSON."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  np.savez(folder / "synthetic_batch.npz", input_ids=rng.integers(0, vocab_size, (4, 8)),
           attention_mask=np.ones((4, 8), np.int64), token_type_ids=np.zeros((4, 8), np.int64),
           labels=rng.integers(0, 2, (4,)))
  summary = dict(
      train_step_ms_median_adapter=_THEIR_MS["train_adapter"],
      train_step_ms_median_full=_THEIR_MS["train_full"],
      infer_ms_median_plain=_THEIR_MS["infer_plain"],
      infer_ms_median_adapter=_THEIR_MS["infer_adapter"],
      peak_rss_mib_max_over_rounds={mode: 1000.0 for mode in _THEIR_MS},
      any_round_contended=False)
  (folder / "bench_peer.py").write_text(
      f"import json\nprint(json.dumps({{'summary': {summary!r}}}))\n")
  # Like run_airline.py: reads PEER_DATA's TSVs, stops after --max-steps.
  (folder / "run_airline.py").write_text(textwrap.dedent(f"""
      import json, os, sys
      steps = int([a for a in sys.argv if a.startswith("--max-steps=")][0].split("=")[1])
      with open(os.path.join(os.environ["PEER_DATA"], "train.tsv")) as f:
        assert f.readline() == "text\\tlabel\\n"
        assert all(line.rstrip("\\n").rsplit("\\t", 1)[1] in
                   ("negative", "neutral", "positive") for line in f)
      print(json.dumps({{"epochs": [{{"steps": steps, "train_s": {_THEIR_AIRLINE_SECONDS}}}]}}))
      """))


def _run(*flags):
  return subprocess.run([sys.executable, _SCRIPT, *flags], capture_output=True, text=True,
                        check=False)


def test_without_the_harness_it_says_how_to_install_it_and_writes_nothing(tmp_path):
  output = tmp_path / "result.json"
  process = _run(f"--peer_python={tmp_path / 'no' / 'python'}", f"--output={output}")
  assert process.returncode == 0, process.stderr[-4000:]
  assert "Skipped" in process.stdout and "install.sh" in process.stdout
  assert not output.exists()


def test_one_round_against_a_stand_in_harness(tmp_path):
  # Room for the airline comparison's 64 tokens.
  hub_handle = testing.save_tiny_hub_encoder(str(tmp_path / "encoder"), max_sequence_length=64)
  _fake_harness(tmp_path, vocab_size=testing.TINY_CONFIG["vocab_size"])
  output = tmp_path / "result.json"
  process = _run(
      f"--peer_dir={tmp_path}", f"--peer_python={sys.executable}", f"--hub_handle={hub_handle}",
      f"--preprocess_handle={testing.tiny_preprocess_handle()}", f"--output={output}",
      "--rounds=1", "--steps=1", "--infer_steps=1", "--warmup_steps=1", "--airline_steps=2")
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  (this_round,) = record["rounds"]
  ours = {mode: this_round["ours"][mode]["median_ms"] for mode in _THEIR_MS}
  ratios = record["summary"]["ratios"]
  assert ratios["train_adapter_over_theirs"]["value"] == pytest.approx(
      ours["train_adapter"] / _THEIR_MS["train_adapter"])
  assert ratios["infer_adapter_over_their_plain"]["value"] == pytest.approx(
      ours["infer_adapter"] / _THEIR_MS["infer_plain"])
  assert ratios["our_adapter_inference_overhead"]["value"] == pytest.approx(
      ours["infer_adapter"] / ours["infer_plain"] - 1)
  assert ratios["our_adapter_step_over_our_full_step"]["target"] == 0.70
  full = this_round["ours"]["train_full"]
  assert full["trainable_params"] == full["total_params"]
  airline = record["summary"]["airline"]
  assert airline["theirs_examples_per_s"] == pytest.approx(2 * 32 / _THEIR_AIRLINE_SECONDS)
  assert airline["speedup"]["value"] == pytest.approx(
      airline["ours_examples_per_s"] / airline["theirs_examples_per_s"])
  assert "Ours / theirs" in process.stdout and "Airline adapter training" in process.stdout

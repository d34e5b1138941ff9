"""Fast tests of bench/versus_adapterhub.py: no timing, only what it runs, compares and records.

A stand-in for the AdapterHub harness (fixed figures, written by the test) lets one whole run
go through our four setups on the tiny test encoder, the airline comparison and the record.
"""

import ast
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "versus_adapterhub.py")
_RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       "versus_adapterhub.json")
_THEIR_MS = {"train_adapter": 200.0, "train_full": 250.0, "infer_plain": 40.0,
             "infer_adapter": 50.0}
_THEIR_ENV = {"python": "3.11.7", "torch": "2.13.0+cpu", "transformers": "4.57.6",
              "adapters": "1.3.0"}
_THEIR_FRAMEWORK = "torch 2.13.0+cpu, transformers 4.57.6, adapters 1.3.0"
# run_airline.py's epoch time and the time it logs after its first step.
_THEIR_AIRLINE_SECONDS = 4.0
_THEIR_FIRST_STEP_SECONDS = 1.5
_THEIR_PADDED_LENGTH = 40


def _fake_harness(folder, vocab_size):
  """A harness folder: its batch (ids in the tiny vocabulary) and scripts printing fixed JSON,
  with the warm-up and timed steps they were asked for."""
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
  # Like bench_peer.py: one round, exactly the steps asked for when nothing else runs.
  (folder / "bench_peer.py").write_text(textwrap.dedent(f"""
      import json, sys
      args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
      assert args["rounds"] == "1" and int(args["warmup"]) >= 3, args
      steps = {{"train": int(args["steps"]), "infer": int(args["infer-steps"])}}
      print(json.dumps({{
          "settings": {{"warmup": int(args["warmup"]), "timed_train_steps": steps["train"],
                        "timed_infer_steps": steps["infer"], "torch_threads": 2}},
          "env": {_THEIR_ENV!r},
          "summary": {summary!r},
          "runs": {{"per_round": {{mode: [{{"n_timed": steps[mode.split("_")[0]],
                                           "basis": "uncontended"}}]
                                   for mode in {list(_THEIR_MS)!r}}}}}}}))
      """))
  # Like run_airline.py: reads PEER_DATA's TSVs, trains --max-steps steps, logs the seconds
  # after its first step on stderr.
  (folder / "run_airline.py").write_text(textwrap.dedent(f"""
      import json, os, sys
      steps = int([a for a in sys.argv if a.startswith("--max-steps=")][0].split("=")[1])
      with open(os.path.join(os.environ["PEER_DATA"], "train.tsv")) as f:
        assert f.readline() == "text\\tlabel\\n"
        assert all(line.rstrip("\\n").rsplit("\\t", 1)[1] in
                   ("negative", "neutral", "positive") for line in f)
      print("[adapters] ep 1 step 0/%d loss 1.0986 lr 0.00e+00 {_THEIR_FIRST_STEP_SECONDS}s"
            % steps, file=sys.stderr)
      print(json.dumps({{"framework": {_THEIR_FRAMEWORK!r}, "hparams": {{"threads": 2}},
                        "epochs": [{{"steps": steps, "train_s": {_THEIR_AIRLINE_SECONDS},
                                     "padded_tokens": steps * 32 * {_THEIR_PADDED_LENGTH}}}]}}))
      """))


def _run(*flags):
  return subprocess.run(warm_python.command(_SCRIPT, *flags), capture_output=True, text=True,
                        check=False)


def test_without_the_harness_it_says_how_to_install_it_and_writes_nothing(tmp_path):
  output = tmp_path / "result.json"
  process = _run(f"--peer_python={tmp_path / 'no' / 'python'}", f"--output={output}")
  assert process.returncode == 0, process.stderr[-4000:]
  assert "Skipped" in process.stdout and "install.sh" in process.stdout
  assert not output.exists()


def test_fewer_steps_than_the_harness_takes_are_refused(tmp_path):
  process = _run(f"--peer_python={tmp_path / 'no' / 'python'}", "--warmup_steps=2")
  assert process.returncode != 0
  assert "warmup_steps" in process.stderr


def _defaults():
  """The whole-number flag defaults of the script, as its `flags.DEFINE_integer` calls give
  them (read from its source: running it costs a TensorFlow import)."""
  with open(_SCRIPT, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  return {call.args[0].value: call.args[1].value for call in ast.walk(tree)
          if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
          and call.func.attr == "DEFINE_integer"}


def test_the_recorded_run_is_the_defaults():
  # The READMEs give `python bench/versus_adapterhub.py`, without flags, for the recorded run.
  with open(_RECORD, encoding="utf-8") as f:
    record = json.load(f)
  defaults = _defaults()
  assert set(defaults) == {"rounds", "steps", "infer_steps", "warmup_steps", "airline_steps"}
  assert {name: record["settings"][name] for name in defaults} == defaults
  if "provenance" in record:  # Records made since the provenance was added.
    assert record["provenance"]["command"] == "bench/versus_adapterhub.py"


def test_one_round_against_a_stand_in_harness(tmp_path):
  # BERT's 128 positions, room for the airline comparison's 64 tokens: the tiny export that
  # scale_test.py and tests/docs_test.py take too, built once for the session (its cache).
  hub_handle = testing.save_tiny_hub_encoder(str(tmp_path / "encoder"), max_sequence_length=128)
  _fake_harness(tmp_path, vocab_size=testing.TINY_CONFIG["vocab_size"])
  output = tmp_path / "result.json"
  process = _run(
      f"--peer_dir={tmp_path}", f"--peer_python={sys.executable}", f"--hub_handle={hub_handle}",
      f"--preprocess_handle={testing.tiny_preprocess_handle()}", f"--output={output}",
      "--rounds=1", "--steps=10", "--infer_steps=11", "--warmup_steps=3", "--airline_steps=2")
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
  assert "Ours / theirs" in process.stdout and "Airline adapter training" in process.stdout

  # Both sides timed over the same steps, as each reported them.
  timing = record["timing"]
  synthetic = dict(warmup_steps=3, timed_train_steps=10, timed_infer_steps=11)
  assert timing["synthetic_batch"]["ours"] == timing["synthetic_batch"]["theirs"] == synthetic
  assert timing["synthetic_batch"]["same_on_both_sides"]
  assert {key: timing["synthetic_batch"][key] for key in synthetic} == synthetic
  assert [len(this_round["ours"][mode]["times_ms"]) for mode in _THEIR_MS] == [10, 10, 11, 11]
  airline_steps = dict(warmup_steps=1, timed_steps=2)
  assert timing["airline"]["ours"] == timing["airline"]["theirs"] == airline_steps
  assert timing["airline"]["same_on_both_sides"]
  assert "graph tracing" in timing["airline"]["how"]
  assert timing["threads"]["theirs"] == {"bench_peer.py: torch.set_num_threads": 2,
                                         "run_airline.py: torch.set_num_threads": 2}

  # The airline figures: the first step off, the next two over their time, on both sides.
  airline = this_round["airline"]
  their_timed_s = _THEIR_AIRLINE_SECONDS - _THEIR_FIRST_STEP_SECONDS
  assert airline["theirs"]["examples_per_s"] == pytest.approx(2 * 32 / their_timed_s)
  assert airline["theirs"]["all_steps_examples_per_s"] == pytest.approx(
      3 * 32 / _THEIR_AIRLINE_SECONDS)
  assert airline["theirs"]["mean_padded_length"] == _THEIR_PADDED_LENGTH
  assert airline["ours"]["examples_per_s"] == pytest.approx(
      2 * 32 / airline["ours"]["timed_s"])
  assert airline["ours"]["all_steps_examples_per_s"] == pytest.approx(
      3 * 32 / (airline["ours"]["warmup_s"] + airline["ours"]["timed_s"]))
  summary = record["summary"]["airline"]
  assert summary["theirs_examples_per_s"] == pytest.approx(2 * 32 / their_timed_s)
  assert summary["speedup"]["value"] == pytest.approx(
      summary["ours_examples_per_s"] / summary["theirs_examples_per_s"])
  assert summary["all_steps"]["speedup"] == pytest.approx(
      airline["ours"]["all_steps_examples_per_s"] / airline["theirs"]["all_steps_examples_per_s"])

  # Both libraries' versions, and how the record was made.
  versions = record["versions"]
  code = record["provenance"]["code"]
  assert versions["ours"]["keras_adapters"]["commit"] == code["commit"]
  assert versions["ours"]["keras_adapters"]["clean"] == code["clean"]
  assert versions["ours"]["packages"] == record["provenance"]["packages"]
  theirs = versions["theirs"]
  # The stand-in's "venv" is this Python.
  assert theirs["python"] == platform.python_version()
  assert theirs["packages"]["numpy"] == importlib.metadata.version("numpy")
  assert set(theirs["packages"]) >= {"adapters", "torch", "transformers"}
  assert theirs["reported"] == {"bench_peer.py": _THEIR_ENV, "run_airline.py": _THEIR_FRAMEWORK}
  assert theirs["harness"]["sha256"] == {
      name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
      for name in ("bench_peer.py", "run_airline.py")}
  assert "not AdapterHub's own" in theirs["harness"]["written_by"]
  assert set(record["provenance"]) == {"command", "code", "packages", "date_utc", "machine"}
  assert record["provenance"]["command"].startswith("bench/versus_adapterhub.py ")
  assert "--airline_steps=2" in record["provenance"]["command"]

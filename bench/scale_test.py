"""Fast test of bench/scale.py: no timing, only what it runs, records and resumes.

A tiny Model Garden export with BERT's 128 positions stands in for the default shape and a
stand-in for AdapterHub's Python prints fixed figures as bench/peer_step.py prints them.
"""

import datetime
import json
import os
import stat
import subprocess
import sys
import textwrap

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.py")
_THEIR_STEP_MS = 500.0
_THEIR_PEAK_MIB = 400.0


def _fake_adapterhub(folder):
  python = folder / "python"
  python.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
      import json, sys
      assert sys.argv[1].endswith("peer_step.py"), sys.argv
      args = dict(a[2:].split("=", 1) for a in sys.argv[2:])
      assert args["library"] == "adapterhub" and args["shape"] == "minilm", args
      print(json.dumps(dict(
          median_ms={_THEIR_STEP_MS}, times_ms=[{_THEIR_STEP_MS}], baseline_rss_mib=300.0,
          peak_over_baseline_mib={_THEIR_PEAK_MIB}, params=dict(trainable=1, total=2),
          foreign_cpu_cores=dict(mean=0.0), versions=dict(packages=dict(adapters="1.3.0")),
          method=args["method"], seq_length=int(args["seq_length"]))))
      """))
  python.chmod(python.stat().st_mode | stat.S_IEXEC)
  return python


def _key(row):
  """A row's identity, as bench/scale.py's `row_key` (scale.py is not imported: its flags
  would clash with the experiments' in one test process)."""
  return tuple(row[field] for field in ("mode", "library", "shape", "seq", "method", "isa"))


def _run(tmp_path, *extra):
  command = warm_python.command(_SCRIPT, "--shapes=default", "--seq_lengths=128",
             f"--hub_handle={testing.tiny_hub_encoder(max_sequence_length=128)}",
             f"--preprocess_handle={testing.tiny_preprocess_handle()}",
             f"--peer_python={_fake_adapterhub(tmp_path)}", f"--work_dir={tmp_path / 'work'}",
             f"--output={tmp_path / 'scale.json'}", "--steps=1", "--warmup_steps=0",
             "--infer_steps=1", "--distinct_tasks=1", "--nochild_processes", *extra)
  process = subprocess.run(command, capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  return process.stdout, json.loads((tmp_path / "scale.json").read_text())


def test_tiny_run_records_every_row_checks_targets_and_resumes(tmp_path):
  # Each training row is a fresh process (its peak memory is the figure): the first run
  # trains the adapters only, the rerun full fine-tuning, stopped by the memory guard (that
  # full fine-tuning trains every weight, bench/versus_adapterhub_test.py checks).
  stdout, record = _run(tmp_path, "--methods=adapters", "--num_tasks=2")
  rows = {_key(row): row for row in record["rows"]}
  assert set(rows) == {(mode, library, "default", 128, method, "native")
                       for mode, library, method in [
                           ("train", "keras_adapters", "adapters"),
                           ("train", "adapterhub", "adapters"),
                           ("infer", "keras_adapters", "plain"),
                           ("infer", "keras_adapters", "adapters")]}
  ours = rows[("train", "keras_adapters", "default", 128, "adapters", "native")]
  assert ours["batch"] == 32 and ours["step_ms"] > 0 and ours["peak_mb"] > 0
  # The adapters' run trains a part (m=64 outgrows the tiny base, so no more can be said here).
  assert 0 < ours["trainable_params"] < ours["total_params"]
  theirs = rows[("train", "adapterhub", "default", 128, "adapters", "native")]
  assert (theirs["step_ms"], theirs["peak_mb"]) == (_THEIR_STEP_MS, _THEIR_PEAK_MIB)
  (tasks,) = record["tasks"]
  assert tasks["num_tasks"] == 2 and tasks["distinct_tasks_in_batch"] == 2
  assert tasks["size_mb"] > tasks["artifact_mb"] > 0 and tasks["load_s"] > 0
  assert tasks["rss_mb"] > 0 and tasks["served_rss_mb"] > 0 and tasks["session_rss_mb"] > 0
  assert tasks["mixed_latency_ratio"] == tasks["mixed_ms"] / tasks["one_task_ms"]
  checks = {(check["name"], check.get("seq")) for check in record["targets"]}
  assert checks == {("adapter_step_over_adapterhub", 128), ("adapter_peak_over_adapterhub", 128),
                    ("adapter_inference_over_plain", 128),
                    ("tasks_size_over_base_plus_artifacts", None), ("mixed_latency_ratio", None)}
  step_check = next(c for c in record["targets"] if c["name"] == "adapter_step_over_adapterhub")
  assert step_check["value"] == ours["step_ms"] / _THEIR_STEP_MS
  assert record["machine"]["kernels"]["chosen_by"]
  assert record["provenance"]["command"].startswith("bench/scale.py")
  assert "Measuring" in stdout and (tmp_path / "scale_tasks.png").exists()
  assert (tmp_path / "scale_steps.png").exists()
  assert "| default | 32 x 128 | adapters |" in (tmp_path / "scale.md").read_text()

  # A rerun measures only what is missing: here, the emulated AVX2 CPU's full fine-tuning row
  # of ours with TensorFlow's default kernels there, which AdapterHub has no counterpart of.
  # Its process passes the memory limit given, so the guard stops it: recorded as stopped,
  # the run goes on.
  stdout, again = _run(tmp_path, "--methods=full", "--num_tasks=2", "--isa=avx2_eigen",
                       "--inference=false", "--memory_limit_mb=1")
  assert again["rows"][:len(record["rows"])] == record["rows"]
  (added,) = again["rows"][len(record["rows"]):]
  assert (added["library"], added["method"], added["isa"]) == (
      "keras_adapters", "full", "avx2_eigen")
  assert stdout.count("Measuring") == 1 and again["tasks"] == record["tasks"]
  assert (added["step_ms"], added["peak_mb"], added["memory_limit_mb"]) == (None, None, 1)
  assert added["out_of_memory_mb"] is not None
  assert "(stopped)" in (tmp_path / "scale.md").read_text()

  # After a change of the code, rows recorded before a time are measured again in their
  # places (the docs name rows by place); rerun with the same time, nothing is left to do.
  since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  remeasure = ("--methods=adapters", "--libraries=adapterhub", "--inference=false",
               "--num_tasks=2", f"--remeasure_before={since}")
  stdout, remeasured = _run(tmp_path, *remeasure)
  assert stdout.count("Measuring") == 1
  index = next(i for i, row in enumerate(again["rows"])
               if _key(row) == ("train", "adapterhub", "default", 128, "adapters", "native"))
  assert remeasured["rows"][index]["provenance"]["date_utc"] >= since
  assert [row for i, row in enumerate(remeasured["rows"]) if i != index] == [
      row for i, row in enumerate(again["rows"]) if i != index]
  stdout, _ = _run(tmp_path, *remeasure)
  assert "Measuring" not in stdout


def test_full_fine_tuning_peaks_are_checked_against_adapterhubs():
  """`targets` on rows of full fine-tuning, in a fresh process (scale.py's flags would clash
  with the experiments' here): ours over AdapterHub's peak, a bound when ours was stopped."""
  def row(library, shape, peak_mb, out_of_memory_mb=None):
    return dict(mode="train", library=library, shape=shape, seq=128, method="full",
                isa="native", step_ms=None, peak_mb=peak_mb, out_of_memory_mb=out_of_memory_mb)
  rows = [row("keras_adapters", "base", 600.0), row("adapterhub", "base", 500.0),
          row("keras_adapters", "large", None, 900.0), row("adapterhub", "large", 1000.0)]
  code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(_SCRIPT)!r}); import scale; "
          f"print(json.dumps(scale.targets(json.loads(sys.argv[1]), [])))")
  process = subprocess.run([sys.executable, "-c", code, json.dumps(rows)], capture_output=True,
                           text=True, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  checks = json.loads(process.stdout.splitlines()[-1])
  assert [(c["name"], c["shape"], c["value"], c["met"], c.get("bound")) for c in checks] == [
      ("full_peak_over_adapterhub", "base", 1.2, False, None),
      # Stopped at 900 MB: its peak is at least 0.9 of theirs, whether above 1 is not known.
      ("full_peak_over_adapterhub", "large", 0.9, None, "at least")]


def test_bad_flags_are_refused_in_one_line(tmp_path):
  # Every mistake in one command (one TensorFlow start): the refusal names each, on one line.
  process = subprocess.run(warm_python.command(_SCRIPT, "--shapes=huge", "--seq_lengths=256",
                            "--remeasure_before=yesterday", f"--output={tmp_path / 'x.json'}",
                            "--libraries=keras_adapters"),
                           capture_output=True, text=True, check=False)
  assert process.returncode != 0
  assert any("--shapes takes default, base, large" in line
             and "--seq_lengths takes 128, 512" in line
             and ("--remeasure_before takes an ISO 8601 UTC time such as 2026-11-30T03:00; got "
                  "'yesterday'.") in line for line in process.stderr.splitlines())
  assert "Traceback" not in process.stderr
  assert not (tmp_path / "x.json").exists()

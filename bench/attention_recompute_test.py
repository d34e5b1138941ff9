"""Fast test of bench/attention_recompute.py on the tiny test encoder: no timing, only what
it runs, compares and records."""

import json
import os
import subprocess

import pytest

from keras_adapters.hub import testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_recompute.py")


def test_tiny_run_measures_both_settings_and_records_their_ratios(tmp_path):
  # Full fine-tuning, the method whose weights all train: the adapters' rows are the same code.
  output = tmp_path / "recompute.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}", "--bases=default",
       "--shapes=2x16", "--methods=full", "--rounds=1", "--steps=1", "--warmup_steps=0",
       f"--output={output}"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  (comparison,) = json.loads(output.read_text())["comparisons"]
  assert (comparison["base"], comparison["shape"], comparison["method"]) == (
      "default", "2x16", "full")
  assert [row["setting"] for row in comparison["rows"]] == ["never", "always"]
  kept, recomputed = comparison["rows"]
  assert comparison["peak_ratio"] == recomputed["peak_mb"] / kept["peak_mb"]
  assert comparison["step_ratio"] == recomputed["step_ms"] / kept["step_ms"]
  assert kept["trainable_params"] == recomputed["trainable_params"] == kept["total_params"] > 0
  assert "| default | 2x16 | full |" in (tmp_path / "recompute.md").read_text()


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
  """The script given every kind of bad flag in one command: one TensorFlow start for the
  refusal tests, each of which reads the part it checks."""
  output = tmp_path_factory.mktemp("refused") / "x.json"
  process = subprocess.run(warm_python.command(_SCRIPT, "--bases=huge", "--methods=prefix",
                            "--shapes=8by512", f"--output={output}"),
                           capture_output=True, text=True, check=False)
  return process, output


def test_unknown_bases_and_methods_are_refused_together_in_one_line(refused):
  process, output = refused
  assert process.returncode != 0
  assert any("Unknown --bases ['huge']: choose from ['default', 'base', 'large']." in line and
             "Unknown --methods ['prefix']: choose from ['adapters'," in line
             for line in process.stderr.splitlines())
  assert "Traceback" not in process.stderr
  assert not output.exists()


def test_bad_shape_is_refused_in_one_line(refused):
  process, output = refused
  assert process.returncode != 0
  assert any("--shapes takes BATCHxSEQ items such as 8x512; got '8by512'" in line and
             "Unknown --bases ['huge']" in line for line in process.stderr.splitlines())
  assert not output.exists()

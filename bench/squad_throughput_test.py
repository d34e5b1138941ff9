"""A fast run of bench/squad_throughput.py on tiny SQuAD files and a tiny random encoder."""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.data import squad_testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "squad_throughput.py")


def test_reports_feature_building_and_both_tunings(tmp_path):
  train_file = squad_testing.write_tiny_squad(str(tmp_path / "train.json"))
  predict_file = squad_testing.write_tiny_squad(str(tmp_path / "dev.json"), seed=1)
  output = tmp_path / "squad_throughput.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={testing.tiny_hub_handle()}",
       f"--preprocess_handle={testing.tiny_preprocess_handle()}", f"--train_file={train_file}",
       f"--predict_file={predict_file}", "--seq_length=32", "--max_query_length=4",
       "--doc_stride=8", "--batch_size=2", "--eval_batch_size=3", "--steps=2",
       "--warmup_steps=1", f"--output={output}", "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  record = json.loads(output.read_text())
  # The tiny files: 4 questions each, the 40-word contexts in 3 windows of 32 tokens.
  assert {split: (entry["questions"], entry["windows"])
          for split, entry in record["features"].items()} == {"train": (4, 6), "dev": (4, 6)}
  assert all(entry["build_seconds"] > 0 for entry in record["features"].values())
  assert list(record["runs"]) == ["adapters", "full"]
  for run in record["runs"].values():
    assert run["train_examples_per_s"] > 0 and run["eval_examples_per_s"] > 0
    assert len(run["train_step"]["times_ms"]) == len(run["eval_forward"]["times_ms"]) == 2
  runs = record["runs"]
  assert (runs["adapters"]["tuning"], runs["adapters"]["adapter_size"]) == ("adapters", 64)
  assert (runs["full"]["tuning"], runs["full"]["adapter_size"]) == ("full", None)
  assert record["adapters_over_full"]["train"] == (runs["adapters"]["train_examples_per_s"]
                                                   / runs["full"]["train_examples_per_s"])
  assert "| train | 4 | 6 |" in process.stdout

"""Fast tests of bench/multitask_serving.py: whole runs on the tiny test encoders.

Nothing here is a timing: the run is checked for what it measures and records (every layout,
every setup, AdapterDrop for each k) and for the routed answers equalling the single-task
SavedModels'; the task-scaling section, run alone, for being added to an earlier record.
"""

import json
import os
import subprocess

from keras_adapters.hub import testing
from keras_adapters.models import testing as model_testing
from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multitask_serving.py")


def test_tiny_run_measures_every_layout_and_adapter_drop(tmp_path):
  hub_handle = testing.tiny_hub_handle()
  preprocess_handle = testing.tiny_preprocess_handle()
  artifact = model_testing.save_random_task_artifact(
      str(tmp_path / "airline"), hub_handle, preprocess_handle,
      label_names=["negative", "neutral", "positive"])
  output = tmp_path / "result.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, f"--hub_handle={hub_handle}",
       f"--preprocess_handle={preprocess_handle}", f"--artifact={artifact}",
       f"--output={output}", f"--work_dir={tmp_path / 'work'}", "--num_tasks=2",
       "--batch_size=7", "--seq_length=16", "--steps=1", "--warmup_steps=0",
       "--max_test_examples=10", "--scaling_methods=", "--nochild_processes"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  sizes = record["sizes"]
  assert 0 < sizes["multitask_bytes"] < sizes["single_task_bytes"]
  assert set(sizes["multitask_over_base_plus_artifacts"]) == {"value", "target", "met"}
  latency = record["latency"]
  assert set(latency["times"]) == {"routed signature, one call",
                                   "task signatures, one call per task",
                                   "single-task SavedModels, one call per task"}
  assert sum(latency["requests_per_task"].values()) == 7
  assert latency["max_abs_difference_routed_vs_single"] < 1e-5
  for layout in ("multitask", "single"):
    assert record["cold_load"][layout]["load_s"] > 0
    assert record["cold_load"][layout]["peak_rss_mib"] > 100
  drop = record["adapter_drop"]
  assert (drop["test_examples"], drop["num_layers"]) == (10, 2)
  assert [row["dropped_layers"] for row in drop["by_dropped_layers"]] == [0, 1, 2]
  assert all(0 <= row["accuracy"] <= 1 for row in drop["by_dropped_layers"])
  assert "Adapters dropped (first k layers)" in process.stdout
  assert (record["settings"]["num_tasks"], record["settings"]["random_tasks"]) == (2, True)


def test_task_scaling_alone_is_added_to_the_record_keeping_its_other_keys(tmp_path):
  hub_handle = testing.tiny_hub_handle()
  output = tmp_path / "result.json"
  output.write_text(json.dumps(dict(benchmark="multitask_serving", sizes=dict(multitask_bytes=1),
                                    provenance=dict(command="earlier"))))
  process = subprocess.run(
      warm_python.command(_SCRIPT, "--only_task_scaling", f"--hub_handle={hub_handle}",
       f"--preprocess_handle={testing.tiny_preprocess_handle()}", f"--output={output}",
       "--scaling_methods=lora", "--scaling_num_tasks=1,2", "--scaling_distinct_tasks=1",
       "--scaling_batch_size=5", "--seq_length=16", "--steps=1", "--warmup_steps=0"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  record = json.loads(output.read_text())
  assert record["sizes"] == dict(multitask_bytes=1)
  assert record["provenance"] == dict(command="earlier")
  scaling = record["task_scaling"]
  assert scaling["provenance"]["command"].startswith("bench/multitask_serving.py")
  assert scaling["machine"]["cpu_count"] > 0 and "cpu_model" in scaling["machine"]
  # (IA)³'s stacked layers take the same path; their mixed batches are checked exactly by
  # keras_adapters/serving/multitask_export_test.py.
  assert set(scaling["times"]) == {
      "lora, 1 tasks, one_task", "lora, 2 tasks, one_task", "lora, 2 tasks, mixed"}
  for method in ("lora",):
    rows = scaling["by_method"][method]
    assert [row["num_tasks"] for row in rows] == [1, 2]
    assert rows[0]["mixed_over_reference"] == rows[0]["one_task_over_reference"] == 1.0
    assert set(rows[1]["mixed_per_example_overhead"]) == {"value", "target", "met"}
    assert rows[1]["export_bytes"] > rows[0]["export_bytes"] > 0
  assert "Mixed batch ms / example" in process.stdout


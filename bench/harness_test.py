"""Fast tests of the benchmark helpers, on fake clocks and a stand-in child script."""

import json
import textwrap

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

import harness
from keras_adapters.hub import testing
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import errors


def test_machine_info_records_the_cpu():
  machine = harness.machine_info()
  assert machine["cpu_count"] >= 1
  assert {"cpu_model", "vector_extensions", "kernels"} <= set(machine)


def test_ratio_of_medians_against_target():
  adapters = harness.summarize_ms([0.06, 0.07, 0.065])["median_ms"]
  full = harness.summarize_ms([0.1, 0.1, 0.3])["median_ms"]
  assert harness.against_target(adapters / full, 0.70) == dict(
      value=pytest.approx(0.65), target=0.70, met=True)
  assert not harness.against_target(0.09, 0.08)["met"]


def test_peak_rss_is_at_least_this_process_size():
  assert harness.peak_rss_mib() > 10


def test_markdown_table_formats_cells():
  table = harness.markdown_table(["a", "b", "c", "d"], [["x", 1234567, 0.5, True]])
  assert table.splitlines() == ["| a | b | c | d |", "|---|---|---|---|",
                                "| x | 1,234,567 | 0.50 | yes |"]


def test_run_child_passes_flags_and_reads_the_last_json_line(tmp_path):
  script = tmp_path / "child.py"
  script.write_text(textwrap.dedent("""
      import json, sys
      print("noise before the report")
      print(json.dumps(sys.argv[1:]))
  """))
  assert harness.run_child(str(script), "train:full", {"steps": 3, "hub_handle": None}) == [
      "--child=train:full", "--steps=3"]


def test_run_child_raises_with_the_child_stderr(tmp_path):
  script = tmp_path / "child.py"
  script.write_text("import sys\nsys.exit('out of memory')\n")
  with pytest.raises(RuntimeError, match="status 1:\nout of memory"):
    harness.run_child(str(script), "train:full", {})


def test_run_child_refuses_what_its_child_refused_in_one_line(tmp_path):
  script = tmp_path / "child.py"
  script.write_text(textwrap.dedent("""
      from absl import flags
      from keras_adapters.cli import cli
      from keras_adapters.utils import errors
      flags.DEFINE_string("child", None, "What to measure.")
      def main(argv):
        raise errors.UsageError("--hub_handle=/nowhere is not a folder: give an export's.")
      cli.run(main)
  """))
  with pytest.raises(errors.UsageError) as refusal:
    harness.run_child(str(script), "train:full", {})
  assert str(refusal.value) == "--hub_handle=/nowhere is not a folder: give an export's."


def test_run_timing_child_measures_here_when_asked_with_the_flags_a_child_parses(
    tmp_path, monkeypatch):
  values = flags.FlagValues()
  flags.DEFINE_bool("child_processes", False, "", flag_values=values)
  flags.DEFINE_integer("steps", 1, "", flag_values=values)
  values(["bench.py"])
  monkeypatch.setattr(harness.flags, "FLAGS", values)
  missing = str(tmp_path / "missing.py")  # A child would fail: there is no script.
  measured = harness.run_timing_child(missing, "times", {"steps": 3, "hub_handle": None},
                                      lambda: {1: values.steps})
  assert measured == {"1": 3} and values.steps == 1  # Through JSON; the flag put back.
  # A child with its own environment, or every child when asked, runs in its own process.
  for env, child_processes in ((dict(ONEDNN_MAX_CPU_ISA="AVX2"), False), (None, True)):
    values.child_processes = child_processes
    with pytest.raises(RuntimeError, match="Child 'times' exited"):
      harness.run_timing_child(missing, "times", {}, dict, env)


def test_write_record_adds_how_it_was_made(tmp_path):
  path = tmp_path / "bench.json"
  harness.write_record(str(path), dict(benchmark="x", median_ms=1.5))
  record = json.loads(path.read_text())
  assert record["benchmark"] == "x" and record["median_ms"] == 1.5
  assert set(record["provenance"]) == {"command", "code", "packages", "date_utc", "machine"}


def _batch(length, seed):
  rng = np.random.default_rng(seed)
  shape = [4, length]
  inputs = dict(input_word_ids=tf.constant(rng.integers(0, 64, shape), tf.int32),
                input_mask=tf.ones(shape, tf.int32), input_type_ids=tf.zeros(shape, tf.int32))
  return inputs, tf.constant(rng.integers(0, 2, [4]), tf.int32)


def test_make_train_step_is_the_trainers_step_traced_once(monkeypatch):
  built = []
  step_function = trainer_lib.Trainer.step_function

  def recording_step_function(self):
    built.append(self)
    return step_function(self)

  monkeypatch.setattr(trainer_lib.Trainer, "step_function", recording_step_function)
  model = harness.build_model(testing.tiny_hub_handle(), "adapters", 2)
  trainable = {v.name: v.numpy() for v in model.trainable_variables}
  frozen = {v.name: v.numpy() for v in model.non_trainable_variables}
  step = harness.make_train_step(model, num_train_steps=10)
  assert len(built) == 1 and built[0].model is model
  # Per-batch padding: batches of several lengths, one trace. The learning rate warms up from
  # 0 at the first step, so the weights move from the second one on.
  for length in (8, 16, 8, 24):
    assert np.isfinite(step(*_batch(length, seed=length)).numpy())
  assert step.experimental_get_tracing_count() == 1
  assert all(np.array_equal(v.numpy(), frozen[v.name]) for v in model.non_trainable_variables)
  assert any(not np.array_equal(v.numpy(), trainable[v.name])
             for v in model.trainable_variables)

"""Where a training step's time goes: TensorFlow profiler op times for each tuning policy.

`adapter_speed.py` and `lora_speed.py` give wall-clock step times; this explains them. For
`adapters` (m=64), `lora` (r=8 on query and value), `layer_norm` and `full` tuning on one batch
of random token ids, it traces a few training steps with `tf.profiler` and sums, per step, the
time TensorFlow's compute threads spent in each op type (`_MklEinsum`, `_MklMatMul`, `Mul`,
`RandomUniform`, ...) and in the forward pass and update against the backward pass. Op time
adds up the work of every thread, so set against wall time it also shows how much of a step ran
in parallel. Each setup runs in its own child process. On an otherwise idle machine:

  python bench/op_profile.py

Results go to bench/results/op_profile.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile

from absl import flags
import tensorflow as tf

import harness
import profiler_trace

_NUM_CLASSES = 3
_SETUPS = ("adapters", "lora", "layer_norm", "full")
_TOP_OP_TYPES = 8

harness.define_batch_benchmark_flags(
    steps=3, steps_help="Profiled steps per setup.", output_name="op_profile.json",
    child_help="profile one setup and print its JSON.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")


def _profile(setup):
  """Traces `--steps` training steps of one setup; returns its op times and wall time."""
  model = harness.build_model(FLAGS.hub_handle, setup, _NUM_CLASSES,
                              seq_length=FLAGS.seq_length)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
  harness.time_calls(lambda: step(inputs, labels).numpy(), steps=1,
                     warmup_steps=FLAGS.warmup_steps)
  with tempfile.TemporaryDirectory() as log_dir:
    tf.profiler.experimental.start(log_dir)
    seconds = harness.time_calls(lambda: step(inputs, labels).numpy(), steps=FLAGS.steps,
                                 warmup_steps=0)
    tf.profiler.experimental.stop()
    space = profiler_trace.read_trace(log_dir)
  return dict(setup=setup, **harness.parameter_counts(model),
              wall_ms=harness.summarize_ms(seconds)["median_ms"],
              **profiler_trace.op_times(space, FLAGS.steps))


def _table(record):
  """Op time per setup, the largest op types, and the op-time and wall-time ratios."""
  setups = record["setups"]
  op_types = list(setups["full"]["by_op_type"])[:_TOP_OP_TYPES]
  rows = [[setup, result["wall_ms"], result["total_ms"], result["by_pass"].get("backward", 0.0)]
          + [result["by_op_type"].get(op_type, 0.0) for op_type in op_types]
          for setup, result in setups.items()]
  table = harness.markdown_table(
      ["Setup", "Wall ms", "Op ms", "Backward op ms"] + [f"{t} ms" for t in op_types], rows)
  ratios = harness.markdown_table(
      ["Ratio to full", "Op time", "Wall time"],
      [[setup, ratio["op_time"], ratio["wall_time"]]
       for setup, ratio in record["ratios_to_full"].items()])
  return table + "\n\n" + ratios


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    harness.report_to_parent(_profile(FLAGS.child))
    return
  harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  setups = {}
  for setup in _SETUPS:
    print(f"Profiling {setup}...", flush=True)
    setups[setup] = harness.run_child(os.path.abspath(__file__), setup, forwarded)
  full = setups["full"]
  record = dict(
      benchmark="op_profile", machine=harness.machine_info(),
      settings=dict(forwarded, adapter_size=harness.ADAPTER_SIZE, num_classes=_NUM_CLASSES),
      setups=setups,
      ratios_to_full={setup: dict(op_time=result["total_ms"] / full["total_ms"],
                                  wall_time=result["wall_ms"] / full["wall_ms"])
                      for setup, result in setups.items() if setup != "full"})
  harness.write_record(FLAGS.output, record)
  print(_table(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

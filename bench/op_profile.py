"""Where a training step's time goes: TensorFlow profiler op times for each tuning policy.

`adapter_speed.py` gives wall-clock step times; this explains them. For `adapters` (m=64),
`layer_norm` and `full` tuning on one batch of random token ids, it traces a few training steps
with `tf.profiler` and sums, per step, the time TensorFlow's compute threads spent in each op
type (`_MklEinsum`, `_MklMatMul`, `Mul`, `RandomUniform`, ...) and in the forward pass and
update against the backward pass. Op time adds up the work of every thread, so set against
wall time it also shows how much of a step ran in parallel. Each setup runs in its own child
process. On an otherwise idle machine:

  python bench/op_profile.py

Results go to bench/results/op_profile.json and a Markdown table on stdout.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
import collections
import glob
import tempfile

from absl import app
from absl import flags
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import harness
import keras_adapters
from keras_adapters.utils import atomic_io

_NUM_CLASSES = 3
_SETUPS = ("adapters", "layer_norm", "full")
# Profiler events that enclose ops rather than being one.
_ENCLOSING_EVENTS = frozenset({"ExecutorState::Process", "Process", "ParallelFor"})
_COMPUTE_LINE_PREFIX = "tf_Compute"
_TOP_OP_TYPES = 8

flags.DEFINE_integer("steps", 3, "Profiled steps per setup.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 3, "Unprofiled steps first (tracing, allocation).",
                     lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Examples per batch.", lower_bound=1)
flags.DEFINE_integer("seq_length", 128, "Tokens per example.", lower_bound=2)
flags.DEFINE_string("hub_handle", None,
                    "TF Hub BERT encoder to profile; default: the embedded all-MiniLM-L6-v2.")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "op_profile.json"),
                    "Where to write the results (JSON).")
flags.DEFINE_string("child", None, "Internal: profile one setup and print its JSON.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")


def op_times(space, steps):
  """Milliseconds per step by op type and by pass, summed over TensorFlow's compute threads.

  Args:
    space: An `XSpace` proto, as `tf.profiler` writes it (`*.xplane.pb`).
    steps: Steps the trace covers; the sums are divided by it.

  Returns:
    `total_ms`, `by_op_type` (op type → ms, largest first) and `by_pass` (`backward`: ops of
    the gradient computation, `forward_and_update`: the rest).
  """
  by_type = collections.Counter()
  by_pass = collections.Counter()
  for plane in space.planes:
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    for line in plane.lines:
      if not line.name.startswith(_COMPUTE_LINE_PREFIX):
        continue
      for event in line.events:
        name = names.get(event.metadata_id, "")
        if name in _ENCLOSING_EVENTS:
          continue
        ms = event.duration_ps / 1e9 / steps
        # Op events are named "<op name>:<op type>"; the tape prefixes gradient ops.
        by_type[name.rsplit(":", 1)[-1]] += ms
        by_pass["backward" if name.startswith("gradient_tape/") else "forward_and_update"] += ms
  return dict(total_ms=sum(by_type.values()), by_op_type=dict(by_type.most_common()),
              by_pass=dict(by_pass))


def _profile(setup):
  """Traces `--steps` training steps of one setup; returns its op times and wall time."""
  model = harness.build_model(FLAGS.hub_handle, setup, _NUM_CLASSES)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
  harness.time_calls(lambda: step(inputs, labels).numpy(), steps=1,
                     warmup_steps=FLAGS.warmup_steps)
  with tempfile.TemporaryDirectory() as log_dir:
    tf.profiler.experimental.start(log_dir)
    seconds = harness.time_calls(lambda: step(inputs, labels).numpy(), steps=FLAGS.steps,
                                 warmup_steps=0)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
  return dict(setup=setup, **harness.parameter_counts(model),
              wall_ms=harness.summarize_ms(seconds)["median_ms"],
              **op_times(space, FLAGS.steps))


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
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if FLAGS.child:
    harness.report_to_parent(_profile(FLAGS.child))
    return
  FLAGS.hub_handle = FLAGS.hub_handle or keras_adapters.default_hub_handle()
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
  atomic_io.write_json(FLAGS.output, record)
  print(_table(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)

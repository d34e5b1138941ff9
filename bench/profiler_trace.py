"""Sums a TensorFlow profiler trace (`*.xplane.pb`) into op time per op type and per pass."""

import collections
import glob
import os

from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Profiler events that enclose ops rather than being one.
_ENCLOSING_EVENTS = frozenset({"ExecutorState::Process", "Process", "ParallelFor"})
# The threads that run TensorFlow ops; others hold Python and the step as a whole.
_COMPUTE_LINE_PREFIX = "tf_Compute"


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
        # Op events are named "<op name>:<op type>"; the tape names gradient ops
        # "gradient_tape/...", under the names of the functions that enclose them.
        by_type[name.rsplit(":", 1)[-1]] += ms
        by_pass["backward" if "gradient_tape/" in name else "forward_and_update"] += ms
  return dict(total_ms=sum(by_type.values()), by_op_type=dict(by_type.most_common()),
              by_pass=dict(by_pass))


def read_trace(log_dir):
  """The `XSpace` of the one trace that `tf.profiler.experimental` wrote under `log_dir`."""
  (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  return space

"""Sums a TensorFlow profiler trace (`*.xplane.pb`) into op time per op type and per pass."""

import collections
import glob
import os

from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Profiler events that enclose ops rather than being one.
_ENCLOSING_EVENTS = frozenset({"ExecutorState::Process", "Process", "ParallelFor"})
# The start of an asynchronous op (a call of an XLA-compiled function, such as the one-pass
# GELU and LayerNorm): named by its `name` and `kernel_type` stats, and enclosing the events of
# the compiled kernels it runs, which are its time and not ops of their own.
_ASYNC_START = "ExecutorState::ProcessAsync::Start"
# The threads that run TensorFlow ops; others hold Python and the step as a whole.
_COMPUTE_LINE_PREFIX = "tf_Compute"


def op_times(space, steps):
  """Milliseconds per step by op type and by pass, summed over TensorFlow's compute threads.

  An event within a counted op's span on the same thread is part of that op (an XLA call's
  kernels), not counted again.

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
      op_end = None  # Where the last op counted on this line ends.
      for event in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
        name = names.get(event.metadata_id, "")
        end = event.offset_ps + event.duration_ps
        if name in _ENCLOSING_EVENTS or (op_end is not None and end <= op_end):
          continue
        op_end = end
        # Op events are named "<op name>:<op type>"; the tape names gradient ops
        # "gradient_tape/...", under the names of the functions that enclose them.
        op_name, op_type = (_async_op(plane, event) if name == _ASYNC_START
                            else (name, name.rsplit(":", 1)[-1]))
        ms = event.duration_ps / 1e9 / steps
        by_type[op_type] += ms
        by_pass["backward" if "gradient_tape/" in op_name else "forward_and_update"] += ms
  return dict(total_ms=sum(by_type.values()), by_op_type=dict(by_type.most_common()),
              by_pass=dict(by_pass))


def _async_op(plane, event):
  """`(op name, op type)` of an asynchronous op's start event, from its stats."""
  stats = {plane.stat_metadata[stat.metadata_id].name:
           plane.stat_metadata[stat.ref_value].name if stat.ref_value else stat.str_value
           for stat in event.stats}
  return stats.get("name", ""), stats.get("kernel_type", "async op")


def read_trace(log_dir):
  """The `XSpace` of the one trace that `tf.profiler.experimental` wrote under `log_dir`."""
  (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  return space

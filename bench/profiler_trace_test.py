"""Tests of `profiler_trace`, on a hand-made profiler trace."""

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import profiler_trace


def _space(events_by_line):
  """An XSpace with one plane; `events_by_line` maps a line name to (event name, ps) pairs."""
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  ids = {}
  for line_name, events in events_by_line.items():
    line = plane.lines.add(name=line_name)
    for name, duration_ps in events:
      if name not in ids:
        ids[name] = len(ids) + 1
        plane.event_metadata[ids[name]].name = name
      line.events.add(metadata_id=ids[name], duration_ps=duration_ps)
  return space


def test_op_times_sum_compute_threads_by_type_and_pass_per_step():
  space = _space({
      "tf_Compute/1": [("ExecutorState::Process", 10**12),
                       ("model/layer_0/query/einsum/Einsum:_MklEinsum", 4 * 10**9),
                       ("gradient_tape/model/layer_0/query/einsum/Einsum:_MklEinsum", 6 * 10**9)],
      "tf_Compute/2": [("ParallelFor", 10**12), ("model/dropout/random:RandomUniform", 2 * 10**9)],
      "python": [("step", 10**12)],
  })
  times = profiler_trace.op_times(space, steps=2)
  assert times["total_ms"] == pytest.approx(6.0)
  assert times["by_op_type"] == pytest.approx({"_MklEinsum": 5.0, "RandomUniform": 1.0})
  assert list(times["by_op_type"]) == ["_MklEinsum", "RandomUniform"]
  assert times["by_pass"] == pytest.approx({"forward_and_update": 3.0, "backward": 3.0})

"""Tests of `profiler_trace`, on a hand-made profiler trace."""

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import profiler_trace


def _space(events_by_line):
  """An XSpace with one plane; `events_by_line` maps a line name to its events, each
  `(event name, ps)`, one after another, or `(event name, ps, offset ps, stats)`."""
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  ids = {}

  def metadata_id(metadata, name):
    if name not in ids:
      ids[name] = len(ids) + 1
      metadata[ids[name]].name = name
    return ids[name]

  for line_name, events in events_by_line.items():
    line = plane.lines.add(name=line_name)
    offset_ps = 0
    for name, duration_ps, *placed in events:
      offset_ps, stats = placed if placed else (offset_ps, {})
      event = line.events.add(metadata_id=metadata_id(plane.event_metadata, name),
                              offset_ps=offset_ps, duration_ps=duration_ps)
      for key, value in stats.items():
        event.stats.add(metadata_id=metadata_id(plane.stat_metadata, key),
                        ref_value=metadata_id(plane.stat_metadata, value))
      offset_ps += duration_ps
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


def test_an_xla_call_counts_once_as_its_async_op_with_its_kernels_inside():
  """An XLA-compiled function's call is one op, named and typed by its stats: the kernels it
  runs, nested in it on the same thread, are not counted again."""
  call = "gradient_tape/model/layer_norm/cond/PartitionedCall"
  space = _space({"tf_Compute/1": [
      ("ExecutorState::ProcessAsync::Start", 8 * 10**9, 0,
       {"name": call, "kernel_type": "PartitionedCall"}),
      ("call", 5 * 10**9, 10**9, {}), ("add_multiply_fusion.clone", 2 * 10**9, 2 * 10**9, {}),
      ("model/dense/MatMul:_MklMatMul", 4 * 10**9, 8 * 10**9, {})]})
  times = profiler_trace.op_times(space, steps=1)
  assert times["by_op_type"] == pytest.approx({"PartitionedCall": 8.0, "_MklMatMul": 4.0})
  assert times["by_pass"] == pytest.approx({"backward": 8.0, "forward_and_update": 4.0})

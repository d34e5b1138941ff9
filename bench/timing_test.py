"""Tests of the timing helpers, on fake clocks."""

import itertools

import pytest

import timing


def _fake_clock(durations):
  """A clock whose successive timed calls take `durations` seconds, 1 s apart."""
  ticks = itertools.accumulate([0.0] + [d for duration in durations for d in (duration, 1.0)])
  return lambda: next(ticks)


def test_time_calls_times_only_the_calls_after_warmup():
  calls = []
  seconds = timing.time_calls(lambda: calls.append(1), steps=3, warmup_steps=2,
                               clock=_fake_clock([0.5, 0.25, 2.0]))
  assert len(calls) == 5
  assert seconds == [0.5, 0.25, 2.0]


@pytest.mark.parametrize("steps, warmup_steps", [(0, 1), (1, -1)])
def test_time_calls_rejects_bad_counts(steps, warmup_steps):
  with pytest.raises(ValueError, match="steps >= 1"):
    timing.time_calls(lambda: None, steps=steps, warmup_steps=warmup_steps)


def test_summarize_ms_takes_the_median_not_the_mean():
  summary = timing.summarize_ms([0.010, 0.012, 0.011, 0.500])
  assert summary["median_ms"] == pytest.approx(11.5)
  assert summary["min_ms"] == pytest.approx(10.0)
  assert summary["max_ms"] == pytest.approx(500.0)
  assert summary["times_ms"] == pytest.approx([10.0, 12.0, 11.0, 500.0])


def test_time_interleaved_takes_turns_after_warming_every_setup():
  calls = []
  seconds = timing.time_interleaved(
      {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2,
      warmup_steps=1, clock=_fake_clock([0.5, 0.25, 2.0, 4.0]))
  assert calls == ["a", "b", "a", "b", "a", "b"]
  assert seconds == {"a": [0.5, 2.0], "b": [0.25, 4.0]}


def test_time_interleaved_rejects_bad_counts():
  with pytest.raises(ValueError, match="rounds >= 1"):
    timing.time_interleaved({"a": lambda: None}, rounds=0, warmup_steps=0)


def test_compare_in_turns_gives_each_pairs_ratio_and_table_row():
  fns = {name: lambda: None for name in ("x/new", "x/old", "y/new", "y/old")}
  timings, ratios, rows = timing.compare_in_turns(
      fns, pairs=["x", "y"], new="new", old="old", rounds=1, warmup_steps=0,
      clock=_fake_clock([1.0, 4.0, 3.0, 2.0]))
  assert timings["x/old"]["median_ms"] == pytest.approx(4000.0)
  assert ratios == pytest.approx({"x": 0.25, "y": 1.5})
  # Whole seconds on the fake clock: every figure is exact.
  assert rows == [["x", 4000.0, 1000.0, 0.25], ["y", 2000.0, 3000.0, 1.5]]

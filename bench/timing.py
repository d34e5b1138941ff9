"""Timing calls, alone or in turns, and summarising them: standard library only, so that a
benchmark child on Keras 3 or JAX times its steps as the Keras 2 benchmarks do without loading
Keras 2 (bench/harness.py re-exports these)."""

import statistics
import time
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple


def time_calls(fn: Callable[[], Any], *, steps: int, warmup_steps: int,
               clock: Callable[[], float] = time.perf_counter) -> List[float]:
  """Calls `fn` `warmup_steps` times untimed, then `steps` times timed.

  Warm-up calls absorb tracing, graph optimisation and first-touch allocation, which a
  long run pays once.

  Args:
    fn: The work to time. It must return only once the work is done (e.g. by converting
      its result to NumPy), as TensorFlow may run ops asynchronously.
    steps: Timed calls, at least 1.
    warmup_steps: Untimed calls before them, at least 0.
    clock: Seconds as a float; injectable for tests.

  Returns:
    The seconds each timed call took.

  Raises:
    ValueError: If `steps` < 1 or `warmup_steps` < 0.
  """
  if steps < 1 or warmup_steps < 0:
    raise ValueError(f"Need steps >= 1 and warmup_steps >= 0, got {steps} and {warmup_steps}.")
  for _ in range(warmup_steps):
    fn()
  seconds = []
  for _ in range(steps):
    start = clock()
    fn()
    seconds.append(clock() - start)
  return seconds


def time_interleaved(fns: Mapping[str, Callable[[], Any]], *, rounds: int, warmup_steps: int,
                     clock: Callable[[], float] = time.perf_counter) -> Dict[str, List[float]]:
  """Times several setups in turns (A, B, C, A, B, C, ...) after warming each up.

  A ratio of two setups timed one after the other absorbs whatever else the machine did in
  between (another process, frequency scaling, a noisy neighbour): seen here, the same
  inference overhead measured 23% in back-to-back processes and 7% in turns. Taking turns
  spreads such drift over every setup alike.

  Args:
    fns: Setup name → its work, as for `time_calls`.
    rounds: Timed calls of each setup, at least 1.
    warmup_steps: Untimed calls of each setup first, at least 0.
    clock: Seconds as a float; injectable for tests.

  Returns:
    Setup name → the seconds each of its timed calls took, in order.
  """
  if rounds < 1 or warmup_steps < 0:
    raise ValueError(f"Need rounds >= 1 and warmup_steps >= 0, got {rounds} and {warmup_steps}.")
  for fn in fns.values():
    for _ in range(warmup_steps):
      fn()
  seconds = {name: [] for name in fns}
  for _ in range(rounds):
    for name, fn in fns.items():
      seconds[name].extend(time_calls(fn, steps=1, warmup_steps=0, clock=clock))
  return seconds


def summarize_ms(seconds: Sequence[float]) -> Dict[str, Any]:
  """Median, min and max of per-call times, in milliseconds, with every time kept.

  The median is the headline figure: it ignores the odd call slowed by the OS or a garbage
  collection, which the mean would not.

  Args:
    seconds: Per-call times in seconds, at least one.

  Returns:
    `median_ms`, `min_ms`, `max_ms` and `times_ms` (all calls, in order).
  """
  if not seconds:
    raise ValueError("No timings to summarize.")
  times_ms = [1e3 * s for s in seconds]
  return dict(median_ms=statistics.median(times_ms), min_ms=min(times_ms),
              max_ms=max(times_ms), times_ms=times_ms)



def compare_in_turns(fns: Mapping[str, Callable[[], Any]], *, pairs: Sequence[str], new: str,
                     old: str, rounds: int, warmup_steps: int,
                     clock: Callable[[], float] = time.perf_counter
                     ) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, float], List[List[Any]]]:
  """Times `fns`, named `"<pair>/<new>"` and `"<pair>/<old>"` for each of `pairs`, in turns
  (`time_interleaved`), and compares each pair's two ways.

  Returns:
    `(timings, ratios, rows)`: each setup's `summarize_ms`; each pair's median new / median
    old; and a table row per pair, `[pair, old median ms, new median ms, ratio]`.
  """
  seconds = time_interleaved(fns, rounds=rounds, warmup_steps=warmup_steps, clock=clock)
  timings = {name: summarize_ms(values) for name, values in seconds.items()}
  medians = {name: timing["median_ms"] for name, timing in timings.items()}
  ratios = {pair: medians[f"{pair}/{new}"] / medians[f"{pair}/{old}"] for pair in pairs}
  rows = [[pair, medians[f"{pair}/{old}"], medians[f"{pair}/{new}"], ratios[pair]]
          for pair in pairs]
  return timings, ratios, rows

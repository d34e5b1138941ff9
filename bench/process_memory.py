"""A benchmark process's memory: resident now, its high-water mark, and a guard that stops it
before the machine runs out.

Standard library only: both the project's benchmarks and bench/peer_step.py (in the PyTorch
harness's venv) use it.
"""
import json
import os
import resource
import threading
import time

# What the guard leaves the rest of the machine: the kernel's out-of-memory killer would
# otherwise stop this process (or another) without a word, and the row would be lost.
HEADROOM_MIB = 1536


def resident_mib():
  """This process's resident memory now (Linux's VmRSS), in MiB; `None` elsewhere."""
  return _status_mib("/proc/self/status", "VmRSS:")


def peak_rss_mib():
  """Peak resident memory of this process so far (Linux's VmHWM, which counts the memory
  resident now, where `ru_maxrss` may lag it), in MiB."""
  peak = _status_mib("/proc/self/status", "VmHWM:")
  if peak is not None:
    return peak
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # macOS: bytes.


def machine_mib():
  """The machine's memory (Linux's MemTotal), in MiB; `None` elsewhere."""
  return _status_mib("/proc/meminfo", "MemTotal:")


def guard(limit_mib=None, interval_s=0.02, **report):
  """Stops this process when its resident memory passes `limit_mib` (default: the machine's
  less `HEADROOM_MIB`), after printing `{"out_of_memory": true, "resident_mb": ...,
  "limit_mb": ..., **report}` as its last line of stdout, the line a benchmark's parent reads.
  No-op off Linux."""
  limit_mib = limit_mib or (machine_mib() or 0) - HEADROOM_MIB
  if resident_mib() is None or limit_mib <= 0:
    return

  def watch():
    while True:
      resident = resident_mib()
      if resident > limit_mib:
        print(json.dumps(dict(out_of_memory=True, resident_mb=resident, limit_mb=limit_mib,
                              **report)), flush=True)
        os._exit(0)  # pylint: disable=protected-access
      time.sleep(interval_s)

  threading.Thread(target=watch, name="memory_guard", daemon=True).start()


def _status_mib(path, key):
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.startswith(key):
          return int(line.split()[1]) / 1024
  except OSError:
    pass
  return None

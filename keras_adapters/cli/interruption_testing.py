"""What the tests of a stopped script share: SIGTERM sent to a training child once its first
checkpoint is written, as a scheduler stops a job mid-training."""

import os
import signal
import time


def sigterm_after_checkpoint(child, checkpoint, timeout):
  """Waits (up to `timeout` seconds) until the file `checkpoint` exists or `child` (a
  `subprocess.Popen` with `stderr=PIPE`) has ended, sends it SIGTERM and returns what it
  printed on stderr once it exits (within `timeout` seconds)."""
  deadline = time.time() + timeout
  while not os.path.exists(checkpoint) and child.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  child.send_signal(signal.SIGTERM)
  _, stderr = child.communicate(timeout=timeout)
  return stderr

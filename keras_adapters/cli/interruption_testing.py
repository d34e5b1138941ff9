"""What the tests of a stopped script share: SIGTERM sent to a training child once its first
checkpoint is written, as a scheduler stops a job mid-training."""

import os
import signal
import subprocess
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


def stopped_by_sigterm(test, command, checkpoint, timeout, **popen_options):
  """Starts `command`, stops it by SIGTERM once `checkpoint` exists and checks, through `test`
  (a `unittest.TestCase`), that it ended with status 143, no traceback and `checkpoint` kept;
  returns the last line it printed on stderr (its one-line message)."""
  child = subprocess.Popen(command, text=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, **popen_options)
  test.addCleanup(child.kill)
  stderr = sigterm_after_checkpoint(child, checkpoint, timeout)
  test.assertEqual(child.returncode, 128 + signal.SIGTERM, stderr[-3000:])
  test.assertNotIn("Traceback", stderr)
  test.assertTrue(os.path.exists(checkpoint))
  return stderr.strip().splitlines()[-1]

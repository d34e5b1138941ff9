"""Stopping a training loop by SIGTERM or Ctrl-C at a step boundary, after its checkpoint.

SIGTERM is what schedulers, GKE and Cloud TPU send before stopping a job. A handler that
raises where the signal lands is not enough: the exception can surface inside code that
swallows every error (a bare `except:` in a traced function, an attribute lookup made from
C), and the run then goes on to its end with status 0. So the loops record the request
(`requested`) and stop themselves after their next step's checkpoint
(`TrainingInterrupted`), where nothing can swallow it.
"""

import contextlib
import signal
import threading

from absl import logging


class TrainingInterrupted(KeyboardInterrupt):
  """SIGTERM or Ctrl-C stopped training after saving the current step's checkpoint.

  A `KeyboardInterrupt`, so that code that handles Ctrl-C handles it too.

  Attributes:
    exit_status: The shell's status for the signal: 128 + its number.
  """

  def __init__(self, signal_number: int, step: int, num_steps: int, checkpoint: str):
    super().__init__(
        f"Stopped by {signal.Signals(signal_number).name} at step {step} of {num_steps}, "
        f"saved in {checkpoint}: rerun the same command to resume from it.")
    self.exit_status = 128 + signal_number


@contextlib.contextmanager
def requested(enabled: bool = True):
  """Yields a list that SIGTERM and a first Ctrl-C append their number to, instead of ending
  the process; a second Ctrl-C raises `KeyboardInterrupt` at once. The handlers before are
  restored at the end. Signals are only handled in the main thread: elsewhere, and when not
  `enabled`, nothing changes."""
  requests = []
  if not enabled or threading.current_thread() is not threading.main_thread():
    yield requests
    return

  def request_stop(signal_number, frame):
    del frame
    if requests and signal_number == signal.SIGINT:
      raise KeyboardInterrupt
    requests.append(signal_number)
    if signal_number == signal.SIGINT:  # Someone waits at the terminal: say it is heard.
      logging.warning("Ctrl-C: stopping after this step, once its checkpoint is saved "
                      "(Ctrl-C again stops at once).")

  previous = {number: signal.signal(number, request_stop)
              for number in (signal.SIGTERM, signal.SIGINT)}
  try:
    yield requests
  finally:
    for number, handler in previous.items():
      signal.signal(number, handler)

"""How an experiment script ends when it is stopped: one line saying how to resume.

Ctrl-C, or SIGTERM (what a scheduler sends before stopping a job), ends the script with one
line on stderr and the shell's status for the signal (130, 143), never a traceback. During
training the trainer saves the step under way first and names its checkpoint
(`stop_requests.TrainingInterrupted`); at any other time what was saved is kept (results,
manifests and exports are written atomically), and rerunning the command continues.
"""

import os
import signal
import sys

# What a stop outside the training loop (or a second Ctrl-C) says.
_ELSEWHERE = "Stopped by {signal}; what was saved is kept: rerun the same command to continue."


def call(main, argv):
  """Returns `main(argv)`; on Ctrl-C or SIGTERM, prints one line and exits."""
  previous = signal.signal(signal.SIGTERM, _raise_interrupt)
  try:
    return main(argv)
  except KeyboardInterrupt as stop:
    # The trainer's `TrainingInterrupted` names the step and checkpoint; a bare Ctrl-C is
    # a KeyboardInterrupt without a message.
    message = str(stop) or _ELSEWHERE.format(signal="Ctrl-C")
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(getattr(stop, "exit_status", 128 + signal.SIGINT))
  finally:
    signal.signal(signal.SIGTERM, previous)


class _Terminated(KeyboardInterrupt):
  """SIGTERM outside the training loop, stopping like Ctrl-C."""
  exit_status = 128 + signal.SIGTERM


def _raise_interrupt(signal_number, frame):
  del signal_number, frame
  raise _Terminated(_ELSEWHERE.format(signal="SIGTERM"))

"""`python warm_python_client.py script.py args...`: runs `python script.py args...` (or
`-m module ...`, `-c code ...`) as a fork of the warm Python server named by
`KERAS_ADAPTERS_WARM_PYTHON` (`warm_python`), or of the server that one names for the run's
environment; when no server answers, or none is left for that environment, it execs that very
command.

It stands in for the script's process: its standard streams, working folder and environment
are the run's; the signals it is sent (SIGTERM, SIGINT, ...) go to the fork; it ends with the
fork's exit status, or dies of the fork's signal; if it is killed, the fork kills itself.

Standard library only, started with `-S -E`: it must cost milliseconds, not a TensorFlow import.
"""

import json
import os
import signal
import socket
import struct
import sys
import time

ADDRESS_VARIABLE = "KERAS_ADAPTERS_WARM_PYTHON"
# How long a run waits for a server still importing TensorFlow (its address appears when ready).
_READY_TIMEOUT_S = 180
_FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                      signal.SIGUSR1, signal.SIGUSR2)


def main():
  args = sys.argv[1:]
  address = os.environ.get(ADDRESS_VARIABLE)
  status = _run_forked(address, args) if address and _is_program(args) else None
  if status is None:
    os.execv(sys.executable, [sys.executable, *args])
  end_like(status)


def _is_program(args):
  """Whether `args` is `script.py ...`, `-m module ...` or `-c code ...`: other interpreter
  options run a real Python."""
  if args[:1] in (["-m"], ["-c"]):
    return len(args) > 1
  return bool(args) and args[0].endswith(".py") and not args[0].startswith("-")


def _run_forked(address, args):
  """The exit status of `args` run as a fork of the server at `address`; None when no server
  is ready or it refuses (the run's environment differs in what TensorFlow read as it loaded)."""
  request = json.dumps(dict(argv=args, cwd=os.getcwd(), env=dict(os.environ),
                            pgid=os.getpgid(0))).encode()
  reply = ["server", address]
  while reply[0] == "server":  # The first server names another, for this environment.
    connection = _connect(reply[1])
    if connection is None:
      return None
    socket.send_fds(connection, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    replies = connection.makefile("r")
    reply = replies.readline().split() or ["exec"]
  if reply[0] != "pid":
    return None
  pid = int(reply[1])
  for number in _FORWARDED_SIGNALS:
    signal.signal(number, lambda received, _: _forward(pid, received))
  reply = replies.readline().split()
  # The server ends without a status only when it is killed itself: so was the fork, with it.
  return int(reply[1]) if reply else -signal.SIGKILL


def _connect(address):
  deadline = time.monotonic() + _READY_TIMEOUT_S
  while not os.path.exists(address):
    if time.monotonic() > deadline or not _server_alive(address):
      return None
    time.sleep(0.05)
  connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    connection.connect(address)
  except OSError:
    return None
  return connection


def _server_alive(address):
  """False once the server's process has ended: failed or killed before it listens. Its pid
  is written beside its address as it starts."""
  try:
    with open(address + ".pid", encoding="ascii") as pid_file:
      pid = int(pid_file.read())
  except (OSError, ValueError):  # Not written yet.
    return True
  return is_alive(pid)


def is_alive(pid):
  """Whether process `pid` runs: it exists and, where /proc tells, is no zombie either (one
  that ended and that its parent has not waited for)."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
      return stat.read().rpartition(")")[2].split()[0] != "Z"
  except (OSError, IndexError):
    return True


def _forward(pid, number):
  try:
    os.kill(pid, number)
  except ProcessLookupError:  # Already ended: its status is on its way.
    pass


def end_like(status):
  """Exits with `status`, or dies of the signal a negative `status` names, as the fork did."""
  if status >= 0:
    os._exit(status)  # pylint: disable=protected-access
  signal.signal(-status, signal.SIG_DFL)
  os.kill(os.getpid(), -status)
  os._exit(128 - status)  # pylint: disable=protected-access  (a signal that does not kill)


if __name__ == "__main__":
  main()

"""A Python that has imported TensorFlow once and forks a process for each program a test runs.

The tests run about a hundred programs (`experiments/*.py`, `bench/*.py`, `python -c`) in
processes of their own, as users run them; each fresh Python spent about 4 s of CPU importing
TensorFlow before its first line of work. `start()` starts a server that imports it once; then
`command(*args)` is what `[sys.executable, *args]` is (`script.py ...`, `-m module ...` or
`-c code ...`), a command for `subprocess.run` or `Popen` with any `env`, `cwd`, pipes and
signals, whose process is a fork of that server (`warm_python_client.py` says how it stands in
for the process).

A fork is a fresh process but for what was fixed when TensorFlow loaded: the variables read
then (oneDNN's, `TF_CPP_*`, `PYTHON*`, `TF_USE_LEGACY_KERAS`...). So a server forks only the
runs whose environment differs from its own in variables read later (`_READ_AFTER_IMPORT`);
the first server sends the others to a server it starts for their environment. A program that
may set such a variable itself before TensorFlow loads (`_as_tensorflow_loads`) runs a real
Python, and so does every run where no server answers; a command line of this project, that
sets TensorFlow's log level and Keras 3's backend first, forks from a server started with them
set so. What TensorFlow prints as it loads goes to the server's log, not to the run's stderr,
and the modules it loaded are there before the program's first line: a test of what a program
prints as it starts, or of what it must import, runs `[sys.executable, ...]`.
"""

import ast
import atexit
import collections
import functools
import json
import os
import random
import runpy
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
import types

from keras_adapters.utils import startup_environment
from keras_adapters.utils import warm_python_client

_CLIENT = os.path.abspath(warm_python_client.__file__)
# The command lines' modules (`keras_adapters.cli`), by path: the server imports none of them.
_CLI_FOLDER = os.path.join(os.path.dirname(os.path.dirname(_CLIENT)), "cli")
_MODULE = "keras_adapters.utils.warm_python"  # Its name, also where it runs as `__main__`.
ADDRESS_VARIABLE = warm_python_client.ADDRESS_VARIABLE
OFF = "off"
# What a fork's environment may change: variables read after TensorFlow and absl load, by the
# scripts, TensorFlow's runtime (started after the fork), Keras 3 (not loaded by the server),
# XLA (TensorFlow's and JAX's read `XLA_FLAGS` as they first compile, or start JAX's devices)
# or the tests' stand-ins and runner (pytest sets some while a test runs); and those that
# scikit-learn (`KMP_*`) and OpenCV (`LD_LIBRARY_PATH`, for the processes it starts) set as
# they load in a test's process, which a fork that loads them sets the same.
_READ_AFTER_IMPORT = frozenset((
    ADDRESS_VARIABLE, "COLUMNS", "CUDA_VISIBLE_DEVICES", "HOME", "KERAS_ADAPTERS_CACHE",
    "KERAS_BACKEND", "KERAS_HOME", "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK",
    "LD_LIBRARY_PATH", "LINES", "OLDPWD", "PATH", "PEER_DATA", "PWD", "PYTEST_CURRENT_TEST",
    "TF_CONFIG", "TMPDIR", "XLA_FLAGS"))
# What the server imports, keras_adapters first (it chooses TensorFlow's CPU kernels); then
# the libraries every command line imports after TensorFlow, that load no Keras 3: a second of
# each command line's start. (TF Hub and TFDS define their own flags, `--tfhub_cache_dir`...,
# as they load: a fork has them, as every command line has.)
_PRELOADED = ("keras_adapters", "tensorflow", "absl.app", "scipy.stats", "sklearn.metrics",
              "tensorflow_hub", "tensorflow_text", "tensorflow_datasets",
              "official.modeling.optimization")
# The servers a first server keeps for runs in other environments (each holds ~1 GB): the
# tests use more (command lines at their own log level, Keras 3 on TensorFlow and on JAX, an
# added PYTHONPATH...), and a rarer one's server is started again; more would crowd the
# memory beside two pytest workers of ~8 GB each.
_MAX_OTHER_SERVERS = 3


def command(*args):
  """`[sys.executable, *args]`, run as a fork of a server when one runs (`start`)."""
  if os.environ.get(ADDRESS_VARIABLE, OFF) == OFF:
    return [sys.executable, *args]
  return [sys.executable, "-S", "-E", _CLIENT, *args]


def start():
  """Starts this process's server (a no-op when one runs, or when the variable is `off`: every
  program then runs in a real Python) and names it in the environment, for the commands of
  `command` and the processes this one starts. It stops with this process."""
  if os.environ.get(ADDRESS_VARIABLE):
    return
  folder = tempfile.mkdtemp(prefix="warm_python_")
  address = os.path.join(folder, "server")
  os.environ[ADDRESS_VARIABLE] = address
  server = _start_server(address, os.environ)
  atexit.register(_stop, server, folder)


def _start_server(address, env):
  """A server at `address` in `env`; it ends when its standard input does: when the process
  that started it ends, however it ends."""
  with open(os.path.join(os.path.dirname(address), "log"), "a", encoding="utf-8") as log:
    server = subprocess.Popen([sys.executable, "-m", _MODULE, address], stdin=subprocess.PIPE,
                              stdout=log, stderr=subprocess.STDOUT, env=env)
  with open(address + ".pid", "w", encoding="ascii") as pid_file:  # For clients to see it end.
    pid_file.write(str(server.pid))
  return server


def _stop(server, folder):
  server.stdin.close()
  server.wait()
  shutil.rmtree(folder, ignore_errors=True)


class _Server:
  """Forks the runs whose environment is its own but for `_READ_AFTER_IMPORT`. The first
  server (`start`) sends each other run to a server it starts for that run's environment
  (the last `_MAX_OTHER_SERVERS` used)."""

  def __init__(self, address, started_in):
    self.address = address
    self.started_in = started_in
    # What loading TensorFlow (Keras 3...) set: a fork's environment gets it as a process's does.
    self.set_as_it_loaded = {name: value for name, value in os.environ.items()
                             if started_in.get(name) != value}
    self.is_first = os.path.basename(address) == "server"
    # Keras 3 reads KERAS_BACKEND as it loads: with TensorFlow where it is tf.keras.
    self.read_after_import = (_READ_AFTER_IMPORT - {"KERAS_BACKEND"} if "keras" in sys.modules
                              else _READ_AFTER_IMPORT)
    # The variables read as TensorFlow loaded -> (address, process), the last used last.
    self.other_servers = collections.OrderedDict()
    self.servers_started = 0
    self.clients = {}  # pid -> the connection its status goes to.
    self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    self.listener.bind(address + ".binding")
    self.listener.listen(64)

  def serve(self):
    ended, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = self.listener
    os.rename(self.address + ".binding", self.address)  # Clients wait for it: now it answers.
    # Until standard input ends; then the runs under way end first (new ones run a real Python).
    while listener.fileno() >= 0 or self.clients:
      waited = [ended] + ([listener, sys.stdin] if listener.fileno() >= 0 else [])
      readable, _, _ = select.select(waited, [], [])
      if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
        listener.close()
        continue
      if ended in readable:
        os.read(ended, 4096)
        self._report_ended()
      if listener in readable:
        connection, _ = listener.accept()
        request, streams = _receive(connection)
        if self._forkable(request, connection):
          sys.stdout.flush()
          pid = os.fork()
          if pid == 0:
            for fd in (listener, *self.clients.values()):
              fd.close()
            for _, server in self.other_servers.values():
              server.stdin.close()
            signal.set_wakeup_fd(-1)
            os.close(ended)
            os.close(wake)
            _run(request, streams, connection, self.set_as_it_loaded)
          self.clients[pid] = connection
          connection.sendall(f"pid {pid}\n".encode())
        else:
          connection.close()
        for stream in streams:
          os.close(stream)

  def _forkable(self, request, connection):
    """Whether `request` forks here; if not, tells its client where it runs instead."""
    loads_with, reason = _as_tensorflow_loads(request)
    if loads_with is not None:
      changed = {name for name, _ in set(loads_with.items()) ^ set(self.started_in.items())}
      if changed <= self.read_after_import:
        return True
      reason = ("these variables differ from the server's: " +
                " ".join(sorted(changed - self.read_after_import)))
    other = self._other_server(loads_with) if self.is_first and loads_with is not None else None
    if other is None:
      print("Not forked:", reason, flush=True)
      connection.sendall(b"exec\n")
    else:
      connection.sendall(f"server {other}\n".encode())
    return False

  def _other_server(self, env):
    """The address of the server for `env`'s variables read as TensorFlow loads (and Keras 3's
    backend), started when new."""
    key = frozenset((name, value) for name, value in env.items()
                    if name not in _READ_AFTER_IMPORT or name == "KERAS_BACKEND")
    if key not in self.other_servers:
      if len(self.other_servers) == _MAX_OTHER_SERVERS:  # The least recently used one ends.
        _, (_, server) = self.other_servers.popitem(last=False)
        server.stdin.close()
      self.servers_started += 1
      address = f"{self.address}-{self.servers_started}"
      self.other_servers[key] = address, _start_server(address, env)
    self.other_servers.move_to_end(key)
    return self.other_servers[key][0]

  def _report_ended(self):
    """Sends each ended fork's status to its client, and reaps the servers that ended: their
    clients see their pids end and run real Pythons."""
    while True:
      try:
        pid, status = os.waitpid(-1, os.WNOHANG)
      except ChildProcessError:
        return
      if pid == 0:
        return
      connection = self.clients.pop(pid, None)
      if connection is not None:
        try:
          connection.sendall(f"status {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:  # The client was killed; the fork killed itself.
          pass
        connection.close()


def serve(address):
  """Imports TensorFlow, then forks a process for each run a client asks for at `address`,
  until standard input ends."""
  started_in = dict(os.environ)
  # A failure until it listens ends it: the clients waiting see its pid end and run real
  # Pythons (`warm_python_client`).
  for module in _PRELOADED:
    __import__(module)
  server = _Server(address, started_in)
  sys.stdout.flush()
  sys.stderr.flush()
  server.serve()


def _as_tensorflow_loads(request):
  """The environment the program of `request` has as TensorFlow loads, or None and why, when
  it may choose itself what a server fixed as it loaded: TensorFlow's C++ log level where
  TF_CPP_MIN_LOG_LEVEL is unset, or Keras 3's backend from `--backend` where the server loaded
  Keras 3 already; but for a command line of this project, which sets both from its
  arguments first (`startup_environment`)."""
  argv, env = request["argv"], request["env"]
  if _imports_the_cli_first(_source(argv, request["cwd"])):
    program_argv = argv[2:] if argv[0] in ("-c", "-m") else argv[1:]
    env = dict(env, **startup_environment.set_before_tensorflow(program_argv, env))
  elif "keras" in sys.modules and any(arg.startswith("--backend") for arg in argv):
    return None, "--backend chooses Keras 3's backend, loaded here"
  if "TF_CPP_MIN_LOG_LEVEL" not in env:
    return None, "TF_CPP_MIN_LOG_LEVEL is unset"
  return env, None


def _source(argv, cwd):
  """The source code `python *argv` runs first, or None."""
  if argv[0] == "-c":
    return argv[1]
  if argv[0] == "-m":
    package, _, module = argv[1].rpartition(".")
    path = os.path.join(_CLI_FOLDER, module + ".py") if package == "keras_adapters.cli" else None
  else:
    path = os.path.join(cwd, argv[0])
  try:
    with open(path, encoding="utf-8") as source:
      return source.read()
  except (OSError, TypeError, ValueError):
    return None


def _imports_the_cli_first(source):
  """Whether `source` imports `keras_adapters.cli.cli`, itself or through a command line's
  module (`keras_adapters.cli.*`, or `experiments.*` that re-exports it), before any module
  that may load TensorFlow (any but the standard library's and absl's) and before any
  statement but a docstring (one could set the variable itself)."""
  try:
    tree = ast.parse(source or "")
  except (SyntaxError, ValueError):
    return False
  for node in tree.body:
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
      names = [f"{node.module}.{alias.name}" for alias in node.names]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
      continue
    else:
      return False
    for name in names:
      if name.partition(".")[0] in sys.stdlib_module_names | {"absl"}:
        continue
      package, _, module = name.rpartition(".")
      if package not in ("keras_adapters.cli", "experiments"):
        return False
      return module == "cli" or _imports_the_cli_first(
          _source(["-m", f"keras_adapters.cli.{module}"], None))
  return False


def _receive(connection):
  """A client's request (argv, cwd, env, pgid) and its three standard streams."""
  data, streams, _, _ = socket.recv_fds(connection, 1 << 16, 3)
  size = struct.unpack("!I", data[:4])[0]
  data = data[4:]
  while len(data) < size:
    data += connection.recv(size - len(data))
  return json.loads(data), streams


def _run(request, streams, connection, set_as_it_loaded):
  """In the fork: becomes `python argv...` in the client's streams, folder and environment,
  runs it as `__main__` and exits as Python would."""
  for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(number, signal.SIG_DFL)
  signal.signal(signal.SIGINT, signal.default_int_handler)
  for fd, stream in enumerate(streams):
    os.dup2(stream, fd)
    os.close(stream)
  try:  # Into the client's process group, so that a signal to the group reaches the run.
    os.setpgid(0, request["pgid"])
  except OSError:
    pass
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  os.environ.update(set_as_it_loaded)
  tempfile.tempdir = None  # Read from TMPDIR again.
  random.seed()
  if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed()
  run = _runner(request["argv"])
  threading.Thread(target=_die_with_client, args=(connection,), daemon=True).start()
  status = 0
  try:
    run()
  except SystemExit as exit_request:
    status = _exit_status(exit_request.code)
  except KeyboardInterrupt:
    traceback.print_exc()
    status = -signal.SIGINT
  except BaseException:  # pylint: disable=broad-except  (Python's own exit for an error)
    sys.excepthook(*sys.exc_info())
    status = 1
  _exit(status)


def _runner(argv):
  """Sets `sys.argv` and `sys.path[0]` as `python *argv` does; returns what runs it."""
  if argv[0] == "-m":  # argv[0] becomes the module's file; the working folder is on the path.
    sys.argv = argv[1:]
    sys.path[0] = os.getcwd()
    return functools.partial(runpy.run_module, argv[1], run_name="__main__", alter_sys=True)
  if argv[0] == "-c":
    sys.argv = ["-c", *argv[2:]]
    sys.path[0] = ""
    return functools.partial(_run_code, argv[1])
  sys.argv = argv
  sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
  return functools.partial(runpy.run_path, argv[0], run_name="__main__")


def _run_code(code):
  main = types.ModuleType("__main__")
  sys.modules["__main__"] = main
  exec(compile(code, "<string>", "exec"), main.__dict__)  # pylint: disable=exec-used


def _die_with_client(connection):
  """Kills this fork when its client ends first (killed: it cannot forward SIGKILL)."""
  while connection.recv(1):
    pass
  os.kill(os.getpid(), signal.SIGKILL)


def _exit_status(code):
  if code is None:
    return 0
  if isinstance(code, int):
    return code & 0xFF
  print(code, file=sys.stderr)
  return 1


def _exit(status):
  """Ends the fork as Python ends: its threads joined, `atexit` run, streams flushed."""
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  warm_python_client.end_like(status)


if __name__ == "__main__":
  serve(sys.argv[1])

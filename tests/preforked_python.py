"""A preforked Python for the tests' runs of the repository's scripts.

The tests run `experiments/*.py` and `bench/*.py` as users do, in a process of their own, well
over a hundred times per suite, and each fresh Python spent about 4 s of CPU importing
TensorFlow before the script did anything. A server started once per test process imports
`keras_adapters` and TensorFlow as a script does, touching no device, then forks a copy for
each run: the run still has its own process, arguments, environment, working folder, standard
streams and exit status, as `subprocess.run` gives them.

A run whose start the import would change goes to a fresh Python as before: code given with
`-c`, anything but a `.py` file, a Keras 3 backend chosen on the command line, an environment
that differs in a variable TensorFlow, Keras, JAX, oneDNN or Python reads when it loads, or
options `subprocess.run` takes that this does not (`shell`, `stdin`, a file as `stdout`).
"""

import atexit
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback

# Variables read while Python, TensorFlow, Keras or JAX load: a run must see the server's.
_READ_ON_IMPORT = ("TF_", "KERAS_BACKEND", "KERAS_HOME", "JAX_", "XLA_", "ONEDNN_", "DNNL_",
                   "PYTHON", "OMP_", "MKL_", "OPENBLAS_", "LD_", "TPU_", "HOME")
_HANDLED_OPTIONS = frozenset(("capture_output", "text", "universal_newlines", "check", "env",
                              "cwd", "timeout", "input", "stdout", "stderr"))
_HEADER_LIMIT = 1 << 22

_real_run = subprocess.run
_server = None  # (socket address, the environment the server started with).
_server_lock = threading.Lock()


def _imports_differ(env, server_env):
  """Whether `env` differs from the server's in a variable read on import."""
  names = {name for name in (*env, *server_env) if name.startswith(_READ_ON_IMPORT)}
  return any(env.get(name) != server_env.get(name) for name in names)


def _servable(args, options):
  """Whether `subprocess.run(args, **options)` can run in a fork of the server."""
  if not isinstance(args, (list, tuple)) or len(args) < 2 or args[0] != sys.executable:
    return False
  script = os.path.join(options.get("cwd") or os.getcwd(), os.fspath(args[1]))
  if not (script.endswith(".py") and os.path.isfile(script)):
    return False
  if any(str(arg).startswith("--backend") for arg in args[2:]):
    return False
  if set(options) - _HANDLED_OPTIONS or options.get("input") is not None:
    return False
  if any(options.get(stream) not in (None, subprocess.PIPE) for stream in ("stdout", "stderr")):
    return False
  return not _imports_differ(dict(options.get("env") or os.environ), _start_server()[1])


def run(args, **options):
  """`subprocess.run(args, **options)`, in a fork of the preforked Python when it can be."""
  if not _servable(args, options):
    return _real_run(args, **options)
  capture = options.get("capture_output", False)
  pipes = {name: (os.pipe() if capture or options.get(name) == subprocess.PIPE else None)
           for name in ("stdout", "stderr")}
  request = dict(argv=[os.fspath(arg) for arg in args], env=dict(options.get("env") or os.environ),
                 cwd=os.path.abspath(options.get("cwd") or os.getcwd()))
  fds = [0] + [pipe[1] if pipe else default for pipe, default in
               ((pipes["stdout"], 1), (pipes["stderr"], 2))]
  connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  connection.connect(_start_server()[0])
  try:
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], fds)
    for pipe in pipes.values():
      if pipe:
        os.close(pipe[1])
    replies = connection.makefile("rb")
    pid = json.loads(replies.readline())["pid"]
    outputs = {name: _reader(pipe[0]) for name, pipe in pipes.items() if pipe}
    connection.settimeout(options.get("timeout"))
    try:
      status = json.loads(replies.readline())["returncode"]
    except (socket.timeout, TimeoutError) as timed_out:
      os.kill(pid, signal.SIGKILL)
      raise subprocess.TimeoutExpired(args, options["timeout"]) from timed_out
    streams = {name: reader() for name, reader in outputs.items()}
  finally:
    connection.close()
  if options.get("text") or options.get("universal_newlines"):
    streams = {name: data.decode() for name, data in streams.items()}
  process = subprocess.CompletedProcess(args, status, streams.get("stdout"),
                                        streams.get("stderr"))
  if options.get("check"):
    process.check_returncode()
  return process


def _reader(fd):
  """Reads `fd` to its end in a thread (both streams at once, as `communicate` does); the
  returned function waits for it and gives the bytes."""
  chunks = []

  def read():
    with os.fdopen(fd, "rb") as stream:
      chunks.append(stream.read())

  thread = threading.Thread(target=read, daemon=True)
  thread.start()

  def result():
    thread.join()
    return chunks[0]

  return result


def _start_server():
  """This process's server, started on first use: its socket and its environment."""
  global _server
  with _server_lock:
    if _server is None:
      folder = tempfile.mkdtemp(prefix="preforked_python_")
      address = os.path.join(folder, "socket")
      environment = dict(os.environ)
      process = subprocess.Popen([sys.executable, os.path.abspath(__file__), address],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
      if process.stdout.readline().strip() != b"ready":
        raise RuntimeError("The preforked Python did not start: see its stderr above.")
      atexit.register(_stop, process, folder)
      _server = (address, environment)
    return _server


def _stop(process, folder):
  process.terminate()  # It reaps its runs, so that their CPU time counts in this process's.
  process.wait()
  for name in os.listdir(folder):
    os.remove(os.path.join(folder, name))
  os.rmdir(folder)


def _serve(address):
  """Imports what every script imports first, then forks a run per connection."""
  import keras_adapters  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  import tensorflow  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(address)
  listener.listen(16)
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
  print("ready", flush=True)
  try:
    while True:
      connection, _ = listener.accept()
      if os.fork() == 0:
        listener.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _supervise(connection)
      connection.close()
      _reap(os.WNOHANG)
  finally:
    _reap(0)


def _reap(options):
  """Waits for the finished supervisors (all of them, unless `options` is WNOHANG)."""
  try:
    while os.waitpid(-1, options)[0]:
      pass
  except ChildProcessError:
    pass  # None left.


def _supervise(connection):
  """In a fork of the server: starts the run in a fork of its own, tells the client its pid,
  then its exit status as `subprocess` states it (negative for a signal)."""
  message, fds, _, _ = socket.recv_fds(connection, _HEADER_LIMIT, 3)
  request = json.loads(message)
  pid = os.fork()
  if pid == 0:
    connection.close()
    _run_script(request, fds)  # Never returns.
  try:
    for fd in fds:
      os.close(fd)
    connection.sendall(json.dumps(dict(pid=pid)).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    connection.sendall(json.dumps(dict(returncode=os.waitstatus_to_exitcode(status))).encode()
                       + b"\n")
  except OSError:
    pass  # The client stopped waiting (a timeout): nobody is left to tell.
  finally:
    os._exit(0)  # pylint: disable=protected-access  # Never back into the server's loop.


def _run_script(request, fds):
  """Runs the script as `python script.py args...` would in this process, then exits."""
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
    os.close(fd)
  os.environ.clear()
  os.environ.update(request["env"])
  os.chdir(request["cwd"])
  script = os.path.abspath(request["argv"][1])
  sys.argv = [request["argv"][1], *request["argv"][2:]]
  sys.path[0] = os.path.dirname(script)
  try:
    runpy.run_path(script, run_name="__main__")
    code = 0
  except SystemExit as stop:
    code = stop.code
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()  # As the interpreter prints an exception nothing caught.
    code = 1
  sys.exit(code)  # Python's own exit: the script's atexit functions run, streams flush.


if __name__ == "__main__":
  _serve(sys.argv[1])

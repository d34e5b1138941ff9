"""Tests of the warm Python the tests' scripts fork from: a run through `command` is the run
of `python script args` (streams, status, folder, environment, signals), and is a fork only
where that cannot show."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from keras_adapters.utils import warm_python
from keras_adapters.utils import warm_python_client

# What the run saw, and whether TensorFlow was loaded before its first line: only in a fork.
_SCRIPT = textwrap.dedent("""
    import os, sys
    print("tensorflow loaded" if "tensorflow" in sys.modules else "fresh", os.getcwd(),
          os.environ.get("TF_CONFIG"), sys.argv[1:], sys.path[0], __name__)
    print("to stderr", file=sys.stderr)
    if sys.argv[1:] == ["wait"]:
      print("waiting", flush=True)
      import time
      time.sleep(60)
    sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
    """)


@pytest.fixture(name="script")
def _script(tmp_path):
  path = tmp_path / "script.py"
  path.write_text(_SCRIPT)
  return str(path)


def test_a_run_is_a_fork_with_the_streams_status_folder_and_environment_of_python(
    script, tmp_path):
  env = dict(os.environ, TF_CONFIG="{}")
  forked = subprocess.run(warm_python.command(script, "3", "--flag=x"), cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
  plain = subprocess.run([sys.executable, script, "3", "--flag=x"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=False)
  assert forked.stdout.split()[0] == "tensorflow", _server_log()
  assert plain.stdout.split()[0] == "fresh"
  assert forked.stdout.partition(" loaded ")[2] == plain.stdout.partition(" ")[2]
  assert f"{tmp_path} {{}} ['3', '--flag=x'] {tmp_path} __main__" in plain.stdout
  assert (forked.stderr, forked.returncode) == (plain.stderr, plain.returncode) == (
      "to stderr\n", 3)


def test_a_variable_read_as_tensorflow_loads_forks_from_a_server_started_with_it():
  code = ("import os, sys; print('tensorflow' in sys.modules, os.getppid(), "
          "os.environ.get('TF_CPP_MIN_LOG_LEVEL'), sys.argv)")
  runs = [subprocess.run(warm_python.command("-c", code, "x"),
                         env=dict(os.environ, **variables), capture_output=True, text=True,
                         check=False)
          for variables in ({}, dict(TF_CPP_MIN_LOG_LEVEL="1"), dict(TF_CPP_MIN_LOG_LEVEL="1"))]
  (loaded, first, level, argv), *others = [run.stdout.split(maxsplit=3) for run in runs]
  assert (loaded, level, argv) == ("True", os.environ["TF_CPP_MIN_LOG_LEVEL"], "['-c', 'x']\n")
  assert others[0] == others[1] == ["True", others[0][1], "1", "['-c', 'x']\n"], _server_log()
  assert others[0][1] != first  # The server for this environment, not the first.


def test_sigterm_reaches_the_run_and_its_status_is_the_signals(script):
  child = subprocess.Popen(warm_python.command(script, "wait"), stdout=subprocess.PIPE,
                           text=True)
  assert child.stdout.readline().split()[0] == "tensorflow"
  assert child.stdout.readline() == "waiting\n"
  child.send_signal(signal.SIGTERM)
  assert child.wait(timeout=30) == -signal.SIGTERM


def test_a_killed_client_takes_its_run_with_it(script, tmp_path):
  pid_file = tmp_path / "pid"
  path = tmp_path / "pid_script.py"
  path.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                  "time.sleep(60)\n")
  child = subprocess.Popen(warm_python.command(str(path)))
  deadline = time.monotonic() + 60
  while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
    time.sleep(0.05)
  run_pid = int(pid_file.read_text())
  assert run_pid != child.pid  # A fork of the server, not the client.
  child.kill()
  child.wait()
  while time.monotonic() < deadline and warm_python_client.is_alive(run_pid):
    time.sleep(0.05)
  assert not warm_python_client.is_alive(run_pid)
  del script


def _server_log():
  """The end of the server's log: why it ran a real Python, if it did."""
  folder = os.path.dirname(os.environ[warm_python.ADDRESS_VARIABLE])
  with open(os.path.join(folder, "log"), encoding="utf-8") as log:
    return log.read()[-1500:]


@pytest.mark.parametrize("address", [None, warm_python.OFF])
def test_without_a_server_or_switched_off_the_command_is_python(script, monkeypatch, address):
  monkeypatch.delenv(warm_python.ADDRESS_VARIABLE)
  if address:
    monkeypatch.setenv(warm_python.ADDRESS_VARIABLE, address)
  assert warm_python.command(script, "a") == [sys.executable, script, "a"]


def test_a_module_runs_as_python_m_runs_it(tmp_path):
  (tmp_path / "a_module.py").write_text(_SCRIPT)
  forked = subprocess.run(warm_python.command("-m", "a_module", "5"), cwd=tmp_path,
                          capture_output=True, text=True, check=False)
  assert forked.stdout.split()[0] == "tensorflow", _server_log()
  assert f"{tmp_path} None ['5'] {tmp_path} __main__" in forked.stdout
  assert forked.returncode == 5


def test_a_server_past_the_limit_ends_after_the_runs_it_has():
  code = ("import sys, time; print('tensorflow' in sys.modules, flush=True); "
          "time.sleep(float(sys.argv[1])); print('done')")

  def start(level, seconds):
    return subprocess.Popen(warm_python.command("-c", code, str(seconds)),
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL=level),
                            stdout=subprocess.PIPE, text=True)

  under_way = start("1", 3)
  assert under_way.stdout.readline() == "True\n", _server_log()
  # As many other environments after it as the first server keeps servers for: its server,
  # the least recently used, ends.
  levels = ("0", "3", "4")
  assert len(levels) == warm_python._MAX_OTHER_SERVERS  # pylint: disable=protected-access
  later = [start(level, 0) for level in levels]
  for run in (under_way, *later):
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 0
    assert output.endswith("done\n")


def test_a_program_that_sets_what_tensorflow_reads_as_it_loads_runs_a_real_python():
  code = "import sys; print('tensorflow' in sys.modules)"
  quiet = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  run = subprocess.run(warm_python.command("-c", code), env=quiet, capture_output=True,
                       text=True, check=False)
  assert run.stdout == "False\n", run.stderr


def test_a_command_line_forks_from_a_server_with_the_log_level_it_sets_but_for_verbose(
    tmp_path):
  # keras_adapters.cli.cli sets TF_CPP_MIN_LOG_LEVEL=3 where unset, unless --verbose, before
  # TensorFlow loads: a server started with 3 forks the run, and --verbose runs a real Python.
  script = tmp_path / "command.py"
  script.write_text("import os\nfrom keras_adapters.cli import cli\n"
                    "print(os.getpid(), os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n")
  quiet = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  seen = {}
  for flag in ("--quiet_by_default", "--verbose"):
    run = subprocess.Popen(warm_python.command(str(script), flag), env=quiet,
                           stdout=subprocess.PIPE, text=True)
    pid, level = run.communicate(timeout=300)[0].split()
    seen[flag] = ("a real Python" if int(pid) == run.pid else "a fork", level)
  assert seen["--quiet_by_default"] == ("a fork", "3"), _server_log()
  assert seen["--verbose"][0] == "a real Python"


def test_a_command_line_forks_from_a_server_on_the_backend_it_sets(tmp_path):
  # keras_adapters.cli.cli sets KERAS_BACKEND from --backend before TensorFlow loads Keras 3:
  # a server started on that backend forks the run. Another program that reads --backend
  # runs a real Python: it may set the backend itself.
  keras_3 = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  seen = {}
  for name, first_line in (("command.py", "from keras_adapters.cli import cli\n"),
                           ("other.py", "")):
    script = tmp_path / name
    script.write_text(first_line +
                      "import os, keras\nprint(os.getpid(), keras.backend.backend())\n")
    run = subprocess.Popen(warm_python.command(str(script), "--backend=jax"), env=keras_3,
                           stdout=subprocess.PIPE, text=True)
    pid, backend = run.communicate(timeout=300)[0].split()
    seen[name] = ("a real Python" if int(pid) == run.pid else "a fork", backend)
  assert seen == {"command.py": ("a fork", "jax"), "other.py": ("a real Python", "tensorflow")}, (
      _server_log())


def test_a_fork_compiles_with_its_own_xla_flags(tmp_path):
  # XLA reads XLA_FLAGS as it first compiles, after the server loaded TensorFlow.
  code = ("import os, tensorflow as tf; "
          "tf.function(lambda x: x * 2 + 1, jit_compile=True)(tf.ones(2)); print(os.getpid())")
  dump = tmp_path / "xla_dump"
  run = subprocess.Popen(warm_python.command("-c", code), stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump}"))
  pid = int(run.communicate(timeout=300)[0])
  assert (pid != run.pid, run.returncode) == (True, 0), _server_log()
  assert any(name.endswith(".txt") for name in os.listdir(dump))


@pytest.mark.parametrize("source, first", [
    ("from keras_adapters.cli import run_glue", True),
    ("import os, sys\nfrom absl import flags\nfrom experiments import cli", True),
    ("import tensorflow\nfrom keras_adapters.cli import cli", False),
    ("from keras_adapters.cli import keras_choice", False),  # It loads no cli.
    ("from experiments import testing", False),
    ("import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '0'\nfrom keras_adapters.cli import cli",
     False),
    ('"""A docstring."""\nfrom __future__ import annotations\nfrom experiments import cli',
     True),
    ("print(", False)])
def test_a_program_quiets_tensorflow_when_it_imports_the_cli_first(source, first):
  assert warm_python._imports_the_cli_first(source) is first  # pylint: disable=protected-access


def test_every_command_line_imports_the_cli_first():
  folder = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                        "experiments")
  commands = 0
  for name in [name for name in os.listdir(folder) if name.endswith(".py")]:
    with open(os.path.join(folder, name), encoding="utf-8") as source:
      code = source.read()
    if "__main__" in code:
      commands += 1
      assert warm_python._imports_the_cli_first(code), name  # pylint: disable=protected-access
  assert commands == 8


def test_a_keras_3_run_forks_from_a_server_that_loaded_keras_3_with_what_it_set():
  # Loading Keras 3 with TensorFlow sets variables of its own: the fork has them, and a run's
  # environment is compared with the one its server started in, not with theirs.
  code = ("import os, sys; print('keras' in sys.modules, "
          "os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH'))")
  keras_3 = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  runs = [subprocess.run(command, env=keras_3, capture_output=True, text=True, check=False)
          for command in ([sys.executable, "-c", "import keras_adapters, tensorflow\n" + code],
                          *[warm_python.command("-c", code)] * 2)]
  assert [run.stdout for run in runs] == [runs[0].stdout] * 3, _server_log()
  assert runs[0].stdout.startswith("True ")


def _runs_a_real_python(address):
  """Whether a run sent to the server at `address` runs in a real Python, and soon: far
  sooner than the wait for a server importing TensorFlow."""
  code = "import os; print(os.getpid())"
  run = subprocess.Popen(warm_python.command("-c", code), stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, **{warm_python.ADDRESS_VARIABLE: address}))
  output, _ = run.communicate(timeout=60)
  return int(output) == run.pid


def test_a_server_that_cannot_listen_is_not_waited_for(tmp_path):
  folder = tmp_path / ("x" * 120)  # Past a Unix socket path's 107 bytes.
  folder.mkdir()
  address = str(folder / "server")
  server = warm_python._start_server(address, os.environ)  # pylint: disable=protected-access
  server.stdin.close()
  assert server.wait(timeout=120) != 0
  assert "AF_UNIX path too long" in (folder / "log").read_text()
  assert _runs_a_real_python(address)


def test_a_server_killed_before_it_listens_is_not_waited_for(tmp_path):
  address = str(tmp_path / "server")
  server = warm_python._start_server(address, os.environ)  # pylint: disable=protected-access
  server.kill()  # While it imports TensorFlow; not waited for: a zombie, as a killed child is.
  assert _runs_a_real_python(address)
  server.stdin.close()
  server.wait()

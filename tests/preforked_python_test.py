"""A run in the preforked Python ends as the same script run in a fresh one: same streams, exit
status, folder and environment; and what it cannot serve goes to a fresh Python."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests import preforked_python

_SCRIPT = textwrap.dedent("""
    import atexit, os, sys
    atexit.register(lambda: print("atexit ran"))
    print("argv", sys.argv[1:], "cwd", os.getcwd(), "var", os.environ.get("GREETING"))
    print("path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
    print("pid", os.getpid(), file=sys.stderr)
    if sys.argv[1] == "fail":
      raise ValueError("boom")
    if sys.argv[1] == "signal":
      os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(int(sys.argv[1]))
    """).replace("signal.SIGTERM", str(int(signal.SIGTERM)))


def _both(script, *args, **options):
  """The run served by the preforked Python and the same run in a fresh one."""
  command = [sys.executable, str(script), *args]
  return preforked_python.run(command, **options), subprocess.Popen(
      command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      cwd=options.get("cwd"), env=options.get("env"))


@pytest.mark.parametrize("outcome", ["0", "3", "fail", "signal"])
def test_a_served_run_ends_as_a_fresh_one(tmp_path, outcome):
  script = tmp_path / "script.py"
  script.write_text(_SCRIPT)
  served, fresh = _both(script, outcome, capture_output=True, text=True, cwd=tmp_path,
                        env=dict(os.environ, GREETING="hello"))
  stdout, stderr = fresh.communicate()
  assert served.returncode == fresh.returncode
  assert served.stdout == stdout
  assert "hello" in served.stdout and f"'{outcome}'" in served.stdout
  served_pid = int(served.stderr.split("pid ")[1].split()[0])
  assert served_pid != os.getpid()  # A process of its own.
  if outcome == "fail":
    assert served.stderr.rstrip().endswith("ValueError: boom")
    assert stderr.rstrip().endswith("ValueError: boom")


def test_check_and_timeout_raise_as_subprocess_run_does(tmp_path):
  script = tmp_path / "script.py"
  script.write_text("import sys, time\nif sys.argv[1] == 'sleep': time.sleep(60)\nsys.exit(2)\n")
  with pytest.raises(subprocess.CalledProcessError):
    preforked_python.run([sys.executable, str(script), "exit"], capture_output=True, check=True)
  with pytest.raises(subprocess.TimeoutExpired):
    preforked_python.run([sys.executable, str(script), "sleep"], capture_output=True, timeout=1)


def test_only_scripts_that_load_as_the_server_did_are_served(tmp_path):
  script = tmp_path / "script.py"
  script.write_text("")
  servable = lambda command, **options: preforked_python._servable(  # pylint: disable=protected-access
      [sys.executable, *command], options)
  assert servable([str(script)], capture_output=True, env=dict(os.environ))
  assert not servable(["-c", "pass"])
  assert not servable([str(tmp_path / "missing.py")])
  assert not servable([str(script), "--backend=jax"])
  assert not servable([str(script)], input="text")
  assert not servable([str(script)], env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="x"))
  assert not servable([str(script)], env=dict(os.environ, KERAS_BACKEND="some"))
  assert servable([str(script)], env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))

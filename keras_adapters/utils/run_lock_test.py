"""Tests for the lock that keeps a model_dir to one run."""

import json
import os
import socket
import subprocess
import sys
from unittest import mock
import uuid

import tensorflow as tf

from keras_adapters.utils import atomic_io
from keras_adapters.utils import run_lock


def _write_lock(model_dir, **holder):
  with open(os.path.join(model_dir, run_lock.LOCK_FILE), "w", encoding="utf-8") as f:
    json.dump(dict(dict(host=socket.gethostname(), started="2026-01-01T00:00:00+00:00",
                        command="run_classification.py --task=airline", token="theirs"),
                   **holder), f)


def _dead_pid():
  """The id of a process of this host that has ended."""
  child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)
  return int(child.stdout)


class RunLockTest(tf.test.TestCase):

  def test_held_while_the_block_runs_and_released_after(self):
    model_dir = self.create_tempdir().full_path
    lock = os.path.join(model_dir, run_lock.LOCK_FILE)
    with run_lock.hold(model_dir):
      with open(lock, encoding="utf-8") as f:
        holder = json.load(f)
      self.assertEqual((holder["host"], holder["pid"]), (socket.gethostname(), os.getpid()))
    self.assertFalse(os.path.exists(lock))
    self.assertEqual(os.listdir(model_dir), [])

  def test_released_when_the_block_raises(self):
    model_dir = self.create_tempdir().full_path
    with self.assertRaises(KeyboardInterrupt):
      with run_lock.hold(model_dir):
        raise KeyboardInterrupt
    self.assertEqual(os.listdir(model_dir), [])

  def test_a_live_holder_is_refused_by_name(self):
    """A second run is refused naming the holder's process, host, start and command."""
    model_dir = self.create_tempdir().full_path
    _write_lock(model_dir, pid=os.getppid())  # A live process other than this one.
    with self.assertRaisesRegex(
        run_lock.ModelDirBusyError,
        rf"model_dir='{model_dir}' is in use by another run \(process {os.getppid()} on host "
        rf"{socket.gethostname()}, since 2026-01-01.*--task=airline\).*another "
        rf"model_dir=.*delete {model_dir}/run.lock"):
      with run_lock.hold(model_dir):
        self.fail("entered a busy folder")
    self.assertEqual(json.loads(open(os.path.join(model_dir, run_lock.LOCK_FILE),
                                     encoding="utf-8").read())["token"], "theirs")

  def test_another_hosts_lock_is_refused(self):
    """Whether a process of another host lives cannot be told: its lock stays."""
    model_dir = self.create_tempdir().full_path
    _write_lock(model_dir, host="elsewhere", pid=_dead_pid())
    with self.assertRaisesRegex(run_lock.ModelDirBusyError, "on host elsewhere"):
      run_lock.acquire(model_dir)

  def test_a_killed_runs_lock_is_taken_over_with_a_warning(self):
    model_dir = self.create_tempdir().full_path
    pid = _dead_pid()
    _write_lock(model_dir, pid=pid)
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.hold(model_dir):
        pass
    self.assertRegex("\n".join(logs.output), rf"Taking over .*run.lock: process {pid} .*gone")
    self.assertEqual(os.listdir(model_dir), [])

  def test_only_its_own_lock_is_released(self):
    model_dir = self.create_tempdir().full_path
    token = run_lock.acquire(model_dir)
    _write_lock(model_dir, pid=os.getppid())  # Taken over meanwhile (it looked stale).
    run_lock.release(model_dir, token)
    self.assertTrue(os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE)))

  def test_not_enabled_is_a_no_op(self):
    """A worker that is not the chief writes nothing to model_dir, so locks nothing."""
    model_dir = self.create_tempdir().full_path
    _write_lock(model_dir, pid=os.getppid())
    with run_lock.hold(model_dir, enabled=False):
      pass


class RunLockOnUrlsTest(tf.test.TestCase):
  """The lock of a model_dir on another file system (TensorFlow's in-memory `ram://`)."""

  def setUp(self):
    super().setUp()
    self.model_dir = f"ram://run_lock_test/{uuid.uuid4().hex}/run"
    self.lock = f"{self.model_dir}/{run_lock.LOCK_FILE}"

  def write_lock(self, **holder):
    # Not a plain GFile write: on `ram://` that appends to an existing file.
    atomic_io.write_json(self.lock, dict(host=socket.gethostname(), token="theirs",
                                         started="2026-01-01T00:00:00+00:00",
                                         command="run_classification.py", **holder))

  def read_lock(self):
    with tf.io.gfile.GFile(self.lock) as f:
      return json.loads(f.read())

  def test_held_and_released_on_the_url_not_on_local_disk(self):
    """Nothing lands in the working directory (as a folder `ram:` would)."""
    cwd = self.create_tempdir().full_path
    previous = os.getcwd()
    os.chdir(cwd)
    try:
      with run_lock.hold(self.model_dir):
        holder = self.read_lock()
        self.assertEqual((holder["host"], holder["pid"]), (socket.gethostname(), os.getpid()))
    finally:
      os.chdir(previous)
    self.assertEqual(tf.io.gfile.listdir(self.model_dir), [])
    self.assertEqual(os.listdir(cwd), [])

  def test_a_live_holder_is_refused_by_name(self):
    self.write_lock(pid=os.getppid())
    with self.assertRaisesRegex(run_lock.ModelDirBusyError,
                                rf"in use by another run \(process {os.getppid()} on host "):
      run_lock.acquire(self.model_dir)
    self.assertEqual(self.read_lock()["token"], "theirs")

  def test_of_two_runs_writing_at_once_the_last_write_holds(self):
    """Writing a lock on a URL is not exclusive: a run whose lock another run's replaced
    within `SETTLE_SECONDS` is refused, naming that run; the other one holds the lock."""
    def another_run_writes(seconds):
      self.assertEqual(seconds, run_lock.SETTLE_SECONDS)
      self.write_lock(pid=os.getppid())

    with mock.patch.object(run_lock.time, "sleep", another_run_writes):
      with self.assertRaisesRegex(run_lock.ModelDirBusyError, rf"process {os.getppid()} "):
        run_lock.acquire(self.model_dir)
    self.assertEqual(self.read_lock()["token"], "theirs")

  def test_a_killed_runs_lock_is_taken_over(self):
    pid = _dead_pid()
    self.write_lock(pid=pid)
    with self.assertLogs(level="WARNING") as logs:
      token = run_lock.acquire(self.model_dir)
    self.assertRegex("\n".join(logs.output), rf"Taking over .*run.lock: process {pid} ")
    self.assertEqual(self.read_lock()["token"], token)
    run_lock.release(self.model_dir, token)
    self.assertEqual(tf.io.gfile.listdir(self.model_dir), [])


if __name__ == "__main__":
  tf.test.main()

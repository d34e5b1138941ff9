"""One run per folder: a lock file in `model_dir` naming the run that holds it.

Two runs in one `model_dir` would resume from each other's checkpoints, write the same
checkpoints and export, and both report success. A run therefore holds `model_dir/run.lock`
(its host, process id, start time and command) while it trains, scores and exports; a second
run is refused with the holder's name. A lock whose process is gone (killed, the machine
restarted) is taken over with a warning when it was taken on this host, where that can be
checked; a lock of another host is left to the user to delete. The lock is written through
`tf.io.gfile`, so it works on any file system TensorFlow reads (`gs://` included), and made
exclusive by a rename that refuses to replace an existing file.

In a multi-worker run only the chief writes `model_dir`, so only the chief holds its lock.
"""

import contextlib
import datetime
import json
import os
import socket
import sys
import uuid

from absl import logging
import tensorflow as tf

from keras_adapters.utils import atomic_io

LOCK_FILE = "run.lock"


class ModelDirBusyError(FileExistsError):
  """Another run holds the folder; the message names it."""


@contextlib.contextmanager
def hold(model_dir, enabled=True):
  """Holds `model_dir`'s lock for the block; a no-op when not `enabled` (a worker that is
  not the chief).

  Raises:
    ModelDirBusyError: Another live run holds the lock, or one of another host.
  """
  if not enabled:
    yield
    return
  token = acquire(model_dir)
  try:
    yield
  finally:
    release(model_dir, token)


def acquire(model_dir):
  """Takes `model_dir`'s lock (taking over one left by a dead process of this host) and
  returns the token that `release` needs."""
  path = os.path.join(model_dir, LOCK_FILE)
  holder = _read(path)
  if holder is not None:
    if not _is_stale(holder):
      raise _busy(model_dir, holder)
    logging.warning("Taking over %s: process %s on this host, which held it since %s, is "
                    "gone (killed?).", path, holder.get("pid"), holder.get("started"))
    with contextlib.suppress(tf.errors.NotFoundError):
      tf.io.gfile.remove(path)
  token = uuid.uuid4().hex
  record = dict(host=socket.gethostname(), pid=os.getpid(), token=token,
                started=datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
  # A leftover name of atomic_io's, so that a process killed between the two steps leaves
  # nothing that `atomic_io.remove_leftovers` does not clear.
  staging = os.path.join(model_dir, f".{LOCK_FILE}.partial-{os.getpid()}-{token[:8]}")
  with tf.io.gfile.GFile(staging, "w") as f:
    f.write(json.dumps(record, indent=2) + "\n")
  try:
    tf.io.gfile.rename(staging, path, overwrite=False)
  except tf.errors.AlreadyExistsError:  # Another run took it in between.
    tf.io.gfile.remove(staging)
    raise _busy(model_dir, _read(path) or {}) from None
  return token


def release(model_dir, token):
  """Deletes `model_dir`'s lock if it is still the one `acquire` returned `token` for."""
  path = os.path.join(model_dir, LOCK_FILE)
  if (_read(path) or {}).get("token") == token:
    tf.io.gfile.remove(path)


def _read(path):
  """The lock's record; `{}` for one that cannot be parsed, `None` without one."""
  try:
    with tf.io.gfile.GFile(path) as f:
      record = json.loads(f.read())
  except tf.errors.NotFoundError:
    return None
  except (ValueError, tf.errors.OpError):
    return {}
  return record if isinstance(record, dict) else {}


def _is_stale(holder):
  """Whether the holder is a process of this host that is gone. This very process counts as
  gone: it holds no lock outside `hold`, so its id in a lock is a reused one (a restarted
  container)."""
  if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
    return False
  # atomic_io's check of leftovers' writers: one notion of "gone" for both.
  return (holder["pid"] == os.getpid()
          or not atomic_io._is_running(holder["pid"]))  # pylint: disable=protected-access


def _busy(model_dir, holder):
  who = (f"process {holder.get('pid')} on host {holder.get('host')}, since "
         f"{holder.get('started')}: {holder.get('command')}" if holder else "an unreadable lock")
  return ModelDirBusyError(
      f"model_dir={model_dir!r} is in use by another run ({who}). Wait for it to finish or "
      f"pass another model_dir=<folder>; if that run is gone, delete "
      f"{os.path.join(model_dir, LOCK_FILE)}.")

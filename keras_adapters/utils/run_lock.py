"""One run per folder: a lock file in `model_dir` naming the run that holds it.

Two runs in one `model_dir` would resume from each other's checkpoints, write the same
checkpoints and export, and both report success. A run therefore holds `model_dir/run.lock`
(its host, process id, start time and command) while it trains, scores and exports; a second
run is refused with the holder's name. A lock whose process is gone (killed, the machine
restarted) is taken over with a warning when it was taken on this host, where that can be
checked; a lock of another host is left to the user to delete.

What it guarantees depends on where `model_dir` is:

* A local folder (a shared file system included): the lock is created whole by a hard
  link, which fails if a lock exists, so of two runs started at once exactly one gets it.
* A URL (`gs://`, `ram://`, any file system TensorFlow serves, through `tf.io.gfile`): no
  exclusive create exists there, so the lock is advisory. A run writes its lock unless one
  is there, waits `SETTLE_SECONDS` for the write of a run started at the same moment to
  land, and reads the lock back: only the run whose record it finds proceeds (on GCS the
  last write wins, and each object is read whole). That refuses every run started while
  another holds the folder; of two started at once, both proceed only if one of them took
  longer than that wait between finding no lock and writing its own.

Taking over a dead process's lock deletes it before writing anew, which is not exclusive
anywhere (a run that found the same dead lock may delete the new one): a run that took over
reads its lock back after `SETTLE_SECONDS` too. In a multi-worker run only the chief writes
`model_dir`, so only the chief holds its lock.
"""

import contextlib
import datetime
import json
import os
import socket
import sys
import time
import uuid

from absl import logging
import tensorflow as tf

from keras_adapters.utils import atomic_io

LOCK_FILE = "run.lock"
# How long a run waits between writing its lock and reading it back where the write was not
# exclusive: far longer than deleting and writing a small file takes.
SETTLE_SECONDS = 1.0


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
  exclusive = atomic_io.is_local(path)
  if holder is not None:
    exclusive = False
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
  try:
    atomic_io.write_text(path, json.dumps(record, indent=2) + "\n", exclusive=True)
  except FileExistsError:  # Another run took it in between.
    raise _busy(model_dir, _read(path) or {}) from None
  if not exclusive:
    # A run that wrote at the same moment may have replaced this lock; the last write is the
    # one that holds (see the module docstring).
    time.sleep(SETTLE_SECONDS)
    holder = _read(path) or {}
    if holder.get("token") != token:
      raise _busy(model_dir, holder)
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

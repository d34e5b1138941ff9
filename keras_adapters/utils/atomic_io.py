"""Writes that are all or nothing: an interrupted write never leaves a file that looks valid."""

import contextlib
import json
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_directory(path):
  """Yields a temporary sibling folder that replaces `path` only if the block succeeds.

  Args:
    path: The folder to create or replace.

  Yields:
    The temporary folder to write into.
  """
  path = os.path.abspath(os.fspath(path))
  parent = os.path.dirname(path)
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=parent)
  # mkdtemp makes the folder private; the result should have the usual permissions.
  os.chmod(staging, 0o777 & ~_umask())
  try:
    yield staging
    if os.path.isdir(path):
      retired = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old.", dir=parent)
      os.replace(path, os.path.join(retired, "previous"))
      os.replace(staging, path)
      shutil.rmtree(retired, ignore_errors=True)
    else:
      os.replace(staging, path)
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def write_bytes(path, data):
  """Writes `data` to `path` through a temporary file and an atomic rename."""
  path = os.fspath(path)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(
      os.path.abspath(path)))
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    # mkstemp makes the file private; results and manifests are meant to be shared.
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_text(path, text):
  """Writes UTF-8 `text` to `path` atomically."""
  write_bytes(path, text.encode("utf-8"))


def write_json(path, obj):
  """Writes `obj` as indented JSON to `path` atomically."""
  write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _umask():
  mask = os.umask(0)
  os.umask(mask)
  return mask

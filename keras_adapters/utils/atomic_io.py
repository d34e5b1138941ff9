"""Writes that are all or nothing: an interrupted write never leaves a file that looks valid.

Each write goes to a hidden sibling named after its target and the writing process,
`.<name>.partial-<pid>-<random>`, and is renamed into place. A process killed mid-write
leaves that sibling behind; the next write of the same target, or `remove_leftovers` on the
folder, deletes it once its process is gone. One host writes a folder at a time (as only the
chief of a multi-worker run writes `model_dir`): a process id is checked on this host.
"""

import contextlib
import json
import os
import re
import shutil
import tempfile

_PARTIAL = "partial"
_RETIRED = "retired"
# `tempfile` names end in 8 characters of this alphabet.
_LEFTOVER = re.compile(rf"^\.(?P<name>.+)\.({_PARTIAL}|{_RETIRED})-(?P<pid>\d+)-[a-z0-9_]{{8}}$")


@contextlib.contextmanager
def atomic_directory(path):
  """Yields a temporary sibling folder that replaces `path` only if the block succeeds.

  Args:
    path: The folder to create or replace.

  Yields:
    The temporary folder to write into.
  """
  path = os.path.abspath(os.fspath(path))
  parent, name = os.path.split(path)
  os.makedirs(parent, exist_ok=True)
  remove_leftovers(parent, name)
  staging = tempfile.mkdtemp(prefix=_prefix(name, _PARTIAL), dir=parent)
  # mkdtemp makes the folder private; the result should have the usual permissions.
  os.chmod(staging, 0o777 & ~_umask())
  try:
    yield staging
    if os.path.isdir(path):
      retired = tempfile.mkdtemp(prefix=_prefix(name, _RETIRED), dir=parent)
      os.replace(path, os.path.join(retired, "previous"))
      os.replace(staging, path)
      shutil.rmtree(retired, ignore_errors=True)
    else:
      os.replace(staging, path)
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def write_bytes(path, data):
  """Writes `data` to `path` through a temporary file and an atomic rename."""
  path = os.path.abspath(os.fspath(path))
  parent, name = os.path.split(path)
  os.makedirs(parent, exist_ok=True)
  remove_leftovers(parent, name)
  fd, tmp = tempfile.mkstemp(prefix=_prefix(name, _PARTIAL), dir=parent)
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


def make_writable_dir(path, argument):
  """Creates the local folder `path` if needed and checks that files can be written there.

  Args:
    path: The folder; a URL (`gs://...`) is left to the file system that serves it.
    argument: The argument that named it, for the message.

  Raises:
    NotADirectoryError: `path`, or a folder above it, is a file.
    PermissionError: The folder cannot be created or written to.
  """
  path = os.fspath(path)
  if "://" in path:
    return
  try:
    os.makedirs(path, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=_prefix("write-probe", _PARTIAL), dir=path)
    os.close(fd)
    os.remove(probe)
  except (FileExistsError, NotADirectoryError):
    raise NotADirectoryError(f"{argument}={path!r} is a file, or inside one: pass a folder."
                             ) from None
  except OSError as e:
    raise PermissionError(f"{argument}={path!r} cannot be written to ({e.strerror}): pass a "
                          f"{argument}= folder you can write to.") from None


def remove_leftovers(folder, name=None):
  """Deletes what interrupted writes into `folder` left behind.

  Args:
    folder: The folder of the targets; nothing happens if it does not exist.
    name: Only the leftovers of writes of this target; default: of every target.

  Returns:
    The paths deleted.
  """
  removed = []
  try:
    entries = os.listdir(folder)
  except (FileNotFoundError, NotADirectoryError):
    return removed
  for entry in entries:
    match = _LEFTOVER.match(entry)
    if (not match or (name is not None and match["name"] != name)
        or _is_running(int(match["pid"]))):
      continue
    path = os.path.join(folder, entry)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    removed.append(path)
  return removed


def _prefix(name, kind):
  return f".{name}.{kind}-{os.getpid()}-"


def _is_running(pid):
  """Whether process `pid` exists on this host (this process included)."""
  if pid == os.getpid():
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's process.
    return True
  return True


def _umask():
  mask = os.umask(0)
  os.umask(mask)
  return mask

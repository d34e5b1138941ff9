"""Writes that are all or nothing: an interrupted write never leaves a file that looks valid.

Every function takes local paths and the URLs of any file system TensorFlow serves (`gs://`,
`s3://`, `hdfs://`, the in-memory `ram://`): a URL goes through `tf.io.gfile`, never through
the local disk, so `model_dir=gs://...` gets no local folder named `gs:`.

Each write goes to a hidden sibling named after its target and the writing process,
`.<name>.partial-<pid>-<random>`, and is renamed into place. A process killed mid-write
leaves that sibling behind; the next write of the same target, or `remove_leftovers` on the
folder, deletes it once its process is gone. One host writes a folder at a time (as only the
chief of a multi-worker run writes `model_dir`): a process id is checked on this host.

What holds where:

* Local paths: the file is flushed to disk (`fsync`) before an atomic `os.replace`, so a
  reader or a crash sees the old file or the new one, never a mix. A folder is staged
  beside its target and swapped in by two renames; where the target also holds files the
  write does not make (a user's notes beside an artifact), those stay and the written
  entries replace their namesakes one by one, the completion marker last (see
  `atomic_directory`). An exclusive write (`exclusive=True`) is a hard link, which fails
  atomically if the target exists.
* URLs: the temporary object is written whole, then `tf.io.gfile.rename` puts it in place.
  On object stores (GCS, S3) that rename is a copy and a delete, not atomic: a killed
  process can leave the temporary object behind (removed as above), and two writers race
  (the last copy wins). What holds on GCS is that one object is written whole or not at
  all, so a reader sees the old or the new complete file. A folder is replaced file by
  file: the entries the write makes are deleted (its completion marker first), then the
  staged files are moved in, deepest first, the marker last; other files stay. So a
  reader meanwhile, or a kill, can find it missing or incomplete (each file in it whole);
  the callers' completion marker (`saved_model.pb`, `adapter_config.json` with the
  weights' checksum) tells a complete one. An exclusive write is checked before its copy:
  a check, not a lock (see `run_lock`).
"""

import contextlib
import json
import os
import re
import shutil
import tempfile
import uuid

import tensorflow as tf

from keras_adapters.utils import file_systems

_PARTIAL = "partial"
_RETIRED = "retired"
# `tempfile` names end in 8 characters of this alphabet (and those of URLs in 8 hex digits).
_LEFTOVER = re.compile(rf"^\.(?P<name>.+)\.({_PARTIAL}|{_RETIRED})-(?P<pid>\d+)-[a-z0-9_]{{8}}$")


def atomic_directory(path, marker=None):
  """A context that yields a temporary sibling folder, whose entries are put into `path` only
  if the block succeeds.

  Only what the block writes is replaced: the files and folders of `path` that it does not
  write stay, so a user's files beside an artifact survive its rewriting. Where `path` holds
  nothing else, the whole folder is swapped in at once (atomically on a local file system).
  Otherwise the written entries replace their namesakes one by one, and `marker`, the file
  whose presence tells readers the folder is complete, is taken away first and put back last:
  a reader meanwhile, or a kill, finds the folder incomplete, never old and new files mixed in
  a folder that looks whole.

  Args:
    path: The folder to create or write into.
    marker: The name of the file (in the folder's top level) that readers check first.

  Returns:
    The context; it yields the temporary folder to write into.
  """
  path = _normalized(path)
  return (_local_directory if is_local(path) else _remote_directory)(path, marker)


@contextlib.contextmanager
def _local_directory(path, marker):
  """`atomic_directory` of a local path: renames swap the folders, or the written entries."""
  parent, name = os.path.split(path)
  os.makedirs(parent, exist_ok=True)
  remove_leftovers(parent, name)
  staging = tempfile.mkdtemp(prefix=_prefix(name, _PARTIAL), dir=parent)
  # mkdtemp makes the folder private; the result should have the usual permissions.
  os.chmod(staging, 0o777 & ~_umask())
  try:
    yield staging
    if not os.path.isdir(path):
      os.replace(staging, path)
      return
    retired = tempfile.mkdtemp(prefix=_prefix(name, _RETIRED), dir=parent)
    written = _marker_last(os.listdir(staging), marker)
    if set(os.listdir(path)) <= set(written):
      os.replace(path, os.path.join(retired, "previous"))
      os.replace(staging, path)
    else:
      for entry in ([marker] if marker in written else []) + written:
        if os.path.lexists(os.path.join(path, entry)):
          os.replace(os.path.join(path, entry), os.path.join(retired, entry))
      for entry in written:
        os.replace(os.path.join(staging, entry), os.path.join(path, entry))
    shutil.rmtree(retired, ignore_errors=True)
  finally:
    shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def _remote_directory(path, marker):
  """`atomic_directory` of a URL: the staged files replace the target's one by one."""
  parent, name = os.path.split(path)
  tf.io.gfile.makedirs(parent)
  remove_leftovers(parent, name)
  staging = os.path.join(parent, _prefix(name, _PARTIAL) + _random_suffix())
  tf.io.gfile.makedirs(staging)
  try:
    yield staging
    # The marker goes first, so that the folder reads as incomplete until its files are in.
    for entry in reversed(_marker_last(_listdir(staging), marker)):
      _delete(os.path.join(path, entry))
    # A tree is listed from the top; reversed, every folder comes after those inside it.
    tree = list(tf.io.gfile.walk(staging))
    for folder, _, _ in tree:
      tf.io.gfile.makedirs(path + folder[len(staging):])
    for folder, _, files in reversed(tree):
      for file_name in _marker_last(files, marker if folder == staging else None):
        tf.io.gfile.rename(os.path.join(folder, file_name),
                           os.path.join(path + folder[len(staging):], file_name), overwrite=True)
  finally:
    _delete(staging)


def _marker_last(entries, marker):
  """`entries` sorted, with `marker` (if among them) last."""
  return sorted(entries, key=lambda entry: (entry == marker, entry))


def write_bytes(path, data, exclusive=False):
  """Writes `data` to `path` through a temporary file and a rename.

  Args:
    path: The file.
    data: Its bytes.
    exclusive: Fail if `path` exists (atomically on a local file system only; see the
      module docstring).

  Raises:
    FileExistsError: `exclusive` and `path` exists; nothing was written.
  """
  path = _normalized(path)
  parent, name = os.path.split(path)
  if not is_local(path):
    _write_remote(path, parent, name, data, exclusive)
    return
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
    if exclusive:
      os.link(tmp, path)  # Unlike a rename, fails if `path` exists.
      os.remove(tmp)
    else:
      os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def _write_remote(path, parent, name, data, exclusive):
  """`write_bytes` of a URL."""
  tf.io.gfile.makedirs(parent)
  remove_leftovers(parent, name)
  tmp = os.path.join(parent, _prefix(name, _PARTIAL) + _random_suffix())
  try:
    with tf.io.gfile.GFile(tmp, "wb") as f:
      f.write(data)
    tf.io.gfile.rename(tmp, path, overwrite=not exclusive)
  except BaseException as error:
    with contextlib.suppress(tf.errors.NotFoundError):
      tf.io.gfile.remove(tmp)
    if isinstance(error, tf.errors.AlreadyExistsError):
      raise FileExistsError(f"{path} exists.") from None
    raise


def write_text(path, text, exclusive=False):
  """Writes UTF-8 `text` to `path` atomically (see `write_bytes`)."""
  write_bytes(path, text.encode("utf-8"), exclusive=exclusive)


def write_json(path, obj):
  """Writes `obj` as indented JSON to `path` atomically."""
  write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path):
  """The JSON value in file `path` (a local path or a URL), or `None` where there is none."""
  try:
    with tf.io.gfile.GFile(os.fspath(path), "rb") as f:
      return json.loads(f.read())
  # FailedPrecondition: a folder above `path` is a file, so there is no file at `path` either
  # (whoever writes there says so, naming the folder: `make_writable_dir`).
  except (tf.errors.NotFoundError, tf.errors.FailedPreconditionError):
    return None


def is_local(path):
  """Whether `path` is a local path, not the URL of another file system (`gs://...`)."""
  return "://" not in os.fspath(path)


def make_writable_dir(path, argument):
  """Creates the folder `path` if needed and checks that files can be written there.

  Args:
    path: The folder, a local path or a URL (`gs://...`).
    argument: The argument that named it, for the message.

  Raises:
    NotADirectoryError: `path`, or a folder above it, is a file.
    PermissionError: The folder cannot be created or written to.
  """
  path = os.fspath(path)
  if not is_local(path):
    _make_writable_remote_dir(path, argument)
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


def check_output_dir(path, argument):
  """Refuses, before any work, a folder that `make_writable_dir` would refuse later, without
  creating it: `path` or a folder above it is a file, the nearest existing folder cannot be
  written to, or (a URL) its file system cannot be read or reached.

  Args:
    path: The folder, a local path or a URL (`gs://...`).
    argument: The argument that named it, for the message.

  Raises:
    NotADirectoryError: `path`, or a folder above it, is a file.
    PermissionError: The nearest existing folder cannot be written to.
    errors.UsageError, errors.UnreachableError: A URL TensorFlow cannot read, storage it
      cannot reach (see `file_systems`).
  """
  path = os.fspath(path)
  if not is_local(path):
    file_systems.check_reachable(path, argument)
    with file_systems.reaching(path, argument):
      if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise NotADirectoryError(f"{argument}={path!r} is a file: pass a folder.")
    return
  existing = os.path.abspath(path)
  while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise NotADirectoryError(f"{argument}={path!r} is a file, or inside one: pass a folder.")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise PermissionError(f"{argument}={path!r} cannot be written to ({existing} is not "
                          f"writable): pass a {argument}= folder you can write to.")


def _make_writable_remote_dir(path, argument):
  """`make_writable_dir` of a URL: an object written and deleted proves the rights."""
  file_systems.check_reachable(path, argument)
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise NotADirectoryError(f"{argument}={path!r} is a file: pass a folder.")
  probe = os.path.join(path, _prefix("write-probe", _PARTIAL) + _random_suffix())
  try:
    tf.io.gfile.makedirs(path)
    with tf.io.gfile.GFile(probe, "wb") as f:
      f.write(b"")
    tf.io.gfile.remove(probe)
  except tf.errors.OpError as e:
    raise PermissionError(f"{argument}={path!r} cannot be written to ({e.message}): pass a "
                          f"{argument}= folder you can write to.") from None


def remove_leftovers(folder, name=None):
  """Deletes what interrupted writes into `folder` left behind.

  Args:
    folder: The folder of the targets; nothing happens if it does not exist.
    name: Only the leftovers of writes of this target; default: of every target.

  Returns:
    The paths deleted.
  """
  folder = os.fspath(folder)
  removed = []
  for entry in _listdir(folder):
    if _is_leftover(entry, name):
      removed.append(os.path.join(folder, entry))
      _delete(removed[-1])
  return removed


def _listdir(folder):
  """The names in `folder`; none if it is not a folder."""
  try:
    if is_local(folder):
      return os.listdir(folder)
    # Object stores list a folder as `name/`.
    return [entry.rstrip("/") for entry in tf.io.gfile.listdir(folder)]
  except (FileNotFoundError, NotADirectoryError, tf.errors.NotFoundError):
    return []


def remove(path):
  """Deletes the file or folder `path` (a local path or a URL) if it is there."""
  _delete(_normalized(path))


def _delete(path):
  """Deletes file or folder `path` if it is there (a local link, not what it points to)."""
  if not is_local(path):
    with contextlib.suppress(tf.errors.NotFoundError):
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
      else:
        tf.io.gfile.remove(path)
  elif os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path, ignore_errors=True)
  else:
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


def _is_leftover(entry, name):
  """Whether file `entry` is what a write of `name` (of any target if `None`) left behind
  in a process that is gone."""
  match = _LEFTOVER.match(entry)
  return bool(match and (name is None or match["name"] == name)
              and not _is_running(int(match["pid"])))


def _normalized(path):
  """`path` made absolute if local; a URL is not a path of this machine."""
  path = os.fspath(path)
  return os.path.abspath(path) if is_local(path) else path


def _prefix(name, kind):
  return f".{name}.{kind}-{os.getpid()}-"


def _random_suffix():
  """8 characters that make a temporary name unique, as `tempfile`'s do (which cannot name
  objects of other file systems)."""
  return uuid.uuid4().hex[:8]


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

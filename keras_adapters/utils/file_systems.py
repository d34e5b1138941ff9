"""Paths on TensorFlow's file systems (`gs://`, `ram://`, ...), and what to tell a user when
one cannot be reached or read at all.

`tf.io.gfile` reads local paths and the URLs of the file systems TensorFlow registers; other
URLs (`https://`) fail with `UnimplementedError`, and Cloud Storage without network or
credentials with a page of libcurl text (`FailedPreconditionError`,
`UnavailableError`, ...). `reaching(path, argument)` turns both into one line naming the
argument and the path: an `errors.UsageError` for a scheme TensorFlow cannot read (download
the file first), an `errors.UnreachableError` (exit status 1) for storage that cannot be
reached.
"""

import contextlib
import re

import tensorflow as tf

from keras_adapters.utils import errors

# `scheme://` at the start of a path (`gs://`, `https://`), not a Windows drive (`C:\`).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
# What TensorFlow's Cloud Storage (and other HTTP-based) file systems say when they cannot
# reach the service or get credentials.
_UNREACHABLE = re.compile(
    r"libcurl|HTTP request|resolve host|bearer token|credentials|metadata server|"
    r"Connection refused|Couldn't connect|timed out|Timeout", re.I)


def scheme(path: str) -> str:
  """The URL scheme of `path` (`"gs"`), or `""` for a local path."""
  match = _SCHEME.match(str(path))
  return match.group(1).lower() if match else ""


def translated(error: BaseException, path: str, argument: str):
  """The one-line error a user should see for `error`, raised by `tf.io.gfile` on `path`
  (named by `argument`, e.g. `"data_path"`), or `None` to keep `error` as it is."""
  if not isinstance(error, tf.errors.OpError):
    return None
  message = " ".join(str(error.message).split())
  if isinstance(error, tf.errors.UnimplementedError) and "File system scheme" in message:
    return errors.UsageError(
        f"{argument}={path!r}: TensorFlow has no file system for {scheme(path) or 'this'}:// "
        "URLs; it reads local paths and its own file systems (gs://, ram://, and others "
        "that packages such as tensorflow-io register), not web URLs. Download the file "
        "first and pass its local path.")
  if scheme(path) and _UNREACHABLE.search(message):
    service = "Cloud Storage" if scheme(path) == "gs" else f"The {scheme(path)}:// file system"
    return errors.UnreachableError(
        f"{argument}={path!r}: {service} cannot be reached (no network, or no credentials: "
        "run `gcloud auth application-default login` or set "
        "GOOGLE_APPLICATION_CREDENTIALS), or pass a local path. "
        f"[{type(error).__name__}: {_first_sentence(message)}]")
  return None


@contextlib.contextmanager
def reaching(path: str, argument: str):
  """Runs its block (`tf.io.gfile` calls on `path`), re-raising what `translated` names."""
  try:
    yield
  except tf.errors.OpError as e:
    better = translated(e, path, argument)
    if better is None:
      raise
    raise better from None


def check_reachable(path: str, argument: str) -> None:
  """Raises the error of `translated` when `path` is a URL that cannot be read at all (an
  unknown scheme, storage that cannot be reached); a local path is not looked at."""
  if scheme(path) and scheme(path) != "file":
    with reaching(path, argument):
      tf.io.gfile.exists(path)


def _first_sentence(message: str) -> str:
  return message.split(", error details")[0][:200]

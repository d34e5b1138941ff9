"""The errors this library raises on purpose, by who can fix them.

A caller (and `experiments/cli.py`, which turns them into exit statuses) tells a mistake in
what was asked from a run that failed, and both from a bug in the library:

* `UsageError` (and `DataError` for the data itself): another argument, flag, path or file
  fixes it; the message names what was given and what to give instead. Exit status 2.
* `RunFailedError`: valid settings, yet the run failed (no trial of a search completed); the
  message says what happened. Exit status 1. `UnreachableError`, one of them, is storage
  (`gs://`) that cannot be reached: no network or no credentials.

Both are also the built-in types callers already catch (`ValueError`, `RuntimeError`).
"""


class KerasAdaptersError(Exception):
  """Base of the errors this library raises on purpose."""


class UsageError(KerasAdaptersError, ValueError):
  """An argument, setting, flag or path that is wrong; the message names it and the fix."""


class DataError(UsageError):
  """Data that cannot be used as it is; the message names the file, the row and the fix."""


class RunFailedError(KerasAdaptersError, RuntimeError):
  """A run with valid settings that failed; the message says what happened."""


class UnreachableError(RunFailedError):
  """A file system or service that valid settings name cannot be reached (no network, no
  credentials); the message names the path. Exit status 1, as a disk error's."""

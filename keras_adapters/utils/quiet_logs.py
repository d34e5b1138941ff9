"""Silences absl's INFO lines around library calls whose step-by-step logs are not for users."""

import contextlib

from absl import logging as absl_logging


@contextlib.contextmanager
def absl_warnings_only():
  """A context in which absl logs warnings and errors only; the verbosity is restored after.

  The Model Garden's TF Hub exporters log every step at INFO level.
  """
  verbosity = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.WARNING)
  try:
    yield
  finally:
    absl_logging.set_verbosity(verbosity)

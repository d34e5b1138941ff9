"""Test helpers that need no model: what autograph is asked to convert."""

import contextlib
from unittest import mock

from tensorflow.python.autograph.impl import api as autograph_api


@contextlib.contextmanager
def autograph_conversions():
  """Yields a list that fills with the qualified names of the functions autograph is asked to
  convert inside the block. A `tf.function` with autograph calls `converted_call` on its
  function (and on what that calls) as it traces, whether converted before or not, so a name
  missing from the list was traced without autograph."""
  names = []
  convert = autograph_api.converted_call

  def record(function, *args, **kwargs):
    names.append(getattr(function, "__qualname__", type(function).__name__))
    return convert(function, *args, **kwargs)

  with mock.patch.object(autograph_api, "converted_call", record):
    yield names

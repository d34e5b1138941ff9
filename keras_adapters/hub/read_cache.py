"""What reading a base SavedModel gave, kept for the next reader in this process.

Several models around one base (the tasks of a run, of a multi-task export, tests) read it
once. A small base's read is kept for the next one (the embedded default: 91 MB); a larger
one only while something holds it, as a copy kept beside every model built from it would add
the base's size to a training run's memory (BERT-large: 1.3 GB).
"""

import collections
import os
from typing import Optional, Tuple
import weakref

SMALL_BASE_BYTES = 128 * 2**20
_SMALL_BASES_KEPT = 2


def cache_key(handle: str) -> Tuple[str, Optional[float]]:
  """What keys a SavedModel read or loaded once per process: its handle and the modification
  time of its `saved_model.pb`, so that one rewritten in place is read again (`None` for a URL
  or a folder without one)."""
  saved_model_pb = os.path.join(handle, "saved_model.pb")
  if not os.path.isfile(saved_model_pb):
    return (handle, None)
  return (os.path.abspath(handle), os.path.getmtime(saved_model_pb))


def weights_nbytes(read) -> int:
  """The size in bytes of a base's read: its `weights`, a dict of numpy arrays."""
  return sum(value.nbytes for value in read.weights.values())


class ReadCache:
  """`get(handle, read)`: `read(handle)`, called once per SavedModel (as `cache_key`
  names it) while its read is small or held.

  Args:
    nbytes: The size in bytes of what `read` returns (an object a weak reference can name);
      by default its `weights`' size.
  """

  def __init__(self, nbytes=weights_nbytes):
    self._nbytes = nbytes
    self._small = collections.OrderedDict()
    self._in_use = weakref.WeakValueDictionary()

  def get(self, handle, read):
    key = cache_key(handle)
    found = self._small.get(key) or self._in_use.get(key)
    if found is not None:
      return found
    found = read(handle)
    self._in_use[key] = found
    if self._nbytes(found) <= SMALL_BASE_BYTES:
      self._small[key] = found
      while len(self._small) > _SMALL_BASES_KEPT:
        self._small.popitem(last=False)
    return found

  def clear(self):
    """Forgets every read, so that the next `get` reads again."""
    self._small.clear()
    self._in_use.clear()

"""Where the library keeps its cache, and paths as committed records should hold them: no
folder of the machine that wrote them."""

import os
import tempfile
from typing import Any


def cache_dir():
  """The cache root: `$KERAS_ADAPTERS_CACHE`, else `~/.cache/keras_adapters`."""
  return os.environ.get("KERAS_ADAPTERS_CACHE") or os.path.join(
      os.path.expanduser("~"), ".cache", "keras_adapters")


def portable(value: Any, root: str) -> Any:
  """`value` with this machine's folders in its strings written as handles.

  Paths inside `root` become relative to it, the model cache `<cache>` (see
  `cache_dir`) and the temporary folder `<tmp>`; dicts, lists and tuples are
  rewritten item by item, other values kept.

  Args:
    value: A JSON-like value, such as a results record.
    root: The folder that paths are made relative to, usually the repository.

  Returns:
    The rewritten value.
  """
  if isinstance(value, str):
    for folder, handle in ((os.path.abspath(root) + os.sep, ""),
                           (os.path.abspath(cache_dir()), "<cache>"),
                           (os.path.abspath(tempfile.gettempdir()), "<tmp>")):
      value = value.replace(folder, handle)
    return value
  if isinstance(value, dict):
    return {key: portable(item, root) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [portable(item, root) for item in value]
  return value

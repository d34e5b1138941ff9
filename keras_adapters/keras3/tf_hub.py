"""Where a TF Hub model is on this machine, and its restored object, for the Keras 3 face.

TensorFlow restores a TF Hub SavedModel (`tf.saved_model.load`) without Keras 2. What needs
Keras 2 (`tensorflow_hub`'s download of a URL, the Model Garden's conversion of the embedded
default on first use) runs in a Python process of its own, so that this one never loads it.
"""

import functools
import os
import subprocess
import sys

import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers the tokenizers' ops)

from keras_adapters.hub import default_model
from keras_adapters.utils import errors


def load(handle, default, what):
  """The local folder of `handle` and its restored SavedModel.

  Args:
    handle: A local SavedModel folder, a TF Hub or Kaggle URL, or `None` for the embedded
      default's model `default` names (`"hub"` or `"preprocess"`).
    default: `"hub"` or `"preprocess"`: which of the default's models `None` means.
    what: What the handle should hold, for errors ("TF Hub BERT encoder").

  Raises:
    UsageError: No SavedModel there, or it cannot be fetched or restored.
  """
  folder = local_folder(handle, default)
  if not tf.saved_model.contains_saved_model(folder):
    raise errors.UsageError(
        f"No {what} at {folder!r}: it is not a folder holding a SavedModel (saved_model.pb). "
        "Pass the SavedModel's folder, a TF Hub URL, or None for the embedded default.")
  try:
    return folder, tf.saved_model.load(folder)
  except Exception as error:  # pylint: disable=broad-except
    raise errors.UsageError(
        f"The SavedModel at {folder!r} cannot be restored as a {what} "
        f"({str(error).splitlines()[0][:200]}).") from None


def local_folder(handle, default):
  """The local folder of `handle` (see `load`): a URL downloaded, `None` the default's."""
  if handle is None:
    # Converted already on most calls: then found here, without a process of its own.
    return default_model.converted(default) or _in_keras2_process(
        f"from keras_adapters.hub import default_model as d; "
        f"print(d.default_{default}_handle())")
  handle = os.fspath(handle)
  if "://" in handle:
    return _in_keras2_process("import sys, tensorflow_hub as h; print(h.resolve(sys.argv[1]))",
                              handle)
  return handle


@functools.lru_cache(maxsize=None)
def _in_keras2_process(code, *arguments):
  """The last line `code` prints, run in a fresh Python; a failure's own message, one line."""
  result = subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True,
                          text=True, check=False)
  if result.returncode:
    lines = result.stderr.strip().splitlines() or ["it failed with no message"]
    raise errors.UsageError(lines[-1].split(": ", 1)[-1])
  return result.stdout.strip().splitlines()[-1]

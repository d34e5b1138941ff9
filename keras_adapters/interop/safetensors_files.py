"""Reading the safetensors files of the PyTorch libraries' artifacts, or a clear error."""

from safetensors import numpy as safetensors_numpy
import tensorflow as tf


def read_safetensors(path, error, fix):
  """The tensors of the safetensors file at `path` (any TF file system), as NumPy arrays.

  Args:
    path: The file; it must exist.
    error: The exception type to raise for a cut or damaged file.
    fix: What the message tells the user to do (how to write the file again).

  Raises:
    error: The file is incomplete or not a safetensors file.
  """
  with tf.io.gfile.GFile(path, "rb") as file:
    data = file.read()
  try:
    return safetensors_numpy.load(data)
  except Exception as cause:  # pylint: disable=broad-except
    # safetensors raises its own SafetensorError (and others) on a cut or damaged file.
    raise error(f"{path!r} is incomplete or corrupt ({len(data):,} bytes; {cause}): a "
                f"download or copy was cut short? Copy it again, or {fix}") from None

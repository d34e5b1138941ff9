"""Reading the safetensors files of the PyTorch libraries' artifacts, or a clear error."""

import numpy as np
import safetensors
import tensorflow as tf

# The float types a PyTorch adapter is saved in (peft and AdapterHub keep the model's dtype:
# a model loaded in half precision saves F16 or BF16), by safetensors' names. They are read
# as float32, the models' weights here: exactly, since every F16 and BF16 value is a float32.
_FLOAT_TYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
                "BF16": tf.bfloat16.as_numpy_dtype}


def read_safetensors(path, error, fix):
  """The tensors of the safetensors file at `path` (any TF file system), as float32 arrays.

  Args:
    path: The file; it must exist.
    error: The exception type to raise for a cut or damaged file.
    fix: What the message tells the user to do (how to write the file again).

  Raises:
    error: The file is incomplete or not a safetensors file, or holds a tensor that is not
      of a float type.
  """
  with tf.io.gfile.GFile(path, "rb") as file:
    data = file.read()
  try:
    views = safetensors.deserialize(data)
  except Exception as cause:  # pylint: disable=broad-except
    # safetensors raises its own SafetensorError (and others) on a cut or damaged file.
    raise error(f"{path!r} is incomplete or corrupt ({len(data):,} bytes; {cause}): a "
                f"download or copy was cut short? Copy it again, or {fix}") from None
  tensors = {}
  for name, view in views:
    dtype = _FLOAT_TYPES.get(view["dtype"])
    if dtype is None:
      raise error(f"{path!r} holds {name!r} as {view['dtype']}; adapter weights are read "
                  f"from {sorted(_FLOAT_TYPES)} tensors. Save the adapter in one of those "
                  "(e.g. after model.float()).")
    # safetensors stores little-endian values.
    values = np.frombuffer(view["data"], np.dtype(dtype).newbyteorder("<"))
    tensors[name] = values.astype(np.float32).reshape(view["shape"])
  return tensors

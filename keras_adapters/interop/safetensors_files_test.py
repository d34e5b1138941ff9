"""Tests for reading the PyTorch libraries' safetensors files."""

import os

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.interop import safetensors_files


class ReadSafetensorsTest(tf.test.TestCase):

  def _write(self, tensors):
    path = os.path.join(self.create_tempdir().full_path, "adapter.safetensors")
    safetensors_numpy.save_file(tensors, path, {"format": "pt"})
    return path

  def _read(self, path):
    return safetensors_files.read_safetensors(path, ValueError, "save it again.")

  def test_every_float_type_reads_as_float32_without_loss(self):
    values = np.random.default_rng(0).normal(size=[3, 4]).astype(np.float32)
    for dtype in (np.float32, np.float16, tf.bfloat16.as_numpy_dtype, np.float64):
      stored = values.astype(dtype)
      read = self._read(self._write({"a.lora_A": stored, "b": stored[0]}))
      self.assertEqual({name: (t.dtype, t.shape) for name, t in read.items()},
                       {"a.lora_A": (np.float32, (3, 4)), "b": (np.float32, (4,))})
      self.assertAllEqual(read["a.lora_A"], stored.astype(np.float32), msg=str(dtype))

  def test_a_tensor_of_another_type_is_named(self):
    path = self._write({"ok": np.ones([2], np.float32), "steps": np.arange(3)})
    with self.assertRaisesRegex(
        ValueError, rf"^'{path}' holds 'steps' as I64; adapter weights are read from \['BF16', "
        r"'F16', 'F32', 'F64'\] tensors. Save the adapter in one of those \(e.g. after "
        r"model.float\(\)\).$"):
      self._read(path)

  def test_a_cut_file_is_named_as_incomplete(self):
    path = self._write({"a": np.ones([64, 64], np.float32)})
    with open(path, "rb") as file:
      data = file.read()
    with open(path, "wb") as file:
      file.write(data[:len(data) // 2])
    with self.assertRaisesRegex(
        ValueError, rf"^'{path}' is incomplete or corrupt \([\d,]+ bytes; .+\): a download or "
        "copy was cut short\\? Copy it again, or save it again.$"):
      self._read(path)


if __name__ == "__main__":
  tf.test.main()

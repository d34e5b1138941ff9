"""Tests for read_cache.ReadCache on reads of a real SavedModel folder, counted."""

import gc
import os
from unittest import mock
import weakref

import numpy as np
import tensorflow as tf

from keras_adapters.hub import read_cache


class _Read:
  """What a read gave: a weak reference can name it, as it can a base's read."""

  def __init__(self, nbytes):
    self.weights = np.zeros(nbytes, np.uint8)


class ReadCacheTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.handles = []
    for name in ("a", "b", "c"):
      handle = os.path.join(self.create_tempdir().full_path, name)
      tf.saved_model.save(tf.Module(), handle)
      self.handles.append(handle)
    self.reads = []
    self.cache = read_cache.ReadCache(lambda read: read.weights.nbytes)

  def _read(self, nbytes):
    def read(handle):
      self.reads.append(handle)
      return _Read(nbytes)
    return read

  def test_a_small_read_is_kept_for_the_next_caller_two_at_most(self):
    first = self.cache.get(self.handles[0], self._read(8))
    self.assertIs(self.cache.get(self.handles[0], self._read(8)), first)
    self.cache.get(self.handles[1], self._read(8))
    self.cache.get(self.handles[2], self._read(8))
    del first
    gc.collect()
    self.cache.get(self.handles[0], self._read(8))  # Pushed out by the two after it.
    self.assertEqual(self.reads, [self.handles[0], *self.handles[1:], self.handles[0]])

  def test_a_large_read_is_kept_only_while_held(self):
    with mock.patch.object(read_cache, "SMALL_BASE_BYTES", 4):
      held = self.cache.get(self.handles[0], self._read(8))
      self.assertIs(self.cache.get(self.handles[0], self._read(8)), held)
      probe = weakref.ref(held)
      del held
      gc.collect()
      self.assertIsNone(probe())
      self.cache.get(self.handles[0], self._read(8))
    self.assertEqual(self.reads, [self.handles[0]] * 2)

  def test_a_rewritten_savedmodel_and_a_cleared_cache_are_read_again(self):
    self.cache.get(self.handles[0], self._read(8))
    path = os.path.join(self.handles[0], "saved_model.pb")
    os.utime(path, (1, 1))  # Another modification time: another SavedModel.
    self.cache.get(self.handles[0], self._read(8))
    self.cache.clear()
    self.cache.get(self.handles[0], self._read(8))
    self.assertEqual(self.reads, [self.handles[0]] * 3)


if __name__ == "__main__":
  tf.test.main()

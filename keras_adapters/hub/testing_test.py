"""Tests for the tiny exports' session cache (`built_once`)."""

import os
import threading
import time
from unittest import mock

import tensorflow as tf

from keras_adapters.hub import testing


def _counting_build(builds):
  def build(root):
    builds.append(root)
    time.sleep(0.2)  # Long enough for a second caller to arrive while this one builds.
    os.makedirs(os.path.join(root, "model"))
    with open(os.path.join(root, "model", "weights"), "w", encoding="utf-8") as f:
      f.write("w")
    return os.path.join(root, "model")
  return build


class BuiltOnceTest(tf.test.TestCase):

  def test_callers_of_one_session_share_one_build(self):
    cache, builds, paths = self.create_tempdir().full_path, [], []
    with mock.patch.dict(os.environ, {testing.SESSION_CACHE: cache}):
      callers = [threading.Thread(target=lambda: paths.append(
          testing.built_once(("model", 1), _counting_build(builds)))) for _ in range(3)]
      for caller in callers:
        caller.start()
      for caller in callers:
        caller.join()
      other = testing.built_once(("model", 2), _counting_build(builds))
    self.assertLen(builds, 2)
    self.assertLen(set(paths), 1)
    self.assertStartsWith(paths[0], cache)
    self.assertTrue(os.path.exists(os.path.join(paths[0], "weights")))
    self.assertNotEqual(other, paths[0])
    self.assertEmpty([name for name in os.listdir(cache) if ".partial-" in name])

  def test_without_a_session_or_with_an_object_s_address_each_call_builds(self):
    cache, builds = self.create_tempdir().full_path, []
    with mock.patch.dict(os.environ, {testing.SESSION_CACHE: ""}):
      first = testing.built_once(("model", 1), _counting_build(builds))
    with mock.patch.dict(os.environ, {testing.SESSION_CACHE: cache}):
      second = testing.built_once(("model", object()), _counting_build(builds))
    self.assertLen(builds, 2)
    self.assertNotEqual(first, second)
    self.assertEmpty(os.listdir(cache))


if __name__ == "__main__":
  tf.test.main()

"""The set-up every `tf.test.TestCase` of the suite gets from conftest.py: each test starts from
TensorFlow's, Python's and NumPy's default seeds, without TensorFlow's caches emptied (its
instantiated functions kept); a test that sets the seed itself restarts the random streams."""

import random

import numpy as np
import tensorflow as tf

# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.eager import context
from tensorflow.python.framework import random_seed
# pylint: enable=g-direct-tensorflow-import

# A stateful random op's values, test by test, in this class's (alphabetical) order.
_DRAWN = []


class SuiteSetUpTest(tf.test.TestCase):

  def _assert_default_seeds(self):
    self.assertEqual(context.global_seed(), random_seed.DEFAULT_GRAPH_SEED)
    self.assertEqual(random.random(), random.Random(random_seed.DEFAULT_GRAPH_SEED).random())
    self.assertEqual(np.random.random(),
                     np.random.RandomState(random_seed.DEFAULT_GRAPH_SEED).random_sample())

  def test_1_starts_from_the_default_seeds(self):
    self._assert_default_seeds()
    _DRAWN.append(float(tf.random.uniform([], seed=1)))

  def test_2_keeps_tensorflow_s_kernels_and_their_random_streams(self):
    self._assert_default_seeds()
    # The op seeds restart with the global seed, but the kernel kept from the first test goes
    # on with its stream: had the cache been emptied, this would repeat its value.
    _DRAWN.append(float(tf.random.uniform([], seed=1)))
    self.assertLen(_DRAWN, 2)
    self.assertNotEqual(_DRAWN[1], _DRAWN[0])

  def test_3_setting_the_seed_restarts_the_streams(self):
    tf.random.set_seed(random_seed.DEFAULT_GRAPH_SEED)
    self.assertEqual(float(tf.random.uniform([], seed=1)), _DRAWN[0])


if __name__ == "__main__":
  tf.test.main()

"""pytest set-up shared by every test.

Keras 2 and the CPU's kernels must be chosen before TensorFlow loads, and the CPU is split
into two logical devices before TensorFlow initialises it, so that
`tf.distribute.MirroredStrategy` can run a real two-replica job on one machine.
Single-device code is unaffected: it runs on the first one.
"""

import atexit
import os
import random
import shutil
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Tests never fetch the default base model from the package index: a cache without it gets the
# one-line install command (`keras_adapters.hub.default_model`).
os.environ["KERAS_ADAPTERS_OFFLINE"] = "1"
# Tests name fixed folders under absl's test folder: each pytest-xdist worker gets its own,
# set before absl reads it.
if os.environ.get("PYTEST_XDIST_WORKER"):
  os.environ["TEST_TMPDIR"] = os.path.join(
      tempfile.gettempdir(), f"absl_testing_{os.environ['PYTEST_XDIST_WORKER']}")
  # The workers already keep every core busy: each one, and the processes its tests start,
  # computes an op on its share of the cores instead of a thread per core that the others
  # contend for. (Ops still run side by side: collectives need the inter-op threads.)
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(1, (os.cpu_count() or 1) // int(
      os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The tests' JAX processes compile the same tiny models' steps again and again: JAX's own
# persistent cache, one folder for the run (made by the first process, inherited by the
# workers and their children), halves the CPU time of each after the first.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jax_cache_")
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], True)
# The tiny TF Hub exports the tests build (`keras_adapters.hub.testing.built_once`): built
# once for the run in one folder, shared the same way, instead of once in every process.
if "KERAS_ADAPTERS_TEST_CACHE" not in os.environ:
  os.environ["KERAS_ADAPTERS_TEST_CACHE"] = tempfile.mkdtemp(prefix="tiny_exports_")
  atexit.register(shutil.rmtree, os.environ["KERAS_ADAPTERS_TEST_CACHE"], True)
# What reading each base proved (`keras_adapters.hub.proofs`): kept for the run in one
# folder, shared the same way, so that each base is proven in the run, once, and never by a
# record an earlier run (of other code) left in the user's cache.
if "KERAS_ADAPTERS_PROOFS" not in os.environ:
  os.environ["KERAS_ADAPTERS_PROOFS"] = tempfile.mkdtemp(prefix="proofs_")
  atexit.register(shutil.rmtree, os.environ["KERAS_ADAPTERS_PROOFS"], True)

# The tests run the CPU kernels users get: importing keras_adapters before TensorFlow, as the
# README does, chooses them (oneDNN on every x86-64 CPU, AVX2-only ones included), and every
# test process started from here inherits the choice.
import keras_adapters  # pylint: disable=g-import-not-at-top,unused-import
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from keras_adapters.utils import warm_python  # pylint: disable=g-import-not-at-top

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

# tf.test.TestCase helpers (create_tempdir, ...) read absl flags, which pytest never parses.
from absl import flags  # pylint: disable=g-import-not-at-top

flags.FLAGS.mark_as_parsed()

# pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
from tensorflow.python.eager import context
from tensorflow.python.framework import random_seed
from tensorflow.python.framework import test_util
# pylint: enable=g-import-not-at-top,g-direct-tensorflow-import

_tf_test_case_set_up = test_util.TensorFlowTestCase.setUp


def _set_up_keeping_tensorflow_s_functions(self):
  """`tf.test.TestCase.setUp`, whose global seed no longer empties TensorFlow's caches.

  TensorFlow clears its eager kernel cache whenever the global seed is set (so that stateful
  random ops restart their streams), and with it every function instantiated so far: the
  session's preprocessing models, encoders and steps were optimised again in each test that
  called them. Each test still starts from the same global seed, and
  from the same Python and NumPy seeds; a test that needs a stateful random op's stream from
  its start sets the seed itself (`tf.random.set_seed`, `keras.utils.set_random_seed` clear
  the cache as before), as the library's runs do.
  """
  self._set_default_seed = False  # pylint: disable=protected-access
  _tf_test_case_set_up(self)
  if context.executing_eagerly():
    # `tf.random.set_seed` in eager mode (`Context._set_global_seed`) but for the clearing.
    eager = context.context()
    eager._seed = random_seed.DEFAULT_GRAPH_SEED  # pylint: disable=protected-access
    eager._rng = random.Random(random_seed.DEFAULT_GRAPH_SEED)  # pylint: disable=protected-access
  else:
    random_seed.set_random_seed(random_seed.DEFAULT_GRAPH_SEED)


test_util.TensorFlowTestCase.setUp = _set_up_keeping_tensorflow_s_functions


def pytest_collection_modifyitems(config, items):
  """Drops `tf.test.TestCase.test_session`, a deprecated context manager, not a test."""
  del config
  items[:] = [item for item in items if item.name != "test_session"]


def pytest_configure(config):
  """Starts the warm Python the tests' scripts fork from (`keras_adapters.utils.warm_python`)
  in each process that runs tests: not in pytest-xdist's controller, which runs none."""
  if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
    warm_python.start()

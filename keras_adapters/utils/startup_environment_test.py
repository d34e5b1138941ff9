"""Tests of `startup_environment`: the log level and Keras 3's backend a command line sets
from its arguments alone, before TensorFlow loads."""

from unittest import mock

from absl.testing import absltest

from keras_adapters.utils import startup_environment


def _set(argv, environ=None, installed=True):
  with mock.patch.object(startup_environment.importlib.util, "find_spec",
                         side_effect=lambda name: object() if installed else None):
    return startup_environment.set_before_tensorflow(argv, environ or {})


class LogLevelTest(absltest.TestCase):

  def test_quiet_where_unset_unless_verbose_or_chosen(self):
    self.assertEqual(_set(["x"]), {"TF_CPP_MIN_LOG_LEVEL": "3"})
    self.assertEqual(_set(["x", "--verbose"]), {})
    self.assertEqual(_set(["x"], {"TF_CPP_MIN_LOG_LEVEL": "0"}), {})


class BackendTest(absltest.TestCase):

  def _backend(self, argv, installed=True):
    return _set(argv, {"TF_CPP_MIN_LOG_LEVEL": "2"}, installed).get("KERAS_BACKEND")

  def test_the_last_backend_given_either_way_is_set(self):
    self.assertEqual(self._backend(["x", "--backend=jax"]), "jax")
    self.assertEqual(self._backend(["x", "--backend", "jax"]), "jax")
    self.assertEqual(self._backend(["x", "--backend=jax", "--backend=tensorflow"]),
                     "tensorflow")

  def test_nothing_is_set_for_no_unknown_or_missing_backend(self):
    """Left to the parsed flags to refuse in one line (`keras_choice.check_backend`), not to
    Keras's import to fail with a traceback."""
    self.assertIsNone(self._backend(["x", "--keras=3"]))
    self.assertIsNone(self._backend(["x", "--backend=torch"]))
    self.assertIsNone(self._backend(["x", "--backend=jax"], installed=False))
    self.assertIsNone(self._backend(["x", "--backend"]))


if __name__ == "__main__":
  absltest.main()

"""Tests of `keras_choice`: `--backend` read from the command line before Keras loads."""

import os
from unittest import mock

import tensorflow as tf

from keras_adapters.cli import keras_choice


class SetBackendFromArgvTest(tf.test.TestCase):

  def _backend_after(self, argv, installed=True):
    with mock.patch.dict(os.environ, {"KERAS_BACKEND": "before"}), mock.patch.object(
        keras_choice.importlib.util, "find_spec",
        side_effect=lambda name: object() if installed else None):
      keras_choice.set_backend_from_argv(argv)
      return os.environ["KERAS_BACKEND"]

  def test_the_last_backend_given_either_way_is_set(self):
    self.assertEqual(self._backend_after(["x", "--backend=jax"]), "jax")
    self.assertEqual(self._backend_after(["x", "--backend", "jax"]), "jax")
    self.assertEqual(self._backend_after(["x", "--backend=jax", "--backend=tensorflow"]),
                     "tensorflow")

  def test_nothing_is_set_for_no_unknown_or_missing_backend(self):
    """Left to the parsed flags to refuse in one line (`check_backend`), not to Keras's
    import to fail with a traceback."""
    self.assertEqual(self._backend_after(["x", "--keras=3"]), "before")
    self.assertEqual(self._backend_after(["x", "--backend=torch"]), "before")
    self.assertEqual(self._backend_after(["x", "--backend=jax"], installed=False), "before")
    self.assertEqual(self._backend_after(["x", "--backend"]), "before")


if __name__ == "__main__":
  tf.test.main()

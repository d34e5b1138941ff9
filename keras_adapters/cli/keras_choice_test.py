"""Tests of `keras_choice`: `--backend` read from the command line before Keras loads, and
`--keras=3` refused where a command line trains on Keras 2 only."""

import os
from unittest import mock

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from keras_adapters.cli import keras_choice
from keras_adapters.utils import errors

keras_choice.define_flags()


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


class Keras2OnlyTest(tf.test.TestCase):

  def test_keras3_is_refused_naming_the_command_lines_that_take_it(self):
    with flagsaver.flagsaver():
      flags.FLAGS(["run_squad", "--keras=3"])
      with self.assertRaises(errors.UsageError) as refused:
        keras_choice.keras2_only()
    self.assertEqual(str(refused.exception), (
        "--keras=3: this command line trains on Keras 2 only; --keras=3 is taken by "
        "keras-adapters-classify (run_classification.py) and keras-adapters-glue "
        "(run_glue.py): drop --keras=3 here."))

  def test_keras2_passes_and_a_backend_without_keras3_is_refused(self):
    with flagsaver.flagsaver():
      flags.FLAGS(["run_squad"])
      keras_choice.keras2_only()
      flags.FLAGS(["run_squad", "--backend=jax"])
      with self.assertRaisesRegex(errors.UsageError, "^--backend=jax picks Keras 3's backend"):
        keras_choice.keras2_only()


if __name__ == "__main__":
  tf.test.main()

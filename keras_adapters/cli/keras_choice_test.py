"""Tests of `keras_choice`: `--keras=3` refused where a command line trains on Keras 2 only."""

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from keras_adapters.cli import keras_choice
from keras_adapters.utils import errors

keras_choice.define_flags()


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

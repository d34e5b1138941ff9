"""Tests for quiet_logs."""

from absl import logging as absl_logging
import tensorflow as tf

from keras_adapters.utils import quiet_logs


class QuietLogsTest(tf.test.TestCase):

  def test_warnings_only_inside_and_restored_after(self):
    absl_logging.set_verbosity(absl_logging.INFO)
    with quiet_logs.absl_warnings_only():
      self.assertEqual(absl_logging.get_verbosity(), absl_logging.WARNING)
    self.assertEqual(absl_logging.get_verbosity(), absl_logging.INFO)

  def test_restored_after_an_error(self):
    absl_logging.set_verbosity(absl_logging.DEBUG)
    with self.assertRaises(RuntimeError), quiet_logs.absl_warnings_only():
      raise RuntimeError("inside")
    self.assertEqual(absl_logging.get_verbosity(), absl_logging.DEBUG)


if __name__ == "__main__":
  tf.test.main()

"""Tests for distribution.get_strategy: every branch, on a CPU split into two logical devices."""

from unittest import mock

import tensorflow as tf

from keras_adapters.training import distribution

_CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
_CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


class GetStrategyTest(tf.test.TestCase):

  def test_default_is_tensorflows_default_strategy(self):
    strategy = distribution.get_strategy("Default")
    self.assertIs(strategy, tf.distribute.get_strategy())
    self.assertEqual(strategy.num_replicas_in_sync, 1)

  def test_one_device_uses_cpu0_without_gpus(self):
    strategy = distribution.get_strategy("one_device")
    self.assertIsInstance(strategy, tf.distribute.OneDeviceStrategy)
    self.assertEqual(strategy.extended.worker_devices, (_CPU0,))

  def test_mirrored_uses_the_logical_cpus(self):
    strategy = distribution.get_strategy("mirrored")
    self.assertIsInstance(strategy, tf.distribute.MirroredStrategy)
    self.assertEqual(strategy.extended.worker_devices, (_CPU0, _CPU1))

  def test_mirrored_uses_cpu0_when_the_cpu_is_not_split(self):
    cpus = tf.config.list_logical_devices("CPU")[:1]
    with mock.patch.object(tf.config, "list_logical_devices",
                           side_effect=lambda kind: cpus if kind == "CPU" else []):
      strategy = distribution.get_strategy("mirrored")
    self.assertEqual(strategy.extended.worker_devices, (_CPU0,))

  def test_multi_worker_mirrored_is_one_local_worker_without_tf_config(self):
    strategy = distribution.get_strategy("multi_worker_mirrored")
    self.assertIsInstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    self.assertEqual(strategy.num_replicas_in_sync, 1)

  def test_no_tpu_fails_fast_with_a_hint(self):
    for kwargs in ({"strategy": "tpu"}, {"tpu": "local"}):
      with self.subTest(**kwargs):
        with self.assertRaisesRegex(distribution.TPUNotFoundError,
                                    r"No TPU was found at tpu='local'.*"
                                    r"strategy='mirrored'") as ctx:
          distribution.get_strategy(**kwargs)
        self.assertIsInstance(ctx.exception.__cause__, tf.errors.NotFoundError)

  def test_tpu_resolver_failure_becomes_tpu_not_found(self):
    # A named TPU is looked up through the Cloud TPU API; fake its failure rather than
    # reach for the network.
    failure = ValueError("Could not lookup TPU metadata")
    with mock.patch.object(tf.distribute.cluster_resolver, "TPUClusterResolver",
                           side_effect=failure):
      with self.assertRaisesRegex(distribution.TPUNotFoundError,
                                  r"No TPU was found at tpu='my-tpu'.*leave tpu unset.*"
                                  r"ValueError: Could not lookup") as ctx:
        distribution.get_strategy("tpu", tpu="my-tpu")
    self.assertIs(ctx.exception.__cause__, failure)

  def test_unknown_strategy_lists_the_valid_ones(self):
    for bad in ("parameter_server", False):
      with self.assertRaisesRegex(ValueError, f"Unknown strategy={bad!r}.*"
                                  "default, one_device, mirrored, multi_worker_mirrored, tpu"):
        distribution.get_strategy(bad)

  def test_tpu_with_another_strategy_is_rejected(self):
    with self.assertRaisesRegex(ValueError, "tpu='local' was given with strategy='mirrored'"):
      distribution.get_strategy("mirrored", tpu="local")

  def test_bad_num_gpus(self):
    with self.assertRaisesRegex(ValueError, "num_gpus must be >= 0"):
      distribution.get_strategy("mirrored", num_gpus=-1)
    with self.assertRaisesRegex(ValueError, r"num_gpus=1 but only 0 GPU\(s\) are visible"):
      distribution.get_strategy("one_device", num_gpus=1)
    gpus = [mock.Mock(), mock.Mock()]
    with mock.patch.object(tf.config, "list_logical_devices", return_value=gpus):
      with self.assertRaisesRegex(ValueError,
                                  "uses one device but num_gpus=2.*strategy='mirrored'"):
        distribution.get_strategy("one_device", num_gpus=2)


if __name__ == "__main__":
  tf.test.main()

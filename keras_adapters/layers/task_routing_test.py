"""Tests for stacked per-task adapters (an encoder routing a batch through them:
`networks/adapted_bert_encoder_test`)."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import task_routing
from keras_adapters.layers import testing


class TaskRoutingTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    keras.utils.set_random_seed(3)
    cls.sets = testing.routed_adapter_sets()
    cls.stacked = testing.stacked_adapter_sets(cls.sets)

  def test_layer_norm_equals_keras(self):
    layer = keras.layers.LayerNormalization(epsilon=1e-12)
    x = tf.random.normal([2, 3, 16])
    layer(x)
    layer.gamma.assign(tf.random.normal([16]))
    layer.beta.assign(tf.random.normal([16]))
    self.assertAllClose(task_routing.layer_norm(x, layer.gamma, layer.beta, 1e-12), layer(x),
                        atol=1e-6)

  def test_stacks_are_padded_to_the_largest_bottleneck(self):
    down_kernel, down_bias, up_kernel, up_bias = self.stacked.adapters[
        "transformer/layer_0/attention_adapter"]
    self.assertEqual(down_kernel.shape, (3, 16, 4))
    self.assertEqual(up_kernel.shape, (3, 4, 16))
    self.assertAllEqual(down_kernel[1], tf.zeros([16, 4]))  # left out in block 0
    self.assertAllEqual(up_kernel[0, :, :], self.sets[0].slots[
        "transformer/layer_0/attention_adapter"].up_project.kernel)
    self.assertEqual(self.stacked.adapters["transformer/layer_1/attention_adapter"][0].shape,
                     (3, 16, 4))
    self.assertEqual(self.stacked.layer_norms["embeddings/layer_norm"][0].shape, (3, 16))

  def test_no_tasks_is_refused(self):
    with self.assertRaisesRegex(ValueError, "at least one task"):
      task_routing.StackedAdapters([], num_layers=2, activation="relu", layer_norm_epsilon=1e-12)


if __name__ == "__main__":
  tf.test.main()

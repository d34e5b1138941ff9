"""Tests for AdapterSet and the adapter-set structures an encoder call takes (an encoder
called with a set: `networks/adapted_bert_encoder_test`)."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import adapter_set
from keras_adapters.layers import testing


class AdapterSetTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(5)

  def test_build_creates_every_adapter_and_layer_norm(self):
    """Adapters in every block not left out; a LayerNorm for each of the encoder's."""
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4, leave_out=(0,))
    layer.build((None, None, 16))
    adapters = layer.encoder_adapters()
    self.assertIsNone(adapters.blocks[0].attention_adapter)
    self.assertIsInstance(adapters.blocks[1].feedforward_adapter, adapter_lib.Adapter)
    self.assertEqual(layer.count_params(), 2 * 148 + 5 * 2 * 16)
    self.assertEqual(adapters.blocks[1].output_layer_norm.gamma.name,
                     f"{layer.name}/transformer/layer_1/output_layer_norm/gamma:0")

  def test_drop_adapters_removes_them_and_leaves_the_layer_norms(self):
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    layer.drop_adapters([1])
    self.assertEqual(layer.leave_out, (1,))
    adapters = layer.encoder_adapters()
    self.assertIsNone(adapters.blocks[1].attention_adapter)
    self.assertIsNotNone(adapters.blocks[1].output_layer_norm)
    self.assertEqual(layer.count_params(), 2 * 148 + 5 * 2 * 16)
    # Still checkpoints (Trainer resumes), and restores into a set dropped the same way.
    path = tf.train.Checkpoint(layer=layer).save(self.create_tempdir().full_path + "/ckpt")
    restored = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    restored.build((None, None, 16))
    restored.drop_adapters([1])
    tf.train.Checkpoint(layer=restored).restore(path).assert_consumed()
    for mine, theirs in zip(layer.weights, restored.weights):
      self.assertAllEqual(mine, theirs)

  def test_layer_contract(self):
    """Weights made by build, config round trip, registered serialization, and gradients for
    every weight of a set that blocks take in place of their own adapters and LayerNorms."""
    blocks = [adapted_transformer_block.AdaptedTransformerBlock(
        num_heads=2, intermediate_size=32, dropout_rate=0.0, attention_dropout_rate=0.0)
              for _ in range(3)]

    def through_blocks(layer, hidden, training):
      """What an encoder does with a set: its embedding LayerNorm, then each block with the
      set's adapters and LayerNorms. A set has no call of its own: it is built, then read."""
      if not layer.built:
        layer.build(hidden.shape)
      adapters = layer.encoder_adapters()
      hidden = adapters.embedding_layer_norm(hidden)
      for block, block_adapters in zip(blocks, adapters.blocks):
        hidden = block(hidden, training=training, adapters=block_adapters)
      return hidden

    testing.run_layer_test(
        self, adapter_set.AdapterSet,
        dict(num_layers=3, adapter_size=2, activation="tanh", init_stddev=0.3, leave_out=(1,),
             layer_norm_epsilon=1e-6, embedding_width=16,
             adapter_options=testing.PLACEMENT_VARIANTS["parallel_own_layer_norms"]),
        tf.random.normal([2, 5, 16]), call=through_blocks, expected_output_shape=(2, 5, 16),
        # Two blocks' two adapters of 4 weights and two own LayerNorms, 7 LayerNorms.
        expected_num_trainable_weights=2 * 2 * 8 + 7 * 2, expected_num_non_trainable_weights=0)


if __name__ == "__main__":
  tf.test.main()

"""Tests for AdapterSet and the adapter-set structures an encoder call takes."""

import inspect

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import adapter_set
from keras_adapters.layers import testing
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision

_TINY = dict(vocab_size=64, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_sequence_length=32, type_vocab_size=2)


def _inputs():
  ids = tf.constant([[2, 9, 10, 3], [2, 11, 3, 0]])
  return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
              input_type_ids=tf.zeros_like(ids))


class AdapterSetTest(tf.test.TestCase, parameterized.TestCase):

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

  def test_keys_match_the_encoders_own(self):
    """One set's weights have the keys of the encoder's own adapters and LayerNorms, which
    are their Model Garden variable names."""
    encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, adapter_size=4)
    encoder(_inputs())
    own = adapter_set.adapter_weights_by_key(encoder.own_adapters())
    self.assertEqual(set(own), {adapted_bert_encoder.canonical_variable_name(w.name)
                                for w in encoder.weights
                                if "_adapter/" in w.name or "layer_norm/" in w.name})
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    weights = adapter_set.adapter_weights_by_key(layer.encoder_adapters())
    self.assertEqual(set(weights), set(own))
    self.assertEqual({k: tuple(w.shape) for k, w in weights.items()},
                     {k: tuple(w.shape) for k, w in own.items()})

  def test_encoder_call_with_a_set_equal_to_its_own_gives_the_same_outputs(self):
    """An encoder called with a set holding a copy of its own weights computes the same."""
    encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, adapter_size=4,
                                                      dropout_rate=0.0)
    encoder(_inputs())
    own = adapter_set.adapter_weights_by_key(encoder.own_adapters())
    rng = np.random.RandomState(0)
    for weight in own.values():
      weight.assign(rng.normal(scale=0.3, size=weight.shape))
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    for key, weight in adapter_set.adapter_weights_by_key(layer.encoder_adapters()).items():
      weight.assign(own[key])
    expected = encoder(_inputs())["sequence_output"]
    self.assertAllClose(encoder(_inputs(), adapters=layer.encoder_adapters())["sequence_output"],
                        expected, atol=1e-6)
    for weight in own.values():
      weight.assign(tf.zeros_like(weight))
    self.assertNotAllClose(encoder(_inputs())["sequence_output"], expected)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_set_in_a_mixed_encoder(self, name, epsilon):
    """Made under a mixed policy, a set keeps float32 variables, its adapters compute in the
    policy's dtype and its LayerNorms in float32; a mixed encoder called with it returns
    float32 near what the float32 encoder returns with the same weights."""
    encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, dropout_rate=0.0)
    encoder(_inputs())
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    rng = np.random.RandomState(0)
    for weight in layer.weights:
      weight.assign(rng.normal(scale=0.3, size=weight.shape))
    with precision.policy_scope(name):
      mixed_encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, dropout_rate=0.0)
      mixed_layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    mixed_encoder(_inputs())
    mixed_encoder.set_weights(encoder.get_weights())
    mixed_layer.build((None, None, 16))
    mixed_layer.set_weights(layer.get_weights())
    self.assertEqual({w.dtype for w in mixed_layer.weights}, {tf.float32})
    adapters = mixed_layer.encoder_adapters()
    self.assertEqual(adapters.blocks[1].feedforward_adapter.compute_dtype, name)
    self.assertEqual(adapters.blocks[1].output_layer_norm.compute_dtype, "float32")
    expected = encoder(_inputs(), adapters=layer.encoder_adapters())
    outputs = mixed_encoder(_inputs(), adapters=adapters)
    for key in ("sequence_output", "pooled_output"):
      self.assertEqual(outputs[key].dtype, tf.float32)
      # Two blocks of one rounding per product: measured up to 0.65 epsilons.
      self.assertLess(testing.mixed_precision_gap(outputs[key], expected[key], epsilon), 3)

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

  def test_get_config_has_every_argument(self):
    layer = adapter_set.AdapterSet(num_layers=3, adapter_size=2, activation="tanh",
                                   init_stddev=0.0, leave_out=(1,), layer_norm_epsilon=1e-6)
    config = layer.get_config()
    for name in inspect.signature(adapter_set.AdapterSet.__init__).parameters:
      if name not in ("self", "kwargs"):
        self.assertIn(name, config)
    self.assertEqual(adapter_set.AdapterSet.from_config(config).get_config(), config)


if __name__ == "__main__":
  tf.test.main()

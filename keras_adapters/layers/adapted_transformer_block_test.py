"""Tests for the BERT Transformer block with Houlsby adapters."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import activations
from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import testing
from keras_adapters.utils import precision

_HIDDEN = 16


def _inputs(shape=(2, 5, _HIDDEN), seed=0):
  return tf.constant(np.random.RandomState(seed).normal(size=shape), tf.float32)


def _block(**kwargs):
  config = dict(num_heads=2, intermediate_size=32, dropout_rate=0.0,
                attention_dropout_rate=0.0, name="block")
  config.update(kwargs)
  return adapted_transformer_block.AdaptedTransformerBlock(**config)


def _randomize(layer, seed=0):
  """Gives every variable of `layer` a random non-trivial value."""
  rng = np.random.RandomState(seed)
  for variable in layer.weights:
    variable.assign(rng.normal(scale=0.3, size=variable.shape))


def _feedforward(block, x):
  """The block's feed-forward sub-layer before its dropout, from its own sub-layers."""
  return block.output_dense(block.intermediate_activation(block.intermediate(x)))


class AdaptedTransformerBlockTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(42)

  @parameterized.named_parameters(
      ("with_adapters", 4),
      ("without_adapters", None),
  )
  def test_output_shape(self, adapter_size):
    """The block maps [batch, seq, hidden] to the same shape."""
    block = _block(adapter_size=adapter_size)
    self.assertEqual(block(_inputs()).shape, tf.TensorShape([2, 5, _HIDDEN]))

  @parameterized.named_parameters(*testing.PLACEMENT_VARIANTS.items())
  def test_layer_contract_of_each_placement(self, options):
    """Each placement, every argument set away from its default: weights made by build,
    config round trip, registered serialization (rebuilt blocks compute the same), output
    shape, gradients for every weight; its adapters where it puts them, named as the Hub
    layout expects."""
    placed = {"attention_adapter": options.get("mh_adapter", True),
              "feedforward_adapter": options.get("output_adapter", True)}
    own_layer_norms = options.get("ln_before", False) + options.get("ln_after", False)
    mask = tf.sequence_mask([5, 3], 5)[:, tf.newaxis, :]
    block = testing.run_layer_test(
        self, adapted_transformer_block.AdaptedTransformerBlock,
        dict(num_heads=2, intermediate_size=32, activation="gelu_approximate", dropout_rate=0.2,
             attention_dropout_rate=0.3, layer_norm_epsilon=1e-6, recompute_attention="always",
             adapter_size=3,
             adapter_activation="tanh", adapter_init_stddev=0.3, adapter_options=options,
             name="block"),
        _inputs(), call=lambda layer, x, training: layer(x, attention_mask=mask,
                                                         training=training),
        expected_output_shape=(2, 5, _HIDDEN),
        # Attention 8, two LayerNorms 4, two dense layers 4; each adapter 4 and 2 per own
        # LayerNorm.
        expected_num_trainable_weights=16 + sum(placed.values()) * (4 + 2 * own_layer_norms),
        expected_num_non_trainable_weights=0)
    self.assertEqual({a.name for a in block.adapters}, {n for n, on in placed.items() if on})
    self.assertIn("block/self_attention_layer_norm/gamma:0", [w.name for w in block.weights])

  def test_no_adapter_weights_without_adapter_size(self):
    """adapter_size=None builds a plain BERT block: no adapters, no adapter variables."""
    block = _block(adapter_size=None)
    block(_inputs())
    self.assertIsNone(block.attention_adapter)
    self.assertIsNone(block.feedforward_adapter)
    self.assertEmpty(block.adapters)
    self.assertFalse(any("adapter" in w.name for w in block.weights))
    with_adapters = _block(adapter_size=4)
    with_adapters(_inputs())
    self.assertLen(with_adapters.adapters, 2)
    self.assertEqual(with_adapters.count_params() - block.count_params(), 2 * 148)

  def test_base_variable_names_follow_model_garden(self):
    """Base variables carry the Model Garden sub-layer names, adapters their own names."""
    block = _block(adapter_size=4)
    block(_inputs())
    names = {w.name for w in block.weights}
    for expected in ("block/self_attention/query/kernel:0",
                     "block/self_attention/attention_output/kernel:0",
                     "block/self_attention_layer_norm/gamma:0",
                     "block/intermediate/kernel:0",
                     "block/output/kernel:0",
                     "block/output_layer_norm/beta:0",
                     "block/attention_adapter/down_project/kernel:0",
                     "block/feedforward_adapter/up_project/bias:0"):
      self.assertIn(expected, names)

  def test_identity_adapters_equal_block_without_adapters(self):
    """With init_stddev=0 adapters, the block computes exactly what a plain block does."""
    x = _inputs()
    plain = _block(adapter_size=None)
    plain(x)
    _randomize(plain)
    adapted = _block(adapter_size=4, adapter_init_stddev=0.0)
    adapted(x)
    plain_by_name = {w.name: w for w in plain.weights}
    copied = 0
    for variable in adapted.weights:
      if variable.name in plain_by_name:
        variable.assign(plain_by_name[variable.name])
        copied += 1
    self.assertEqual(copied, len(plain.weights))
    self.assertAllClose(adapted(x, training=False), plain(x, training=False),
                        atol=1e-6, rtol=1e-6)
    mask = tf.sequence_mask([3, 5], 5)[:, tf.newaxis, :]
    self.assertAllClose(adapted(x, attention_mask=mask), plain(x, attention_mask=mask),
                        atol=1e-6, rtol=1e-6)

  @parameterized.named_parameters(
      ("attention_adapter", "attention_adapter"),
      ("feedforward_adapter", "feedforward_adapter"),
  )
  def test_adapter_sits_before_residual_and_layer_norm(self, adapter_name):
    """An up-projection bias in an adapter acts as if added before its sub-layer's residual + LN.

    The expected value is recomputed by hand from the block's own sub-layers, in the order
    self_attention -> attention_adapter -> self_attention_layer_norm(x + .) -> intermediate ->
    output -> feedforward_adapter -> output_layer_norm(a + .); a bias added after the LayerNorm
    (or an adapter on the residual sum) would give another value.
    """
    x = _inputs()
    block = _block(adapter_size=4, adapter_init_stddev=0.0)
    block(x)
    for variable in block.weights:
      if "adapter" not in variable.name:
        variable.assign(np.random.RandomState(1).normal(scale=0.3, size=variable.shape))
    bias = np.random.RandomState(2).normal(size=[_HIDDEN]).astype(np.float32)
    getattr(block, adapter_name).up_project.bias.assign(bias)
    attention_bias = bias if adapter_name == "attention_adapter" else 0.0
    feedforward_bias = bias if adapter_name == "feedforward_adapter" else 0.0

    attention = block.self_attention(x, training=False)
    a = block.self_attention_layer_norm(x + (attention + attention_bias))
    feedforward = _feedforward(block, a)
    expected = block.output_layer_norm(a + (feedforward + feedforward_bias))
    actual = block(x, training=False)
    self.assertAllClose(actual, expected, atol=1e-5, rtol=1e-5)

    # The bias matters, and not as it would after the LayerNorm.
    a_plain = block.self_attention_layer_norm(x + attention)
    plain = block.output_layer_norm(a_plain + _feedforward(block, a_plain))
    self.assertNotAllClose(actual, plain)
    if adapter_name == "feedforward_adapter":
      self.assertNotAllClose(actual, plain + bias)

  def test_trained_adapters_apply_to_sublayer_outputs_not_residual_sums(self):
    """With non-trivial adapter weights, each adapter maps the sub-layer output alone.

    A bias alone cannot tell `LN(x + Adapter(f))` from `LN(Adapter(x + f))`; random kernels do.
    """
    x = _inputs()
    block = _block(adapter_size=4)
    block(x)
    _randomize(block, seed=5)
    attention = block.self_attention(x, training=False)
    a = block.self_attention_layer_norm(x + block.attention_adapter(attention))
    feedforward = _feedforward(block, a)
    expected = block.output_layer_norm(a + block.feedforward_adapter(feedforward))
    actual = block(x, training=False)
    self.assertAllClose(actual, expected, atol=1e-5, rtol=1e-5)
    a_wrong = block.self_attention_layer_norm(block.attention_adapter(x + attention))
    wrong = block.output_layer_norm(
        block.feedforward_adapter(a_wrong + _feedforward(block, a_wrong)))
    self.assertNotAllClose(actual, wrong)

  def test_dropout_only_when_training(self):
    """With dropout, two training calls differ; inference calls are deterministic."""
    block = _block(adapter_size=4, dropout_rate=0.3, attention_dropout_rate=0.3)
    x = _inputs()
    inference = block(x, training=False)
    self.assertAllEqual(block(x, training=False), inference)
    self.assertAllEqual(block(x), inference)
    first = block(x, training=True)
    second = block(x, training=True)
    self.assertNotAllClose(first, second)
    self.assertNotAllClose(first, inference)

  def test_masked_positions_do_not_affect_unpadded_outputs(self):
    """With an attention mask, changing padded inputs leaves unpadded outputs unchanged."""
    block = _block(adapter_size=4)
    x = _inputs()
    block(x)
    _randomize(block)
    lengths = [3, 5]
    mask = tf.sequence_mask(lengths, 5)
    attention_mask = mask[:, tf.newaxis, :]
    changed = tf.where(mask[:, :, tf.newaxis], x, x + 10.0 * _inputs(seed=7))
    before = block(x, attention_mask=attention_mask).numpy()
    after = block(changed, attention_mask=attention_mask).numpy()
    self.assertAllClose(before[0, :3], after[0, :3], atol=1e-5)
    self.assertAllClose(before[1], after[1], atol=1e-6)
    # Without the mask the padded positions are attended to and the outputs move.
    self.assertNotAllClose(block(x).numpy()[0, :3], block(changed).numpy()[0, :3])

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_keeps_layer_norms_and_output_in_float32(self, name, epsilon):
    """Made under a mixed policy, a block of each placement keeps float32 variables, computes
    its attention, feed-forward and adapters in the policy's dtype and its LayerNorms in
    float32, and returns float32 near the float32 block's output with the same weights."""
    x = _inputs()
    attention_mask = tf.sequence_mask([5, 3], 5)[:, tf.newaxis, :]
    for placement, options in testing.PLACEMENT_VARIANTS.items():
      with self.subTest(placement=placement):
        reference = _block(adapter_size=3, adapter_options=options)
        reference(x)
        _randomize(reference)
        with precision.policy_scope(name):
          mixed = _block(adapter_size=3, adapter_options=options)
        mixed(x)
        mixed.set_weights(reference.get_weights())
        self.assertEqual({w.dtype for w in mixed.weights}, {tf.float32})
        in_policy = [mixed.self_attention, mixed.intermediate, mixed.output_dense]
        self.assertEqual({layer.compute_dtype for layer in in_policy + mixed.adapters}, {name})
        self.assertEqual({layer.compute_dtype for layer in (mixed.self_attention_layer_norm,
                                                            mixed.output_layer_norm)},
                         {"float32"})
        output = mixed(x, attention_mask=attention_mask)
        self.assertEqual(output.dtype, tf.float32)
        # Measured up to 1.6 epsilons (of the outputs' scale) over three seeds.
        self.assertLess(testing.mixed_precision_gap(
            output, reference(x, attention_mask=attention_mask), epsilon), 4)

  @parameterized.named_parameters(
      ("attention_adapter", "attention_adapter", 4),
      ("feedforward_adapter", "feedforward_adapter", 4),
      ("self_attention", "self_attention", 8),
      ("self_attention_layer_norm", "self_attention_layer_norm", 2),
      ("intermediate", "intermediate", 2),
      ("output_dense", "output_dense", 2),
      ("output_layer_norm", "output_layer_norm", 2),
  )
  def test_each_sublayer_has_its_own_trainable_flag(self, sublayer_name, num_weights):
    """Freezing one sub-layer removes exactly its weights from the block's trainable weights."""
    block = _block(adapter_size=4)
    block(_inputs())
    all_trainable = {id(w) for w in block.trainable_weights}
    self.assertLen(all_trainable, len(block.weights))
    sublayer = getattr(block, sublayer_name)
    sublayer.trainable = False
    frozen = {id(w) for w in sublayer.weights}
    self.assertLen(frozen, num_weights)
    self.assertEqual({id(w) for w in block.trainable_weights}, all_trainable - frozen)
    self.assertEqual({id(w) for w in block.non_trainable_weights}, frozen)

  def test_adapters_are_adapter_layers(self):
    """The block's adapters are Adapter layers of the requested size and activation."""
    block = _block(adapter_size=6, adapter_activation="tanh", adapter_init_stddev=0.0)
    block(_inputs())
    for adapter in block.adapters:
      self.assertIsInstance(adapter, adapter_lib.Adapter)
      self.assertEqual(adapter.adapter_size, 6)
      self.assertEqual(adapter.activation, "tanh")
      self.assertEqual(adapter.count_params(), 2 * 6 * _HIDDEN + _HIDDEN + 6)

  def test_hidden_size_not_divisible_by_heads_raises(self):
    """A hidden size that is not a multiple of num_heads is a ValueError naming both."""
    block = _block(num_heads=3)
    with self.assertRaisesRegex(ValueError, r"16.*num_heads=3"):
      block(_inputs())


  def test_a_training_call_without_dropout_has_the_outputs_and_gradients_of_an_inference_call(
      self):
    """A training call's activation differs only in its one-pass gradient (`activations`),
    here at a size whose gradient XLA compiles."""
    block = _block(intermediate_size=256, adapter_size=4)
    x = _inputs((8, activations.FUSE_FROM_ELEMENTS // (8 * 256), _HIDDEN))
    block(x)
    _randomize(block)
    # A random output gradient: the plain sum's is about zero for the LayerNorm's scale.
    output_gradient = _inputs(x.shape, seed=1)
    outputs, gradients = [], []
    for training in (True, False):
      with tf.GradientTape() as tape:
        tape.watch(x)
        outputs.append(block(x, training=training))
      gradients.append(tape.gradient(outputs[-1], [x] + block.trainable_variables,
                                     output_gradients=output_gradient))
    self.assertAllClose(outputs[0], outputs[1], atol=1e-6)
    # Relative to the largest gradient: the key bias's is zero but for rounding.
    scale = max(float(tf.reduce_max(tf.abs(gradient))) for gradient in gradients[1])
    for trained, inferred in zip(*gradients):
      self.assertAllClose(trained, inferred, atol=1e-5 * scale, rtol=1e-5)

if __name__ == "__main__":
  tf.test.main()

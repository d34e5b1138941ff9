"""Tests for BERT's self-attention computed with 2-D matrix products."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import self_attention
from keras_adapters.layers import testing
from keras_adapters.utils import precision

_HEADS, _HIDDEN = 4, 16


def _inputs(seed=0):
  return tf.constant(np.random.RandomState(seed).normal(size=[3, 7, _HIDDEN]), tf.float32)


def _mask(seed=0):
  """[batch, 1, seq]: a random pattern of allowed keys, at least one per example."""
  allowed = np.random.RandomState(seed).rand(3, 1, 7) > 0.4
  allowed[:, :, 0] = True
  return tf.constant(allowed)


def _twins(dropout_rate=0.0):
  """Our layer and Keras' `MultiHeadAttention`, built, holding the same random weights."""
  ours = self_attention.SelfAttention(_HEADS, dropout_rate=dropout_rate, name="self_attention")
  theirs = keras.layers.MultiHeadAttention(
      _HEADS, _HIDDEN // _HEADS, dropout=dropout_rate, name="self_attention")
  ours(_inputs())
  theirs(_inputs(), _inputs())
  rng = np.random.RandomState(1)
  for our_weight, their_weight in zip(ours.weights, theirs.weights):
    value = rng.normal(scale=0.5, size=our_weight.shape)
    our_weight.assign(value)
    their_weight.assign(value)
  return ours, theirs


class SelfAttentionTest(tf.test.TestCase, parameterized.TestCase):

  def test_variables_have_keras_names_and_shapes(self):
    """TF Hub / Model Garden attention variables map onto ours by name and shape."""
    ours, theirs = _twins()
    self.assertEqual([(w.name, w.shape) for w in ours.weights],
                     [(w.name, w.shape) for w in theirs.weights])

  @parameterized.named_parameters(
      ("no_mask", None),
      ("key_mask", _mask()),
      ("full_mask", tf.constant(np.random.RandomState(3).rand(3, 7, 7) > 0.3)))
  def test_equals_keras_multi_head_attention(self, mask):
    """Same weights, same inputs and mask: the output of Keras' attention."""
    if mask is not None:
      mask = tf.logical_or(mask, tf.eye(7, batch_shape=[3], dtype=tf.bool)[:, :mask.shape[1]])
    ours, theirs = _twins()
    # Outputs up to 13, summed in other orders (Keras' einsums, oneDNN or Eigen).
    testing.assert_close_at_scale(self, ours(_inputs(), attention_mask=mask),
                                  theirs(_inputs(), _inputs(), attention_mask=mask), rtol=1e-5)

  def test_gradients_equal_keras_multi_head_attention(self):
    """The gradients of inputs and of every weight match Keras' attention's."""
    ours, theirs = _twins()
    x = _inputs()
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(x)
      our_loss = tf.reduce_sum(tf.sin(ours(x, attention_mask=_mask())))
      their_loss = tf.reduce_sum(tf.sin(theirs(x, x, attention_mask=_mask())))
    # Gradients up to 64: measured 1.4e-7 of the largest on an AVX2 CPU.
    testing.assert_close_at_scale(self, tape.gradient(our_loss, [x] + ours.weights),
                                  tape.gradient(their_loss, [x] + theirs.weights), rtol=1e-5)

  def test_masked_keys_do_not_matter(self):
    """Changing the inputs at masked positions leaves the unmasked positions' outputs alone."""
    ours, _ = _twins()
    mask = tf.constant([[[True] * 5 + [False] * 2]] * 3)
    changed = tf.concat([_inputs()[:, :5], _inputs(seed=9)[:, 5:]], axis=1)
    self.assertAllClose(ours(_inputs(), attention_mask=mask)[:, :5],
                        ours(changed, attention_mask=mask)[:, :5], atol=1e-6)

  def test_dropout_only_when_training(self):
    """Dropout on the probabilities changes the output in training only."""
    ours, _ = _twins(dropout_rate=0.5)
    reference = ours(_inputs(), training=False)
    self.assertAllClose(ours(_inputs(), training=False), reference)
    self.assertNotAllClose(ours(_inputs(), training=True), reference)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_compute(self, name, epsilon):
    """Under a mixed policy the output is in the compute dtype and near the float32 one, and
    masked keys still do not matter: the mask's -1e9, which float16 cannot hold, and the
    softmax are in float32."""
    ours, _ = _twins()
    with precision.policy_scope(name):
      mixed = self_attention.SelfAttention(_HEADS)
    mixed(_inputs())
    mixed.set_weights(ours.get_weights())
    self.assertEqual({w.dtype for w in mixed.weights}, {tf.float32})
    output = mixed(_inputs(), attention_mask=_mask())
    self.assertEqual(output.dtype, name)
    # Inputs, weights and products rounded to the compute dtype: measured 1.2 epsilons.
    self.assertLess(testing.mixed_precision_gap(
        output, ours(_inputs(), attention_mask=_mask()), epsilon), 3)
    mask = tf.constant([[[True] * 5 + [False] * 2]] * 3)
    changed = tf.concat([_inputs()[:, :5], 100.0 * _inputs(seed=9)[:, 5:]], axis=1)
    self.assertAllEqual(mixed(_inputs(), attention_mask=mask)[:, :5],
                        mixed(changed, attention_mask=mask)[:, :5])

  def test_layer_contract(self):
    """Weights made by build, config round trip, registered serialization, output shape and
    gradients for every weight, through a mask."""
    testing.run_layer_test(
        self, self_attention.SelfAttention, dict(num_heads=_HEADS, dropout_rate=0.3,
                                                 name="attention"),
        _inputs(), call=lambda layer, x, training: layer(x, attention_mask=_mask(),
                                                         training=training),
        expected_output_shape=(3, 7, _HIDDEN), expected_num_trainable_weights=8,
        expected_num_non_trainable_weights=0)

  @parameterized.named_parameters(("no_dropout", 0.0), ("dropout", 0.3))
  def test_recomputing_gives_the_same_outputs_and_gradients(self, dropout_rate):
    """Recomputing the probabilities in the backward pass changes neither the output nor any
    gradient, with dropout too: its mask is drawn from the same random stream."""
    ours, _ = _twins(dropout_rate)
    results = []
    for recompute in ("never", "always"):
      layer = self_attention.SelfAttention(_HEADS, dropout_rate, recompute_attention=recompute)
      layer(_inputs())
      layer.set_weights(ours.get_weights())
      x = _inputs()
      tf.random.set_seed(7)
      with tf.GradientTape() as tape:
        tape.watch(x)
        output = layer(x, attention_mask=_mask(), training=True)
        loss = tf.reduce_sum(tf.sin(output))
      results.append([output] + tape.gradient(loss, [x] + layer.weights))
    # Recomputing scales the values and the context's gradient where the dropout layer scales
    # the probabilities: the same products rounded in another order, measured up to 2e-6 of a
    # tensor's scale (the key bias's gradient, 0 up to rounding).
    testing.assert_close_at_scale(self, results[1], results[0], rtol=1e-5)

  def test_recomputing_compiles_with_xla(self):
    """The recomputing step compiles with XLA (--jit_compile, TPUs) to autodiff's gradients."""
    ours, _ = _twins()
    layers = []
    for recompute in ("never", "always"):
      layer = self_attention.SelfAttention(_HEADS, recompute_attention=recompute)
      layer(_inputs())
      layer.set_weights(ours.get_weights())
      layers.append(layer)

    def gradients(layer):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.sin(layer(_inputs(), attention_mask=_mask(), training=True)))
      return tape.gradient(loss, layer.weights)

    compiled = tf.function(lambda: gradients(layers[1]), jit_compile=True)()
    # XLA fuses and sums in its own order: up to 1.6e-6 of a tensor's largest gradient
    # measured on an AVX2 CPU (Eigen's kernels; 6e-7 with oneDNN's).
    testing.assert_close_at_scale(self, compiled, gradients(layers[0]), rtol=1e-5)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_recomputing_under_mixed_precision(self, name, epsilon):
    """Under a mixed policy the recomputed gradients are those autodiff gives, up to the
    compute dtype's rounding."""
    del epsilon
    gradients = []
    for recompute in ("never", "always"):
      with precision.policy_scope(name):
        layer = self_attention.SelfAttention(_HEADS, recompute_attention=recompute)
      layer(_inputs())
      layer.set_weights(_twins()[0].get_weights())
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.sin(tf.cast(
            layer(_inputs(), attention_mask=_mask(), training=True), tf.float32)))
      gradients.append(tape.gradient(loss, layer.weights))
    for recomputed, kept in zip(gradients[1], gradients[0]):
      self.assertAllClose(recomputed, kept, atol=5e-2, rtol=5e-2)

  @parameterized.named_parameters(
      ("auto_short", "auto", 8, True, False),
      ("auto_long", "auto", self_attention.RECOMPUTE_FROM_LENGTH, True, True),
      ("auto_unknown_length", "auto", None, True, False), ("always", "always", 8, True, True),
      ("always_in_inference", "always", 8, False, False),
      ("never", "never", self_attention.RECOMPUTE_FROM_LENGTH, True, False))
  def test_when_the_backward_pass_recomputes(self, recompute, seq_length, training,
                                             recomputes):
    """The gradient graph has a second softmax exactly when the probabilities are
    recomputed: in training calls, "auto" from RECOMPUTE_FROM_LENGTH tokens of static
    length."""
    layer = self_attention.SelfAttention(2, recompute_attention=recompute)
    layer(tf.zeros([1, 4, 8]))

    @tf.function(input_signature=[tf.TensorSpec([1, seq_length, 8])])
    def gradients(x):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x, training=training))
      return tape.gradient(loss, layer.trainable_weights)

    graph = gradients.get_concrete_function().graph
    softmaxes = [op for op in graph.get_operations() if op.type == "Softmax"]
    self.assertLen(softmaxes, 2 if recomputes else 1)

  def test_unknown_recompute_setting_is_refused(self):
    with self.assertRaisesRegex(
        ValueError, "recompute_attention='sometimes': choose one of auto, always, never."):
      self_attention.SelfAttention(2, recompute_attention="sometimes")

  def test_heads_must_divide_hidden_size(self):
    """A head count that does not divide the width is a clear error."""
    with self.assertRaisesRegex(ValueError, "not a multiple of num_heads=3"):
      self_attention.SelfAttention(3)(_inputs())


if __name__ == "__main__":
  tf.test.main()

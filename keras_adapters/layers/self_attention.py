"""BERT's multi-head self-attention, computed with 2-D matrix products."""

import math

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import activations
from keras_adapters.layers import dropout
from keras_adapters.methods import projection_delta

# The projections into heads, and the one out of them (Keras' sub-layer names).
_INPUT_PROJECTIONS = ("query", "key", "value")
_OUTPUT_PROJECTION = "attention_output"
# When the attention probabilities are recomputed in the backward pass rather than kept from
# the forward one: "auto" from `RECOMPUTE_FROM_LENGTH` tokens, "always", "never". From 128
# tokens, recomputing saves a tenth to a fifth of a training step's memory for a few percent
# of its time at most, and most of the memory from 512 (bench/results/attention_recompute.json).
RECOMPUTE_CHOICES = ("auto", "always", "never")
RECOMPUTE_FROM_LENGTH = 128


def recompute_for_length(recompute, seq_length):
  """Whether attention over `seq_length` tokens recomputes, by the setting `recompute`:
  "always" or "never" ("auto" decided; `seq_length=None`, unknown, keeps the probabilities)."""
  if recompute == "auto":
    long = seq_length is not None and seq_length >= RECOMPUTE_FROM_LENGTH
    return "always" if long else "never"
  return recompute


@keras.utils.register_keras_serializable(package="keras_adapters")
class SelfAttention(keras.layers.Layer):
  """Multi-head self-attention with the variables of Keras `MultiHeadAttention`.

  The variables have the names and shapes of Keras' (and the Model Garden's) attention:
  `query/kernel` `[hidden, heads, head_size]` and `query/bias` `[heads, head_size]`, the same
  for `key` and `value`, `attention_output/kernel` `[heads, head_size, hidden]` and
  `attention_output/bias` `[hidden]`, so TF Hub BERT variables load into it by name. The
  computation is the same too (queries scaled by `1/sqrt(head_size)`, masked softmax, dropout
  on the probabilities), but each projection is one 2-D `MatMul` over `[batch * seq, hidden]`
  instead of Keras' 3-D `Einsum`. On CPU that runs the projections about 1.5 times faster,
  and `MatMul`'s gradient skips the kernel's gradient when the kernel is frozen, which
  `Einsum`'s does not.

  For its backward pass, autodiff keeps three `[batch, heads, seq, seq]` tensors per layer
  (the softmax, the dropout mask and the dropped probabilities): from 128 tokens a tenth of a
  training step's memory or more, at 512 most of it. With `recompute_attention` the layer keeps only the queries, keys,
  values and the dropout mask as booleans, and computes the softmax again in the backward
  pass (one more `QKᵀ` and softmax): the same gradients, for less memory and a slower step.

  Example:
  >>> attention = SelfAttention(num_heads=2)
  >>> attention(tf.zeros([2, 5, 32])).shape
  TensorShape([2, 5, 32])

  Args:
    num_heads: Number of attention heads; must divide the hidden size.
    dropout_rate: Dropout on the attention probabilities.
    recompute_attention: When a training call recomputes the probabilities in the backward
      pass instead of keeping them (`RECOMPUTE_CHOICES`): "auto" when the sequence's static
      length is at least `RECOMPUTE_FROM_LENGTH`, "always" or "never".
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, num_heads, dropout_rate=0.0, recompute_attention="auto", **kwargs):
    super().__init__(**kwargs)
    if recompute_attention not in RECOMPUTE_CHOICES:
      raise ValueError(f"recompute_attention={recompute_attention!r}: choose one of "
                       f"{', '.join(RECOMPUTE_CHOICES)}.")
    self.num_heads = num_heads
    self.dropout_rate = dropout_rate
    self.recompute_attention = recompute_attention

  def build(self, input_shape):
    hidden_size = tf.TensorShape(input_shape)[-1]
    if hidden_size % self.num_heads:
      raise ValueError(
          f"The hidden size {hidden_size} is not a multiple of num_heads={self.num_heads}.")
    head_size = hidden_size // self.num_heads
    heads = [self.num_heads, head_size]
    self._kernels, self._biases = {}, {}
    for name in _INPUT_PROJECTIONS + (_OUTPUT_PROJECTION,):
      kernel_shape, bias_shape = (
          ([hidden_size] + heads, heads) if name != _OUTPUT_PROJECTION
          else (heads + [hidden_size], [hidden_size]))
      # Scoped so the names read ".../self_attention/query/kernel", as Keras' sub-layers do.
      with tf.name_scope(name):
        self._kernels[name] = self.add_weight(
            "kernel", kernel_shape, initializer=keras.initializers.GlorotUniform())
        self._biases[name] = self.add_weight("bias", bias_shape, initializer="zeros")
    # In the layer's policy: under mixed precision the probabilities go on in the compute dtype.
    self.attention_dropout = dropout.Dropout(self.dropout_rate, dtype=self.dtype_policy)
    super().build(input_shape)

  def projection_variables(self, name):
    """The `(kernel, bias)` variables of the projection `name` (`query`, ...)."""
    return self._kernels[name], self._biases[name]

  def call(self, inputs, attention_mask=None, training=None, projections=None):
    """Attends from every position of `inputs` to every position allowed by the mask.

    Args:
      inputs: `[batch, seq, hidden]`.
      attention_mask: Optional boolean `[batch, seq, seq]` or `[batch, 1, seq]` (the same for
        every query): `True` where a query may attend to a key.
      training: Whether dropout is on.
      projections: Changes to the projections, by name (`query`, `key`, `value`,
        `attention_output`): each a sequence of `ProjectionDelta` layers or functions,
        applied in turn (LoRA, (IA)³).

    Returns:
      `[batch, seq, hidden]`.
    """
    batch_size, seq_length = tf.shape(inputs)[0], tf.shape(inputs)[1]
    hidden_size = inputs.shape[-1]
    head_size = hidden_size // self.num_heads
    tokens = tf.reshape(inputs, [-1, hidden_size])
    projections = projections or {}

    def project(name, inputs):
      """`[tokens, hidden]` through the projection `name` and the changes to it."""
      return projection_delta.apply_projection(
          projections.get(name, ()), inputs, projection_delta.Projection(
              lambda x: _dense(x, self._kernels[name], self._biases[name], hidden_size),
              self._kernels[name], self._biases[name]), training)

    def heads(name):
      """A projection of every token, `[batch, heads, seq, head_size]`."""
      projected = project(name, tokens)
      projected = tf.reshape(projected, [batch_size, seq_length, self.num_heads, head_size])
      return tf.transpose(projected, [0, 2, 1, 3])

    query = heads("query") * tf.cast(1.0 / math.sqrt(head_size), inputs.dtype)
    key, value = heads("key"), heads("value")
    # Masked keys get a large negative score, as in Keras' masked softmax.
    score_bias = (None if attention_mask is None else
                  (1.0 - tf.cast(attention_mask[:, tf.newaxis], tf.float32)) * -1e9)
    # Only a training call has a backward pass to spare memory for; inference (and the
    # SavedModels exported from it) keeps autodiff's plain graph.
    if (activations.is_training_call(training)
        and recompute_for_length(self.recompute_attention, inputs.shape[1]) == "always"):
      context = self._recomputed_attention(query, key, value, score_bias)
    else:
      probabilities = self.attention_dropout(
          _probabilities(query, key, score_bias, self.compute_dtype), training=training)
      context = tf.matmul(probabilities, value)
    context = tf.transpose(context, [0, 2, 1, 3])
    output = project(_OUTPUT_PROJECTION, tf.reshape(context, [-1, hidden_size]))
    return tf.reshape(output, [batch_size, seq_length, hidden_size])

  def _recomputed_attention(self, query, key, value, score_bias):
    """`dropout(softmax(QKᵀ + bias)) V` in training, keeping Q, K, V and the kept positions
    for the gradient instead of the probabilities."""
    kept = None
    if self.dropout_rate:
      # The mask the dropout layer would draw for the probabilities (the same random stream),
      # kept as booleans: a byte per probability.
      kept = self.attention_dropout.keep_mask(
          tf.concat([tf.shape(query)[:-1], tf.shape(key)[-2:-1]], axis=0))

    def dropped(probabilities):
      """The kept probabilities, unscaled: `scaled` puts the scale on a `[batch, heads, seq,
      head_size]` tensor instead, `head_size / seq` of the work."""
      return probabilities if kept is None else tf.where(
          kept, probabilities, tf.zeros([], probabilities.dtype))

    def scaled(tensor):
      return tensor if kept is None else tensor * tf.cast(
          self.attention_dropout.keep_scale, tensor.dtype)

    @tf.custom_gradient
    def attend(query, key, value):
      context = tf.matmul(dropped(_probabilities(query, key, score_bias, self.compute_dtype)),
                          scaled(value))

      def gradient(context_gradient):
        # Recomputed only once the gradient has arrived: without this dependency TensorFlow
        # may recompute every layer's probabilities at once, and nothing is saved.
        with tf.control_dependencies([context_gradient]):
          probabilities = _probabilities(query, key, score_bias, tf.float32)
        scaled_gradient = scaled(context_gradient)
        probabilities_gradient = tf.cast(
            dropped(tf.matmul(scaled_gradient, value, transpose_b=True)), tf.float32)
        # The softmax's gradient, as TensorFlow's `SoftmaxGrad` computes it, in float32.
        score_gradient = tf.cast(probabilities * (
            probabilities_gradient - tf.reduce_sum(probabilities_gradient * probabilities,
                                                   axis=-1, keepdims=True)),
                                 self.compute_dtype)
        return (tf.matmul(score_gradient, key),
                tf.matmul(score_gradient, query, transpose_a=True),
                tf.matmul(dropped(tf.cast(probabilities, self.compute_dtype)), scaled_gradient,
                          transpose_a=True))

      return context, gradient

    return attend(query, key, value)

  def get_config(self):
    config = super().get_config()
    config.update({"num_heads": self.num_heads, "dropout_rate": self.dropout_rate,
                   "recompute_attention": self.recompute_attention})
    return config


def _probabilities(query, key, score_bias, dtype):
  """The attention probabilities `softmax(QKᵀ + bias)`, `[batch, heads, seq, seq]` in `dtype`.

  Scores, bias and softmax in float32 whatever the policy, as the LayerNorms: bfloat16 (8 bits
  of mantissa) blurs the score differences the softmax exponentiates and its sum over the
  keys, and float16 cannot hold the mask's -1e9.
  """
  scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32)
  if score_bias is not None:
    scores += score_bias
  return tf.cast(tf.nn.softmax(scores), dtype)


def _dense(tokens, kernel, bias, hidden_size):
  """`tokens @ kernel + bias` with the kernel and bias flattened to 2-D and 1-D.

  `bias_add` rather than `+`, so that TensorFlow's graph optimiser fuses it into the `MatMul`.
  """
  return tf.nn.bias_add(tf.matmul(tokens, tf.reshape(kernel, [hidden_size, -1])),
                        tf.reshape(bias, [-1]))

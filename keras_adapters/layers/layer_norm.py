"""BERT's LayerNorm, whose training calls normalise and take the gradient in one pass each.

TensorFlow's fused normalisation kernel needs an epsilon of at least 1.001e-5, so Keras'
`LayerNormalization` with BERT's 1e-12 runs op by op: the moments, then
`batch_normalization`, and autodiff's gradient of each: a chain of elementwise passes over
the block's `[tokens, hidden]` values for every LayerNorm of a training step. A training call
of this layer (from `activations.FUSE_FROM_ELEMENTS` values on) computes the same
normalisation as one XLA-compiled pass, and its gradient as another that keeps only the
inputs and the inverse standard deviations (bench/activation_gradient.py times both ways).
Inference, and every SavedModel exported from it, is Keras' own.
"""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import activations


def _normalize(x, gamma, beta, epsilon):
  """`(gamma * (x - mean) / sqrt(variance + epsilon) + beta, 1 / sqrt(variance + epsilon))`
  over the last axis of a `[rows, width]` `x`."""
  centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
  inverse_std = tf.math.rsqrt(
      tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
  return centered * inverse_std * gamma + beta, inverse_std


def _normalize_gradient(x, gamma, inverse_std, output_gradient):
  """The gradients of `_normalize`'s output for `x`, `gamma` and `beta`."""
  normalized = (x - tf.reduce_mean(x, axis=-1, keepdims=True)) * inverse_std
  scaled_gradient = output_gradient * gamma
  input_gradient = inverse_std * (
      scaled_gradient - tf.reduce_mean(scaled_gradient, axis=-1, keepdims=True)
      - normalized * tf.reduce_mean(scaled_gradient * normalized, axis=-1, keepdims=True))
  return (input_gradient, tf.reduce_sum(output_gradient * normalized, axis=0),
          tf.reduce_sum(output_gradient, axis=0))


_COMPILED = {fn: tf.function(fn, jit_compile=True, autograph=False)
             for fn in (_normalize, _normalize_gradient)}


def _fused_when_large(fn, x, *args):
  """`fn(x, *args)`, compiled by XLA from `FUSE_FROM_ELEMENTS` values of `x` on."""
  return tf.cond(tf.size(x, out_type=tf.int64) >= activations.FUSE_FROM_ELEMENTS,
                 lambda: _COMPILED[fn](x, *args), lambda: fn(x, *args))


@keras.utils.register_keras_serializable(package="keras_adapters")
class LayerNormalization(keras.layers.LayerNormalization):
  """Keras' `LayerNormalization` (same arguments, weights and config) whose training calls
  over the last axis, centred and scaled, take one pass forward and one backward.

  Example:
  >>> layer_norm = LayerNormalization(epsilon=1e-12)
  >>> layer_norm(tf.constant([[1.0, 3.0]]), training=True).numpy().tolist()
  [[-1.0, 1.0]]
  """

  def call(self, inputs, training=None):
    width = inputs.shape[-1]
    if not (activations.is_training_call(training) and self.center and self.scale
            and self.axis == [inputs.shape.rank - 1] and width is not None):
      return super().call(inputs)
    epsilon = tf.constant(self.epsilon, inputs.dtype)

    @tf.custom_gradient
    def normalize(rows, gamma, beta):
      output, inverse_std = _fused_when_large(_normalize, rows, gamma, beta, epsilon)

      def gradient(output_gradient):
        return _fused_when_large(_normalize_gradient, rows, gamma, inverse_std, output_gradient)

      return output, gradient

    output = normalize(tf.reshape(inputs, [-1, width]), tf.convert_to_tensor(self.gamma),
                       tf.convert_to_tensor(self.beta))
    output = tf.reshape(output, tf.shape(inputs))
    output.set_shape(inputs.shape)
    return output

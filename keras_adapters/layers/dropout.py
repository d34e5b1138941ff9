"""The encoder's dropout: Keras' `Dropout`, its mask drawn from half the random numbers.

TensorFlow's dropout draws one 32-bit random number for every position it may drop, and on a
CPU that is most of dropout's cost: the attention probabilities alone are
`[batch, heads, seq, seq]` (bench/dropout_masks.py times both draws). Here each position gets
16 random bits, two from every 32-bit number, and is dropped when they read below
`round(rate * 2**16)`: the rate is kept to 1/65,536 (0.1 drops 6,554 positions in 65,536),
and the kept values are scaled by the inverse of that keep probability, so that the expected
output is the input exactly. (Under a 16-bit policy Keras' own dropout draws its numbers in
that dtype, which keeps the rate to 1/128 in bfloat16 and 1/1,024 in float16.)
"""

import tensorflow as tf
import tf_keras as keras

_BITS = 16
_LEVELS = 1 << _BITS


def dropped_levels(rate):
  """Of the 2**16 values 16 random bits take, how many drop a position: `round(rate * 2**16)`."""
  levels = round(rate * _LEVELS)
  if levels >= _LEVELS:
    raise ValueError(f"Dropout rate {rate} drops every value: choose a rate below 1.")
  return levels


def keep_scale(rate):
  """What the kept values are multiplied by: the inverse of their probability of being kept."""
  return _LEVELS / (_LEVELS - dropped_levels(rate))


def keep_mask(shape, rate, seed=None):
  """A boolean mask of `shape`, `True` with probability `1 / keep_scale(rate)`.

  The 32-bit numbers come from a stateless generator whose seed is drawn by a stateful op, so
  masks follow `tf.random.set_seed` (and the op `seed`) as Keras' dropout masks do.
  """
  shape = tf.cast(shape, tf.int32)
  size = tf.reduce_prod(shape)
  stateless_seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32, seed=seed)
  words = tf.random.stateless_uniform([(size + 1) // 2], stateless_seed, minval=None,
                                      maxval=None, dtype=tf.uint32)
  halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
  return tf.reshape(halves, shape) >= dropped_levels(rate)


@keras.utils.register_keras_serializable(package="keras_adapters")
class Dropout(keras.layers.Dropout):
  """Keras' `Dropout` (same arguments, config and behaviour) with `keep_mask`'s masks.

  Example:
  >>> dropout = Dropout(0.5)
  >>> dropout(tf.ones([2, 3]), training=False).numpy().tolist()
  [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
  """

  def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
    super().__init__(rate, noise_shape=noise_shape, seed=seed, **kwargs)
    dropped_levels(rate)  # Refuses a rate of 1 here, not at the first training call.

  @property
  def keep_scale(self):
    """What `call` multiplies the kept values by."""
    return keep_scale(self.rate)

  def keep_mask(self, shape):
    """A mask `call` would draw for inputs of `shape` (the noise shape aside)."""
    return keep_mask(shape, self.rate, seed=self.seed)

  def call(self, inputs, training=None):
    if not self.rate:
      return tf.identity(inputs)
    if training is None:
      training = keras.backend.learning_phase()

    def dropped_inputs():
      noise_shape = self._get_noise_shape(inputs)
      kept = self.keep_mask(tf.shape(inputs) if noise_shape is None else noise_shape)
      return tf.where(kept, inputs * tf.cast(self.keep_scale, inputs.dtype),
                      tf.zeros([], inputs.dtype))

    return tf.__internal__.smart_cond.smart_cond(training, dropped_inputs,
                                                 lambda: tf.identity(inputs))

"""What the method layers' tests share: random inputs and a frozen projection to change."""

import numpy as np
import tensorflow as tf


def random_inputs(shape=(4, 6), seed=0):
  """A float32 tensor of standard-normal values."""
  return tf.constant(np.random.RandomState(seed).normal(size=shape), tf.float32)


def random_projection(width_in, width_out, seed=1):
  """A frozen projection `x · W + b` with random `W` `[in, out]` and `b`: the function, `W`
  and `b`."""
  rng = np.random.RandomState(seed)
  kernel = rng.normal(size=(width_in, width_out)).astype(np.float32)
  bias = rng.normal(size=(width_out,)).astype(np.float32)
  return lambda x: tf.einsum("...i,io->...o", x, kernel) + bias, kernel, bias

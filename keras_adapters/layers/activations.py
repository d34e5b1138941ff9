"""BERT's feed-forward activations, and for training calls the same with a one-pass gradient.

Autodiff differentiates a GELU op by op: the backward pass of `0.5 * x * (1 + erf(x / √2))`
is about eight elementwise ops, each a pass over the block's `[tokens, intermediate]`
activations, the largest tensors of the step after the attention probabilities. A training
call gets the same activation with its derivative written out and compiled by XLA into one
pass (`get(name, training=True)`), while the matrix products around it stay on TensorFlow's
own (oneDNN) kernels. The forward pass, and every SavedModel exported from an inference call,
is the plain function.
"""

import math

import tensorflow as tf
import tf_keras as keras

# Below this many elements a pass is cheap and XLA's compilation, once per shape, would cost
# more than it saves: small tensors (the tests' tiny encoders) take the same formula as
# TensorFlow's separate kernels.
FUSE_FROM_ELEMENTS = 1 << 16

_SQRT_HALF = math.sqrt(0.5)
_INVERSE_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715  # The tanh approximation's cubic coefficient.


@keras.utils.register_keras_serializable(package="keras_adapters")
def gelu_approximate(x):
  """The tanh approximation of GELU used by the original BERT code."""
  return keras.activations.gelu(x, approximate=True)


@keras.utils.register_keras_serializable(package="keras_adapters")
def gelu_exact(x):
  """The exact (erf) GELU of the TF Hub BERT exports, `x * Phi(x)`.

  Keras' and TF's `gelu` compute it with `erfc`, which TensorFlow's CPU kernel does not
  vectorise: written with `erf` it runs about twice as fast, equal to 1e-6.
  """
  return x * _normal_cdf(x)


def gelu_exact_derivative(x):
  """d gelu_exact / dx = Phi(x) + x * phi(x)."""
  return _normal_cdf(x) + x * tf.exp(-0.5 * x * x) * _INVERSE_SQRT_2PI


def _normal_cdf(x):
  """Phi(x), the standard normal's CDF. (Scaling by 0.5 is exact: `x * Phi(x)` rounds as
  `0.5 * x * (1 + erf(x / sqrt(2)))` does.)"""
  return 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))


def gelu_approximate_derivative(x):
  """d gelu_approximate / dx, with t = tanh(sqrt(2/pi) (x + 0.044715 x³))."""
  t = tf.tanh(_SQRT_2_OVER_PI * (x + _CUBIC * x * x * x))
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (
      1.0 + 3.0 * _CUBIC * x * x)


def with_one_pass_gradient(forward, derivative):
  """`forward`, an elementwise function, whose gradient `dy * derivative(x)` is one XLA pass
  from `FUSE_FROM_ELEMENTS` elements on; it keeps only its input for the backward pass."""
  compiled = tf.function(lambda x, dy: dy * derivative(x), jit_compile=True, autograph=False)

  @tf.custom_gradient
  def activation(x):

    def gradient(dy):
      return tf.cond(tf.size(x, out_type=tf.int64) >= FUSE_FROM_ELEMENTS,
                     lambda: compiled(x, dy), lambda: dy * derivative(x))

    return forward(x), gradient

  return activation


_BY_NAME = {"gelu": gelu_exact, "gelu_approximate": gelu_approximate}
_FOR_TRAINING = {
    "gelu": with_one_pass_gradient(gelu_exact, gelu_exact_derivative),
    "gelu_approximate": with_one_pass_gradient(gelu_approximate, gelu_approximate_derivative),
}


def get(name, training=False):
  """The activation `name` (`"gelu"` is exact, `"gelu_approximate"` tanh, or any Keras
  activation); with `training`, the same values with a one-pass gradient where one exists."""
  if training and name in _FOR_TRAINING:
    return _FOR_TRAINING[name]
  return _BY_NAME.get(name) or keras.activations.get(name)


def is_training_call(training):
  """Whether a layer's `training` argument is a Python `True`: a call with a backward pass to
  spend memory or compilation on. A tensor or `None` (inference, SavedModel signatures) is not."""
  return training is not None and not tf.is_tensor(training) and bool(training)

"""The six activations of the paper's search space (Table 5, knobs 6 and 14), by name."""

import tensorflow as tf

from keras_adapters.utils import errors

ACTIVATIONS = {
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "leaky_relu": tf.nn.leaky_relu,
    "swish": tf.nn.silu,
    "sigmoid": tf.math.sigmoid,
    "tanh": tf.math.tanh,
}


def get(name: str):
  """The activation function called `name`, one of `ACTIVATIONS`."""
  if name not in ACTIVATIONS:
    raise errors.UsageError(f"Unknown activation {name!r}; choose from {sorted(ACTIVATIONS)}.")
  return ACTIVATIONS[name]

"""Keras mixed-precision policies by the names the CLIs use.

The policy is process-global in Keras; `policy_scope` sets it for one run and puts the previous
one back, so that runs of several precisions can share a process (a sweep, the tests).
"""

import contextlib

import tensorflow as tf
import tf_keras as keras

from official.modeling import performance

# `--mixed_precision` values: the compute dtype; variables always stay float32.
PRECISIONS = ("float32", "bfloat16", "float16")


@contextlib.contextmanager
def policy_scope(precision: str):
  """Sets the global Keras policy of `precision` (one of `PRECISIONS`) for the block."""
  if precision not in PRECISIONS:
    raise ValueError(f"Unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}.")
  previous = keras.mixed_precision.global_policy()
  performance.set_mixed_precision_policy(tf.as_dtype(precision))
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)

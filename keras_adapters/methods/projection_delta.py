"""`ProjectionDelta`: a trained change to one frozen projection of a BERT block.

A block's projections are `y = x · W + b`: the attention's `query`, `key`, `value` and
`attention_output`, the feed-forward `intermediate` (before its activation) and `output`.
A method (LoRA, (IA)³) wraps some of them: its layer is called with the projection's input
and the frozen projection as a function, and returns the projection's new output, as peft's
wrapped `Linear` does. Every such change is linear in `W` and `b`, so `merge` folds it into
the frozen weights for inference at no extra cost.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods import projections

PROJECTIONS = projections.PROJECTIONS
POOLER = projections.POOLER
TARGETS = projections.TARGETS
projection_widths = projections.projection_widths


class ProjectionDelta(keras.layers.Layer):
  """Base class of the layers that change a frozen projection `project(x) = x · W + b`.

  Subclasses create their weights in `build(input_shape)` (the projection's input) and
  implement `call(inputs, project, training)`, `merge(kernel, bias)` and `weights_by_key()`.

  Args:
    target: The projection it changes, one of `TARGETS` (a block's, or the pooler's).
    units: The projection's output width.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, target, units, **kwargs):
    super().__init__(**kwargs)
    if target not in TARGETS:
      raise ValueError(f"Unknown projection {target!r}; a BERT encoder has {list(TARGETS)}.")
    self.target = target
    self.units = units

  def call(self, inputs, project, training=None):  # pylint: disable=arguments-differ
    """The projection's output with this change, for `inputs` `[..., in]`."""
    raise NotImplementedError

  def merge(self, kernel, bias):
    """The `[in, out]` kernel and `[out]` bias of the projection with this change folded in."""
    raise NotImplementedError

  def weights_by_key(self):
    """The layer's weights by their name inside it (`lora_a`, `scale`)."""
    raise NotImplementedError

  def start_from(self, kernel, bias):
    """Called once the frozen projection holds the base's `[in, out]` `kernel` and `[out]`
    `bias`: a method whose start depends on them (DoRA's magnitudes) sets it here."""
    del kernel, bias  # Most methods start from their initialisers alone.

  @classmethod
  def stacked(cls, entries, name):
    """Several tasks' layers at one projection, for a batch that mixes tasks.

    Args:
      entries: Per task, `(weights, options)` (its `weights_by_key()` values as arrays and
        its layer's keyword arguments) or `None` for a task without this method there.
      name: A name for the variables.

    Returns:
      `tf.Module`s, each with `for_tasks(task_ids)` giving a function called as the layer is
      (`(inputs, project, training)`) that applies each example's task's change (`task_ids`
      `[batch]`) or one task's (a scalar); a task without the method is left unchanged.
    """
    raise NotImplementedError

  def get_config(self):
    config = super().get_config()
    config.update({"target": self.target, "units": self.units})
    return config


class Projection:
  """A projection as a method's layer receives it: a function of the input (the frozen
  projection, or it with other changes applied) that also holds the frozen projection's
  `kernel` `[in, out]` and `bias` `[out]`, which a change may depend on (DoRA's norms).

  Args:
    function: Computes the projection's output from its input.
    kernel: The frozen kernel, any shape with `in` first (the attention's
      `[hidden, heads, head_size]` too).
    bias: The frozen bias, any shape of `out` elements.
  """

  def __init__(self, function, kernel, bias):
    self._function = function
    width_out = bias.shape.num_elements()
    self.kernel = kernel if kernel.shape.rank == 2 else tf.reshape(kernel, [-1, width_out])
    self.bias = bias if bias.shape.rank == 1 else tf.reshape(bias, [width_out])

  def __call__(self, inputs):
    return self._function(inputs)


def apply_projection(deltas, inputs, project, training=None):
  """`project(inputs)` changed by each of `deltas` in turn (the first wraps `project`).

  Args:
    deltas: `ProjectionDelta` layers, or functions of the same call signature.
    inputs: The projection's input.
    project: The frozen projection, a function of `inputs`; with its `kernel` and `bias` (a
      Keras `Dense` or a `Projection`) for changes that read them (DoRA), which then reach
      every delta of the chain.
    training: Whether dropout is on.

  Returns:
    The projection's output.
  """
  for delta in deltas:
    wrapped = _wrapped(delta, project, training)
    project = (Projection(wrapped, project.kernel, project.bias)
               if hasattr(project, "kernel") else wrapped)
  return project(inputs)


def _wrapped(delta, project, training):
  return lambda x: delta(x, project=project, training=training)


def per_example(inputs, task_ids, fn):
  """`fn(rows)` of `inputs` `[..., n]` regrouped as `[batch, tokens, n]` (the batch of
  `task_ids`), back in `inputs`' shape with the last axis `fn` gives: a projection's input
  arrives as `[batch, seq, n]` or flattened to `[batch * seq, n]`."""
  rows = tf.reshape(inputs, tf.stack([tf.shape(task_ids)[0], -1, tf.shape(inputs)[-1]]))
  output = fn(rows)
  return tf.reshape(output, tf.concat([tf.shape(inputs)[:-1], tf.shape(output)[-1:]], 0))


def stack_rows(values, width):
  """`[tasks, width]` of per-task vectors (`None`: ones, the identity scale)."""
  return np.stack([np.ones([width], np.float32) if v is None else np.asarray(v, np.float32)
                   for v in values])

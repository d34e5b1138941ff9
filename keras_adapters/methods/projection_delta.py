"""`ProjectionDelta`: a trained change to one frozen projection of a BERT block.

A block's projections are `y = x · W + b`: the attention's `query`, `key`, `value` and
`attention_output`, the feed-forward `intermediate` (before its activation) and `output`.
A method (LoRA, (IA)³) wraps some of them: its layer is called with the projection's input
and the frozen projection as a function, and returns the projection's new output, as peft's
wrapped `Linear` does. Every such change is linear in `W` and `b`, so `merge` folds it into
the frozen weights for inference at no extra cost.
"""

import tf_keras as keras

# The projections of a BERT block, under the Model Garden's sub-layer names.
PROJECTIONS = ("query", "key", "value", "attention_output", "intermediate", "output")


def projection_widths(target, hidden_size, intermediate_size):
  """`(input width, output width)` of the projection `target` in a block."""
  if target not in PROJECTIONS:
    raise ValueError(f"Unknown projection {target!r}; a BERT block has {list(PROJECTIONS)}.")
  return {"intermediate": (hidden_size, intermediate_size),
          "output": (intermediate_size, hidden_size)}.get(target, (hidden_size, hidden_size))


class ProjectionDelta(keras.layers.Layer):
  """Base class of the layers that change a frozen projection `project(x) = x · W + b`.

  Subclasses create their weights in `build(input_shape)` (the projection's input) and
  implement `call(inputs, project, training)`, `merge(kernel, bias)` and `weights_by_key()`.

  Args:
    target: The projection it changes, one of `PROJECTIONS`.
    units: The projection's output width.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, target, units, **kwargs):
    super().__init__(**kwargs)
    if target not in PROJECTIONS:
      raise ValueError(f"Unknown projection {target!r}; a BERT block has {list(PROJECTIONS)}.")
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

  def get_config(self):
    config = super().get_config()
    config.update({"target": self.target, "units": self.units})
    return config


def apply_projection(deltas, inputs, project, training=None):
  """`project(inputs)` changed by each of `deltas` in turn (the first wraps `project`).

  Args:
    deltas: `ProjectionDelta` layers, or functions of the same call signature.
    inputs: The projection's input.
    project: The frozen projection, a function of `inputs`.
    training: Whether dropout is on.

  Returns:
    The projection's output.
  """
  for delta in deltas:
    project = _wrapped(delta, project, training)
  return project(inputs)


def _wrapped(delta, project, training):
  return lambda x: delta(x, project=project, training=training)

"""The (IA)³ layer: a learned per-channel scale on a frozen projection's output or input."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods import projection_delta
from keras_adapters.methods.ia3 import definition


@keras.utils.register_keras_serializable(package="keras_adapters")
class IA3(projection_delta.ProjectionDelta):
  """(IA)³ (Liu et al. 2022): a trainable vector `l`, initialised to one, that rescales a
  frozen projection `x · W + b` channel by channel.

  On the output (`(x · W + b) ⊙ l`: the paper's keys and values, AdapterHub's
  `composition_mode="scale"` on any projection) or on the input (`(x ⊙ l) · W + b`: peft's
  `feedforward_modules`, which on BERT's feed-forward output projection scales the
  intermediate activation as the paper does). Either way `merge` folds `l` into `W` (and
  `b`).

  Example:
  >>> ia3 = IA3(target="output", units=8, scales_input=True)
  >>> ia3.build((None, 16))
  >>> ia3.scale.shape
  TensorShape([16])

  Args:
    target: The projection it changes (`projection_delta.PROJECTIONS`).
    units: The projection's output width.
    scales_input: Scale the projection's input instead of its output.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, target, units, scales_input=False, **kwargs):
    super().__init__(target, units, **kwargs)
    self.scales_input = scales_input

  def build(self, input_shape):
    for key, (shape, initializer) in definition.weights(
        self._options(), tf.TensorShape(input_shape)[-1], self.units).items():
      setattr(self, key, self.add_weight(key, shape, initializer=initializer))
    super().build(input_shape)

  def _options(self):
    return dict(scales_input=self.scales_input)

  def call(self, inputs, project, training=None):
    return definition.apply(tf, self.weights_by_key(), self._options(), inputs, project, None)

  def merge(self, kernel, bias):
    return definition.merge(tf, self.weights_by_key(), self._options(), kernel, bias)

  def weights_by_key(self):
    return {"scale": self.scale}

  @classmethod
  def stacked(cls, entries, name):
    # Tasks that scale the input and tasks that scale the output are two stacks, each the
    # identity (ones) for the tasks of the other.
    stacks = []
    for scales_input in (False, True):
      chosen = [entry if entry is not None and entry[1].get("scales_input", False)
                == scales_input else None for entry in entries]
      if any(chosen):
        stacks.append(StackedIA3(chosen, scales_input,
                                 name=f"{name}_{'input' if scales_input else 'output'}"))
    return stacks

  def get_config(self):
    config = super().get_config()
    config.update({"scales_input": self.scales_input})
    return config


class StackedIA3(tf.Module):
  """Several tasks' (IA)³ scales at one projection, `[tasks, width]`, ones for tasks without
  them (the identity), all scaling the input or all the output."""

  def __init__(self, entries, scales_input, name):
    super().__init__(name=name)
    width = next(e[0]["scale"].shape[0] for e in entries if e is not None)
    self.scales_input = scales_input
    with self.name_scope:
      self.scale = tf.Variable(projection_delta.stack_rows(
          [None if e is None else e[0]["scale"] for e in entries], width),
                               trainable=False, name="scale")

  def for_tasks(self, task_ids):
    scale = tf.gather(self.scale, task_ids)

    def scaled(values):
      if scale.shape.rank == 1:  # One task.
        return values * tf.cast(scale, values.dtype)
      return projection_delta.per_example(
          values, task_ids, lambda rows: rows * tf.cast(scale[:, tf.newaxis], rows.dtype))

    def change(inputs, project, training=None):
      del training
      return project(scaled(inputs)) if self.scales_input else scaled(project(inputs))

    return change

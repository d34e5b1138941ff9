"""The Houlsby bottleneck adapter."""

import tensorflow as tf
import tf_keras as keras


@keras.utils.register_keras_serializable(package="keras_adapters")
class Adapter(keras.layers.Layer):
  """Bottleneck adapter with an internal skip connection (Houlsby et al. 2019).

  Computes `h + W_up · f(W_down · h + b_down) + b_up`. Both projections start from a
  truncated normal (cut at two standard deviations) with a small standard deviation and the
  biases start at zero, so a new adapter is close to the identity and a frozen network keeps
  its pre-trained behaviour at the first step. For hidden size `d` and bottleneck `m` it holds
  `2md + d + m` parameters, created by `build()`.

  Example:
  >>> adapter = Adapter(adapter_size=8)
  >>> adapter.build((None, None, 32))
  >>> adapter.count_params()
  552
  >>> adapter(tf.zeros([2, 5, 32])).shape
  TensorShape([2, 5, 32])

  Args:
    adapter_size: `m`, the width of the down-projection; must be positive.
    activation: The nonlinearity `f` between the projections, any Keras activation name.
    init_stddev: Standard deviation of the truncated-normal initial projections. `0` makes
      the adapter an exact identity at initialisation.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, adapter_size, activation="relu", init_stddev=1e-2, **kwargs):
    super().__init__(**kwargs)
    # bool is an int subclass: True must not pass as a size of 1.
    if (isinstance(adapter_size, bool) or not isinstance(adapter_size, int)
        or adapter_size <= 0):
      raise ValueError(
          f"Adapter adapter_size must be a positive integer, got {adapter_size!r}. "
          "The paper uses sizes from 2 to 256; 64 is the usual default.")
    if init_stddev < 0:
      raise ValueError(f"Adapter init_stddev must be >= 0, got {init_stddev!r}.")
    self.adapter_size = adapter_size
    self.activation = activation
    self.init_stddev = init_stddev

  def build(self, input_shape):
    input_shape = tf.TensorShape(input_shape)
    self.down_project = keras.layers.Dense(
        self.adapter_size,
        activation=self.activation,
        kernel_initializer=self._kernel_initializer(),
        name="down_project")
    self.up_project = keras.layers.Dense(
        input_shape[-1], kernel_initializer=self._kernel_initializer(), name="up_project")
    # Built here, each in its own name scope, so the weights exist (and are named
    # ".../down_project/kernel") before the first call.
    with tf.name_scope(self.down_project.name):
      self.down_project.build(input_shape)
    with tf.name_scope(self.up_project.name):
      self.up_project.build(input_shape[:-1].concatenate([self.adapter_size]))
    super().build(input_shape)

  def _kernel_initializer(self):
    # One initializer object per kernel, as in the Model Garden: a shared seeded instance
    # would give both projections the same draw.
    return keras.initializers.TruncatedNormal(stddev=self.init_stddev)

  def weights_by_key(self):
    """The four weights by their name inside the adapter (`down_project/kernel`, ...)."""
    return {f"{dense.name}/{part}": getattr(dense, part)
            for dense in (self.down_project, self.up_project) for part in ("kernel", "bias")}

  def call(self, inputs):
    return inputs + self.up_project(self.down_project(inputs))

  def get_config(self):
    config = super().get_config()
    config.update({
        "adapter_size": self.adapter_size,
        "activation": self.activation,
        "init_stddev": self.init_stddev,
    })
    return config

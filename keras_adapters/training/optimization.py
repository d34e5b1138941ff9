"""The optimiser of Houlsby et al. (2019), which is BERT's: Adam with linear warmup and decay.

The learning rate rises linearly from 0 over the first `warmup_fraction` of the steps, then
falls linearly to 0 at `num_train_steps`. With `weight_decay` > 0 the optimiser is AdamW
(decoupled weight decay, as BERT's `AdamWeightDecay`), LayerNorm and bias variables excluded.
"""

from typing import Any, Dict

import tensorflow as tf
import tf_keras as keras

# BERT's Adam epsilon, larger than the Keras default of 1e-7.
ADAM_EPSILON = 1e-6

# Variable-name patterns (`re.search`) excluded from weight decay, as in BERT. "layer_norm"
# also matches Keras' "layer_normalization" and the Model Garden encoders' "*_layer_norm".
WEIGHT_DECAY_EXCLUDED_NAMES = ("layer_norm", "LayerNorm", "bias")


@keras.utils.register_keras_serializable(package="keras_adapters")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """`peak_learning_rate * step / warmup_steps` up to `warmup_steps`, then linear to 0.

  After warmup the rate is `peak_learning_rate * (num_train_steps - step) /
  (num_train_steps - warmup_steps)`, and 0 from `num_train_steps` on. The step is the
  optimiser's iteration count before the update, so the very first update uses rate 0 when
  there is a warmup, as in BERT.
  """

  def __init__(self, peak_learning_rate: float, num_train_steps: int, warmup_steps: int,
               name: str = "LinearWarmupLinearDecay"):
    """Initialises the schedule.

    Args:
      peak_learning_rate: The rate at the end of warmup, > 0.
      num_train_steps: Step at which the rate reaches 0, > 0.
      warmup_steps: Length of the warmup, in [0, num_train_steps).
      name: Name scope of the ops.

    Raises:
      ValueError: If an argument is out of its range.
    """
    super().__init__()
    if not peak_learning_rate > 0:
      raise ValueError(f"The learning rate must be > 0, got {peak_learning_rate}.")
    if num_train_steps < 1:
      raise ValueError(f"num_train_steps must be >= 1, got {num_train_steps}.")
    if not 0 <= warmup_steps < num_train_steps:
      raise ValueError(f"warmup_steps must be in [0, num_train_steps={num_train_steps}), "
                       f"got {warmup_steps}: lower the warmup fraction.")
    self.peak_learning_rate = peak_learning_rate
    self.num_train_steps = num_train_steps
    self.warmup_steps = warmup_steps
    self.name = name

  def __call__(self, step):
    with tf.name_scope(self.name):
      step = tf.cast(step, tf.float32)
      peak = tf.constant(self.peak_learning_rate, tf.float32)
      # Without warmup this branch is never selected, but `tf.where` still evaluates it:
      # max(..., 1) keeps it from dividing by zero.
      warmup = peak * step / max(self.warmup_steps, 1)
      decay_steps = self.num_train_steps - self.warmup_steps
      decay = peak * tf.maximum(self.num_train_steps - step, 0.0) / decay_steps
      return tf.where(step < self.warmup_steps, warmup, decay)

  def get_config(self) -> Dict[str, Any]:
    return {
        "peak_learning_rate": self.peak_learning_rate,
        "num_train_steps": self.num_train_steps,
        "warmup_steps": self.warmup_steps,
        "name": self.name,
    }


def create_optimizer(learning_rate: float,
                     num_train_steps: int,
                     warmup_fraction: float = 0.1,
                     weight_decay: float = 0.0) -> keras.optimizers.Optimizer:
  """Returns Adam (or AdamW) on the paper's warmup-then-linear-decay schedule.

  Args:
    learning_rate: Peak learning rate, reached at the end of warmup.
    num_train_steps: Total number of training steps; the rate is 0 from there on.
    warmup_fraction: Fraction of `num_train_steps` spent warming up, in [0, 1).
    weight_decay: Decoupled weight-decay rate (AdamW, BERT uses 0.01); 0 gives plain Adam.
      Variables whose names match `WEIGHT_DECAY_EXCLUDED_NAMES` are not decayed.

  Returns:
    An unbuilt `keras.optimizers.Adam` or `keras.optimizers.AdamW`. Create it under the
    distribution strategy's scope.

  Raises:
    ValueError: If an argument is out of its range.
  """
  if not 0 <= warmup_fraction < 1:
    raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}.")
  if weight_decay < 0:
    raise ValueError(f"weight_decay must be >= 0, got {weight_decay}.")
  schedule = LinearWarmupLinearDecay(
      peak_learning_rate=learning_rate,
      num_train_steps=num_train_steps,
      warmup_steps=int(num_train_steps * warmup_fraction))
  if weight_decay == 0:
    return keras.optimizers.Adam(learning_rate=schedule, epsilon=ADAM_EPSILON)
  optimizer = keras.optimizers.AdamW(
      learning_rate=schedule, weight_decay=weight_decay, epsilon=ADAM_EPSILON)
  optimizer.exclude_from_weight_decay(var_names=list(WEIGHT_DECAY_EXCLUDED_NAMES))
  return optimizer

"""The optimiser of Houlsby et al. (2019), which is BERT's, as the TF Model Garden builds it.

`official.nlp.optimization.create_optimizer` gives what google-research/adapter-bert's
`optimization.py` uses: Adam with decoupled weight decay (`AdamWeightDecay`, rate 0.01,
variables named like LayerNorm or bias excluded), gradients clipped to global norm 1.0, and a
learning rate that rises linearly from 0 over the warmup steps, then follows a linear decay
(polynomial, power 1) that starts from the peak at step 0 and reaches 0 at `num_train_steps`.

One change to it, in when, not what, it computes: each variable's weight decay waits for
that variable's gradient (`AdamWeightDecay`). The Model Garden's reads the variable for its
decay with nothing to wait for, so in a step's graph every decayed variable's
`learning_rate * weight_decay * variable` was computed at the start and held until the update
late in the backward pass: a temporary copy of every decayed weight (full fine-tuning of a
BERT-base shape at 32 x 128, `python bench/scale.py --shapes=base --methods=full
--seq_lengths=128 --num_tasks= --noinference`: 7,061 MB peak with it, 6,638 MB without).
"""

import numbers

import tensorflow as tf
import tf_keras as keras

from official.modeling.optimization import legacy_adamw
from official.nlp import optimization as model_garden_optimization

# adapter-bert's defaults (and BERT's).
DEFAULT_WARMUP_FRACTION = 0.1
DEFAULT_WEIGHT_DECAY = 0.01


class AdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """The Model Garden's `AdamWeightDecay`, each variable's decay computed once its gradient
  is: the same updates, without a copy of every decayed weight held through the step."""

  def _resource_apply_dense(self, grad, var, apply_state=None):
    with tf.control_dependencies([grad]):
      return super()._resource_apply_dense(grad, var, apply_state)

  def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
    with tf.control_dependencies([grad]):
      return super()._resource_apply_sparse(grad, var, indices, apply_state)


def create_optimizer(learning_rate: float,
                     num_train_steps: int,
                     warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
                     weight_decay: float = DEFAULT_WEIGHT_DECAY
                    ) -> keras.optimizers.Optimizer:
  """Returns the Model Garden's AdamWeightDecay (as `AdamWeightDecay` here) on its
  warmup-then-linear-decay schedule.

  Args:
    learning_rate: Peak learning rate, reached at the end of warmup.
    num_train_steps: Total number of training steps; the rate is 0 from there on.
    warmup_fraction: Fraction of `num_train_steps` spent warming up, in [0, 1).
    weight_decay: Decoupled weight-decay rate; the Model Garden fixes BERT's 0.01, other
      values (0 turns decay off) serve ablations.

  Returns:
    An `AdamWeightDecay`, an `official.nlp.optimization.AdamWeightDecay` (a `tf_keras`
    legacy Adam). Create it under the distribution strategy's scope.

  Raises:
    ValueError: If an argument is out of its range.
  """
  if not (isinstance(learning_rate, numbers.Real) and learning_rate > 0
          and learning_rate < float("inf")):
    raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}.")
  if not isinstance(num_train_steps, numbers.Integral) or num_train_steps < 1:
    raise ValueError(f"num_train_steps must be an integer >= 1, got {num_train_steps!r}.")
  if not 0 <= warmup_fraction < 1:
    raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction!r}.")
  if not 0 <= weight_decay < float("inf"):
    raise ValueError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}.")
  model_garden = model_garden_optimization.create_optimizer(
      init_lr=float(learning_rate), num_train_steps=int(num_train_steps),
      num_warmup_steps=int(num_train_steps * warmup_fraction))
  # Every setting and the schedule as the Model Garden chose them; its `get_config` holds
  # the schedule serialized, and leaves out the clipping and which variables decay.
  # pylint: disable=protected-access
  optimizer = AdamWeightDecay(
      **dict(model_garden.get_config(), learning_rate=model_garden.learning_rate,
             weight_decay_rate=float(weight_decay)),
      include_in_weight_decay=model_garden._include_in_weight_decay,
      exclude_from_weight_decay=model_garden._exclude_from_weight_decay,
      gradient_clip_norm=model_garden.gradient_clip_norm)
  return optimizer


def current_learning_rate(optimizer: keras.optimizers.Optimizer, offset: int = 0) -> float:
  """The rate of `optimizer`'s schedule at its iteration count plus `offset`.

  Args:
    optimizer: An optimiser whose learning rate is a number or a schedule.
    offset: 0 for the rate of the next step, -1 for the step just taken.

  Returns:
    The learning rate as a Python float.
  """
  rate = optimizer.learning_rate
  if callable(rate):
    rate = rate(optimizer.iterations + offset)
  return float(tf.convert_to_tensor(rate))

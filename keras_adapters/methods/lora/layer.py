"""The LoRA layer: a low-rank update `(alpha / r) · B · A` beside a frozen projection."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods import projection_delta
from keras_adapters.methods.lora import definition
from keras_adapters.methods.lora import dora

INITIALISATIONS = definition.INITIALISATIONS


@keras.utils.register_keras_serializable(package="keras_adapters")
class LoRA(projection_delta.ProjectionDelta):
  """Low-rank adaptation (Hu et al. 2021) of a frozen projection `x · W + b`.

  Computes `x · W + b + s · dropout(x) · A · B` with `A` `[in, r]` and `B` `[r, units]`
  trainable, `s = alpha / r` (or `alpha / sqrt(r)`, rsLoRA), as peft's and AdapterHub's
  `LoRA` layers do; `merge` folds `s · A · B` into `W`. With `use_dora` it is DoRA
  (`dora.py`): a trainable `magnitude` `m` `[units]` rescales each output feature of
  `W + s · A · B` to length `m`, as peft or AdapterHub compute it (`dora_variant`).

  Example:
  >>> lora = LoRA(target="query", units=8, rank=2, alpha=4)
  >>> lora.build((None, 6))
  >>> [tuple(w.shape) for w in lora.weights]
  [(6, 2), (2, 8)]

  Args:
    target: The projection it changes (`projection_delta.PROJECTIONS`).
    units: The projection's output width.
    rank: `r`, the rank of the update.
    alpha: The update's scale numerator.
    use_rslora: Scale by `alpha / sqrt(r)` (Kalajdzievski 2023) instead of `alpha / r`.
    dropout: Dropout on the update's input while training.
    init_weights: How `A` and `B` start, one of `INITIALISATIONS`.
    use_dora: Learn the magnitudes too (DoRA).
    dora_variant: Whose DoRA, one of `dora.VARIANTS`.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, target, units, rank=8, alpha=8.0, use_rslora=False, dropout=0.0,
               init_weights="lora", use_dora=False, dora_variant="peft", **kwargs):
    super().__init__(target, units, **kwargs)
    if init_weights not in INITIALISATIONS:
      raise ValueError(f"Unknown LoRA init_weights {init_weights!r}; choose one of "
                       f"{list(INITIALISATIONS)}.")
    if dora_variant not in dora.VARIANTS:
      raise ValueError(f"Unknown dora_variant {dora_variant!r}; choose one of "
                       f"{list(dora.VARIANTS)}.")
    self.rank = rank
    self.alpha = alpha
    self.use_rslora = use_rslora
    self.dropout = dropout
    self.init_weights = init_weights
    self.use_dora = use_dora
    self.dora_variant = dora_variant

  @property
  def scaling(self):
    """The factor `s` on `A · B`."""
    return _scaling(self._options())

  def _options(self):
    """The options `definition` reads."""
    return dict(rank=self.rank, alpha=self.alpha, use_rslora=self.use_rslora,
                dropout=self.dropout, init_weights=self.init_weights, use_dora=self.use_dora,
                dora_variant=self.dora_variant)

  def build(self, input_shape):
    weights = definition.weights(self._options(), tf.TensorShape(input_shape)[-1], self.units)
    for key, (shape, initializer) in weights.items():
      setattr(self, key, self.add_weight(key, shape,
                                         initializer=keras.initializers.get(initializer)))
    self._keys = tuple(weights)
    self.update_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
    super().build(input_shape)

  def start_from(self, kernel, bias):
    for key, value in definition.start_from(tf, self.weights_by_key(), self._options(),
                                            tf.reshape(kernel, [-1, self.units])).items():
      getattr(self, key).assign(value)

  def call(self, inputs, project, training=None):
    dropout = ((lambda tokens: self.update_dropout(tokens, training=training))
               if self.dropout and training else None)
    return definition.apply(tf, self.weights_by_key(), self._options(), inputs, project,
                            dropout)

  def merge(self, kernel, bias):
    return definition.merge(tf, self.weights_by_key(), self._options(), kernel, bias)

  def weights_by_key(self):
    return {key: getattr(self, key) for key in self._keys}

  @classmethod
  def stacked(cls, entries, name):
    return [StackedLoRA(entries, name=name)]

  def get_config(self):
    config = super().get_config()
    config.update({"rank": self.rank, "alpha": self.alpha, "use_rslora": self.use_rslora,
                   "dropout": self.dropout, "init_weights": self.init_weights,
                   "use_dora": self.use_dora, "dora_variant": self.dora_variant})
    return config


class StackedLoRA(tf.Module):
  """Several tasks' LoRA factors at one projection: `A` `[tasks, in, r]` and `s · B`
  `[tasks, r, out]`, zero-padded to the largest rank (a zero column of `A` and row of `B`
  add nothing) and zero for tasks without LoRA there, so every task stays exact.

  When some task uses DoRA, each task's factor `c = m / ‖W + ν · A · s·B‖` is computed from
  the frozen kernel at each call (`ν`: 1 for peft's variant, `1 / s` for AdapterHub's), and
  one for the other tasks; `dora.combine` gives the output with a zero bias share
  (`keeps_bias` 0) for AdapterHub's variant and for plain LoRA, whose `c` is one.
  """

  def __init__(self, entries, name):
    super().__init__(name=name)
    present = [entry for entry in entries if entry is not None]
    width_in, width_out = present[0][0]["lora_a"].shape[0], present[0][0]["lora_b"].shape[1]
    rank = max(weights["lora_a"].shape[1] for weights, _ in present)
    a = np.zeros([len(entries), width_in, rank], np.float32)
    b = np.zeros([len(entries), rank, width_out], np.float32)
    dora_tasks = [entry is not None and entry[1].get("use_dora", False) for entry in entries]
    magnitude = np.ones([len(entries), width_out], np.float32)
    norm_scale = np.ones([len(entries), 1, 1], np.float32)
    keeps_bias = np.zeros([len(entries), 1], np.float32)
    for task, entry in enumerate(entries):
      if entry is not None:
        weights, options = entry
        r = weights["lora_a"].shape[1]
        a[task, :, :r] = weights["lora_a"]
        b[task, :r] = weights["lora_b"] * _scaling(options)
        if dora_tasks[task]:
          variant = options.get("dora_variant", "peft")
          magnitude[task] = weights["magnitude"]
          norm_scale[task] = dora.norm_update_scale(variant, _scaling(options)) / _scaling(
              options)
          keeps_bias[task] = 0.0 if dora.rescales_bias(variant) else 1.0
    with self.name_scope:
      self.a = tf.Variable(a, trainable=False, name="lora_a")
      self.b = tf.Variable(b, trainable=False, name="lora_b")
      self.dora = None
      if any(dora_tasks):
        self.dora = (tf.constant(dora_tasks)[:, tf.newaxis],
                     tf.Variable(magnitude, trainable=False, name="magnitude"),
                     tf.constant(norm_scale), tf.constant(keeps_bias))

  def _dora_factors(self, kernel):
    """`[tasks, out]` of each task's `c`, one for tasks without DoRA, in float32."""
    is_dora, magnitude, norm_scale, _ = self.dora
    norms = dora.column_norm(tf, kernel, norm_scale * tf.matmul(self.a, self.b), "peft")
    return tf.where(is_dora, magnitude / norms, tf.ones_like(magnitude))

  def for_tasks(self, task_ids):
    a, b = tf.gather(self.a, task_ids), tf.gather(self.b, task_ids)

    def change(inputs, project, training=None):
      del training  # Serving: no dropout.
      output = project(inputs)
      if a.shape.rank == 2:  # One task.
        tokens = tf.reshape(inputs, [-1, inputs.shape[-1]])
        update = tf.matmul(tf.matmul(tokens, tf.cast(a, tokens.dtype)), tf.cast(b, tokens.dtype))
        update = tf.reshape(tf.cast(update, output.dtype), tf.shape(output))
      else:
        update = tf.cast(projection_delta.per_example(inputs, task_ids, lambda rows: tf.einsum(
            "bsr,brk->bsk", tf.einsum("bsn,bnr->bsr", rows, tf.cast(a, rows.dtype)),
            tf.cast(b, rows.dtype))), output.dtype)
      if self.dora is None:
        return output + update
      factor = tf.gather(self._dora_factors(project.kernel), task_ids)
      bias = tf.gather(self.dora[3], task_ids) * project.bias
      if a.shape.rank == 2:
        return dora.combine(output, update, tf.cast(factor, output.dtype),
                            tf.cast(bias, output.dtype), "peft")
      # Per example: the factor and bias `[batch, out]` broadcast over each one's tokens.
      return projection_delta.per_example(
          tf.concat([output, update], -1), task_ids, lambda rows: dora.combine(
              rows[..., :output.shape[-1]], rows[..., output.shape[-1]:],
              tf.cast(factor[:, tf.newaxis], rows.dtype),
              tf.cast(bias[:, tf.newaxis], rows.dtype), "peft"))

    return change


def _scaling(options):
  """`alpha / r` (or `alpha / sqrt(r)`) of a LoRA layer's options."""
  return definition.scaling(options)

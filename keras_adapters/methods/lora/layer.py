"""The LoRA layer: a low-rank update `(alpha / r) · B · A` beside a frozen projection."""

import math

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods import projection_delta

# How A and B start: "lora" is peft's and AdapterHub's default (A as PyTorch's `nn.Linear`,
# Kaiming-uniform with a=sqrt(5), i.e. uniform in ±1/sqrt(in); B zero), "gaussian" peft's
# `init_lora_weights="gaussian"` (A normal with std 1/r; B zero), "bert" AdapterHub's
# `init_weights="bert"` (both normal with std 0.02). With B zero the model starts as the base.
INITIALISATIONS = ("lora", "gaussian", "bert")


@keras.utils.register_keras_serializable(package="keras_adapters")
class LoRA(projection_delta.ProjectionDelta):
  """Low-rank adaptation (Hu et al. 2021) of a frozen projection `x · W + b`.

  Computes `x · W + b + s · dropout(x) · A · B` with `A` `[in, r]` and `B` `[r, units]`
  trainable, `s = alpha / r` (or `alpha / sqrt(r)`, rsLoRA), as peft's and AdapterHub's
  `LoRA` layers do; `merge` folds `s · A · B` into `W`.

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
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self, target, units, rank=8, alpha=8.0, use_rslora=False, dropout=0.0,
               init_weights="lora", **kwargs):
    super().__init__(target, units, **kwargs)
    if init_weights not in INITIALISATIONS:
      raise ValueError(f"Unknown LoRA init_weights {init_weights!r}; choose one of "
                       f"{list(INITIALISATIONS)}.")
    self.rank = rank
    self.alpha = alpha
    self.use_rslora = use_rslora
    self.dropout = dropout
    self.init_weights = init_weights

  @property
  def scaling(self):
    """The factor `s` on `A · B`."""
    return _scaling(dict(rank=self.rank, alpha=self.alpha, use_rslora=self.use_rslora))

  def build(self, input_shape):
    width = tf.TensorShape(input_shape)[-1]
    a_init, b_init = {
        "lora": (keras.initializers.RandomUniform(-1 / math.sqrt(width), 1 / math.sqrt(width)),
                 "zeros"),
        "gaussian": (keras.initializers.RandomNormal(stddev=1 / self.rank), "zeros"),
        "bert": (keras.initializers.RandomNormal(stddev=0.02),
                 keras.initializers.RandomNormal(stddev=0.02)),
    }[self.init_weights]
    self.lora_a = self.add_weight("lora_a", [width, self.rank], initializer=a_init)
    self.lora_b = self.add_weight("lora_b", [self.rank, self.units], initializer=b_init)
    self.update_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
    super().build(input_shape)

  def call(self, inputs, project, training=None):
    # One 2-D product per factor, over every token, as the attention's projections are.
    tokens = tf.reshape(inputs, [-1, inputs.shape[-1]])
    tokens = self.update_dropout(tokens, training=training)
    update = tf.matmul(tf.matmul(tokens, tf.cast(self.lora_a, tokens.dtype)),
                       tf.cast(self.lora_b * self.scaling, tokens.dtype))
    output = project(inputs)
    return output + tf.reshape(tf.cast(update, output.dtype), tf.shape(output))

  def merge(self, kernel, bias):
    return kernel + self.scaling * tf.matmul(self.lora_a, self.lora_b), bias

  def weights_by_key(self):
    return {"lora_a": self.lora_a, "lora_b": self.lora_b}

  @classmethod
  def stacked(cls, entries, name):
    return [StackedLoRA(entries, name=name)]

  def get_config(self):
    config = super().get_config()
    config.update({"rank": self.rank, "alpha": self.alpha, "use_rslora": self.use_rslora,
                   "dropout": self.dropout, "init_weights": self.init_weights})
    return config


class StackedLoRA(tf.Module):
  """Several tasks' LoRA factors at one projection: `A` `[tasks, in, r]` and `s · B`
  `[tasks, r, out]`, zero-padded to the largest rank (a zero column of `A` and row of `B`
  add nothing) and zero for tasks without LoRA there, so every task stays exact."""

  def __init__(self, entries, name):
    super().__init__(name=name)
    present = [entry for entry in entries if entry is not None]
    width_in, width_out = present[0][0]["lora_a"].shape[0], present[0][0]["lora_b"].shape[1]
    rank = max(weights["lora_a"].shape[1] for weights, _ in present)
    a = np.zeros([len(entries), width_in, rank], np.float32)
    b = np.zeros([len(entries), rank, width_out], np.float32)
    for task, entry in enumerate(entries):
      if entry is not None:
        weights, options = entry
        r = weights["lora_a"].shape[1]
        a[task, :, :r] = weights["lora_a"]
        b[task, :r] = weights["lora_b"] * _scaling(options)
    with self.name_scope:
      self.a = tf.Variable(a, trainable=False, name="lora_a")
      self.b = tf.Variable(b, trainable=False, name="lora_b")

  def for_tasks(self, task_ids):
    a, b = tf.gather(self.a, task_ids), tf.gather(self.b, task_ids)

    def change(inputs, project, training=None):
      del training  # Serving: no dropout.
      output = project(inputs)
      if a.shape.rank == 2:  # One task.
        tokens = tf.reshape(inputs, [-1, inputs.shape[-1]])
        update = tf.matmul(tf.matmul(tokens, tf.cast(a, tokens.dtype)), tf.cast(b, tokens.dtype))
        return output + tf.reshape(tf.cast(update, output.dtype), tf.shape(output))
      update = projection_delta.per_example(inputs, task_ids, lambda rows: tf.einsum(
          "bsr,brk->bsk", tf.einsum("bsn,bnr->bsr", rows, tf.cast(a, rows.dtype)),
          tf.cast(b, rows.dtype)))
      return output + tf.cast(update, output.dtype)

    return change


def _scaling(options):
  """`alpha / r` (or `alpha / sqrt(r)`) of a LoRA layer's options."""
  rank, alpha = options["rank"], options["alpha"]
  return alpha / (math.sqrt(rank) if options.get("use_rslora") else rank)

"""Parameter accounting in the style of peft's `print_trainable_parameters`."""

import dataclasses

import numpy as np

from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.networks import adapted_bert_encoder


@dataclasses.dataclass(frozen=True)
class ParameterSummary:
  """Parameter counts of a model with a shared frozen base.

  Attributes:
    trainable: Parameters that train for this task (adapters, LayerNorms, head, ...).
    total: All parameters of the model.
    base: Parameters of the pre-trained base encoder (no adapters, no head).
    adapter_sizes: Parameter count of each adapter, bottom layer first.
  """
  trainable: int
  total: int
  base: int
  adapter_sizes: tuple

  @property
  def trainable_percent(self):
    return 100.0 * self.trainable / self.total

  @property
  def adapters(self):
    return sum(self.adapter_sizes)

  def total_for_tasks(self, num_tasks):
    """Parameters to serve `num_tasks` tasks: one frozen base plus each task's trained part."""
    return self.total - self.trainable + num_tasks * self.trainable

  def __str__(self):
    lines = [f"trainable params: {self.trainable:,} || all params: {self.total:,} || "
             f"trainable%: {self.trainable_percent:.4f}"]
    if self.adapter_sizes:
      sizes = sorted(set(self.adapter_sizes))
      each = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}-{sizes[-1]:,}"
      lines.append(f"adapters: {len(self.adapter_sizes)} x {each} = {self.adapters:,} params")
    for num_tasks in (1, 9, 17):
      total = self.total_for_tasks(num_tasks)
      lines.append(f"{num_tasks} task(s): {total:,} params = {total / self.base:.2f} x base "
                   f"(one full fine-tuned copy per task: {num_tasks * self.total / self.base:.2f}"
                   " x)")
    return "\n".join(lines)


def parameter_summary(model):
  """Counts the parameters of `model` (any Keras layer or model).

  Args:
    model: A Keras model or layer, possibly containing `AdaptedBert` encoders.

  Returns:
    A `ParameterSummary`.
  """
  modules = [model] + list(model.submodules)
  adapters = [m for m in modules if isinstance(m, adapter_lib.Adapter)]
  encoders = [m for m in modules if isinstance(m, adapted_bert_encoder.AdaptedBertEncoder)]
  adapter_sizes = tuple(_count(a.weights) for a in adapters)
  total = _count(model.weights)
  # Adapter sets added to an `AdaptedBert` live beside its encoder, not inside it.
  adapter_weights = {id(w) for a in adapters for w in a.weights}
  base = sum(_count([w for w in e.weights if id(w) not in adapter_weights])
             for e in encoders) if encoders else total
  return ParameterSummary(trainable=_count(model.trainable_weights), total=total, base=base,
                          adapter_sizes=adapter_sizes)


def print_trainable_parameters(model):
  """Prints `parameter_summary(model)`: trainable / all / trainable% and N-task totals."""
  print(parameter_summary(model))


def _count(weights):
  # Mirrored variables appear once per model, whatever the number of replicas.
  unique = {id(w): w for w in weights}.values()
  return int(sum(np.prod(w.shape) for w in unique))

"""Folding LoRA and (IA)³ into the frozen kernels, as peft's `merge_and_unload`.

Every method layer changes a projection linearly (`ProjectionDelta.merge`), so a task model
with its layers folded in computes what it computed before with the base's own graph and
cost. `merge` does it for good; `merged` for the time of an export, and then restores the
base's kernels and the layers, so the model trains and saves its adapters as before.
"""

import contextlib

import tensorflow as tf

from keras_adapters.models import adapted_bert as adapted_bert_lib
from keras_adapters.models import saving


def merge(model):
  """Folds the LoRA and (IA)³ layers of `model`'s `AdaptedBert` into its frozen kernels.

  Afterwards the model has the base's own graph (no method layers) and the same outputs,
  within float32 rounding. Its adapter set is gone, as after peft's `merge_and_unload`:
  `save_adapters`, `save_peft`, `save_adapterhub` and `load_adapters` refuse the model, and
  training it trains the head only (with a warning). Save the adapters before merging, or
  export with `export_task`, which merges for the export only.

  Example:
  ```python
  keras_adapters.merge(model)  # model: build_classifier around AdaptedBert(LoRAConfig(...))
  ```

  Args:
    model: A Keras model with exactly one `AdaptedBert` (or the `AdaptedBert` itself).

  Returns:
    The number of projections changed (0 for a model without LoRA or (IA)³).
  """
  bert = saving.the_adapted_bert(model)
  merged_count = 0
  for block in bert.encoder.transformer_layers:
    for target, layers in block.deltas.items():
      _fold(layers, *block.projection_variables(target))
      merged_count += 1
    block.deltas = {}
  pooler = bert.encoder.pooler_transform
  if bert.encoder.pooler_deltas:
    _fold(bert.encoder.pooler_deltas, pooler.kernel, pooler.bias)
    merged_count += 1
  bert.encoder.pooler_deltas = []
  if merged_count:
    bert.merged = True
    _forget_traced_functions(model)
  return merged_count


def _fold(layers, kernel, bias):
  """Folds `layers`, applied in turn, into the projection's `kernel` and `bias` variables."""
  merged_kernel = tf.reshape(kernel, [-1, _output_width(kernel, bias)])
  merged_bias = tf.reshape(bias, [-1])
  for layer in layers:
    merged_kernel, merged_bias = layer.merge(merged_kernel, merged_bias)
  kernel.assign(tf.reshape(merged_kernel, kernel.shape))
  bias.assign(tf.reshape(merged_bias, bias.shape))


@contextlib.contextmanager
def merged(model):
  """A context in which `model`'s LoRA and (IA)³ layers are folded into its kernels, which
  are restored, with the layers, when it ends.

  Yields:
    The number of projections merged.
  """
  bert = saving.the_adapted_bert(model)
  blocks = bert.encoder.transformer_layers
  kept = [(block, dict(block.deltas),
           {target: [v.numpy() for v in block.projection_variables(target)]
            for target in block.deltas}) for block in blocks]
  pooler = bert.encoder.pooler_transform
  pooler_kept = (list(bert.encoder.pooler_deltas),
                 [v.numpy() for v in (pooler.kernel, pooler.bias)]
                 if bert.encoder.pooler_deltas else None)
  was_merged = bert.merged
  try:
    yield merge(model)
  finally:
    for block, deltas, values in kept:
      for target, (kernel, bias) in values.items():
        kernel_variable, bias_variable = block.projection_variables(target)
        kernel_variable.assign(kernel)
        bias_variable.assign(bias)
      block.deltas = deltas
    pooler_deltas, pooler_values = pooler_kept
    if pooler_values is not None:
      pooler.kernel.assign(pooler_values[0])
      pooler.bias.assign(pooler_values[1])
    bert.encoder.pooler_deltas = pooler_deltas
    bert.merged = was_merged
    _forget_traced_functions(model)


def merged_if_any(model):
  """`merged(model)` when `model` holds one `AdaptedBert` with LoRA or (IA)³ layers, else a
  context that changes nothing (bottleneck adapters cannot be folded in)."""
  berts = [m for m in [model] + list(model.submodules)
           if isinstance(m, adapted_bert_lib.AdaptedBert)]
  if len(berts) == 1 and berts[0].encoder.projection_layers:
    return merged(model)
  return contextlib.nullcontext(0)


def _output_width(kernel, bias):
  """The output width of a projection: its bias's size (query's `[heads, head_size]` too)."""
  del kernel
  return bias.shape.num_elements()


def _forget_traced_functions(model):
  """Drops the `fit`, `evaluate` and `predict` functions a Keras model traced before its
  projections changed: they would still apply the method layers, to merged kernels (or
  leave them out of restored ones). Its next `predict` traces the graph it has now."""
  for name in ("train_function", "test_function", "predict_function"):
    if getattr(model, name, None) is not None:
      setattr(model, name, None)

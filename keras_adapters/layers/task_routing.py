"""Several tasks' adapters and LayerNorms stacked along a task axis, applied per example.

One pass of a shared encoder then answers a batch that mixes tasks: each example's adapter
and LayerNorm parameters are gathered by its task id. Tasks with smaller adapters (or none
in a block) are zero-padded to the largest bottleneck, which leaves their outputs exact: a
zero row of `W_up` adds nothing whatever the activation gives the padded units. Tasks may
place their adapters differently (AdapterHub's options): each placement among the tasks is
computed and every example takes its own task's, and a task without an adapter where another
has one takes the plain sub-layer path there, so every task stays exact. Tasks trained with a
method that changes projections (LoRA, (IA)³) have their layers stacked by the method itself
(`ProjectionDelta.stacked`), the identity for tasks without them.
"""

import functools
import re

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import adapter_set
from keras_adapters.methods import projection_delta
from keras_adapters.methods import registry

_ADAPTER_SLOTS = ("attention_adapter", "feedforward_adapter")
_LAYER_NORM_SLOTS = ("self_attention_layer_norm", "output_layer_norm")
_ADAPTER_PARTS = ("down_project/kernel", "down_project/bias", "up_project/kernel",
                  "up_project/bias")
# An adapter's own LayerNorms (AdapterHub's ln_before / ln_after), when its options have them.
_ADAPTER_NORMS = ("ln_before", "ln_after")
# A method layer's weight: `transformer/layer_<i>/<projection>/<method>/<weight>`, or the
# pooler's, `pooler_transform/<method>/<weight>`.
_PROJECTION_KEY = re.compile(r"transformer/layer_(\d+)/(\w+)/(\w+)/(\w+)")
_POOLER_KEY = re.compile(r"pooler_transform/(\w+)/(\w+)")
# Where `_stack_projections` keeps the pooler's stacked layers.
_POOLER = "pooler"


def layer_norm(inputs, gamma, beta, epsilon):
  """LayerNorm over the last axis with the given scale and offset, computed as Keras does.

  Args:
    inputs: `[..., hidden]`.
    gamma: Scale, broadcastable to `inputs` (`[hidden]`, or `[batch, 1, hidden]` per example).
    beta: Offset, likewise.
    epsilon: Added to the variance.

  Returns:
    The normalised `inputs`, in float32.
  """
  inputs = tf.cast(inputs, tf.float32)
  mean, variance = tf.nn.moments(inputs, axes=[-1], keepdims=True)
  return tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                   variance_epsilon=epsilon)


class StackedAdapters(tf.Module):
  """The adapters and LayerNorms of several tasks on one encoder, one variable per weight.

  Each of the encoder's LayerNorms becomes a `[tasks, hidden]` gamma and beta; each adapter
  position a `[tasks, hidden, m]` down-projection (and so on), `m` the largest bottleneck
  there. `encoder_adapters(task_ids)` gives what the encoder's call takes
  (`AdaptedBertEncoder(..., adapters=...)`): per example when `task_ids` is a `[batch]`
  tensor, or one task's slices when it is a Python int.

  Args:
    task_weights: Per task, its adapter and LayerNorm arrays by the keys of
      `adapter_weights_by_key` (as stored in an adapter artifact). Every task has every
      LayerNorm; adapters may differ in size or be absent.
    num_layers: Transformer blocks of the encoder.
    activation: The adapters' nonlinearity, the same for every task.
    layer_norm_epsilon: LayerNorm epsilon of the encoder.
    name: Module name.
    adapter_options: The adapters' AdapterHub options (`adapter.ADAPTER_OPTIONS`): one dict
      for every task, or a list with each task's (`None` for a task without adapters).
    set_configs: Per task, its adapter set's config as a dict (`to_dict()`, as artifacts
      record it), which says how a method's layers apply (LoRA's scaling, where (IA)³
      scales); needed for tasks with LoRA or (IA)³ weights.
  """

  def __init__(self, task_weights, num_layers, activation, layer_norm_epsilon,
               name="stacked_adapters", adapter_options=None, set_configs=None):
    super().__init__(name=name)
    if not task_weights:
      raise ValueError("StackedAdapters needs the weights of at least one task.")
    self.num_tasks = len(task_weights)
    self.num_layers = num_layers
    self.activation = keras.activations.get(activation)
    self.layer_norm_epsilon = layer_norm_epsilon
    if adapter_options is None or isinstance(adapter_options, dict):
      adapter_options = [adapter_options] * self.num_tasks
    task_options = [_layer_options(options) for options in adapter_options]
    self.layer_norms = {}
    self.adapters = {}
    # Per adapter position: its own LayerNorms' stacked (gamma, beta) when a task has them,
    # and each placement among the tasks with which of them have an adapter there.
    self.adapter_layer_norms = {}
    self.placements = {}
    with self.name_scope:
      for prefix in self._layer_norm_prefixes():
        self.layer_norms[prefix] = tuple(
            tf.Variable(np.stack([weights[f"{prefix}/{part}"] for weights in task_weights]),
                        trainable=False, name=f"{prefix}/{part}") for part in ("gamma", "beta"))
      for index in range(num_layers):
        for slot in _ADAPTER_SLOTS:
          prefix = f"transformer/layer_{index}/{slot}"
          stacked = _stack_adapters(prefix, task_weights)
          if stacked is None:
            continue
          self.adapters[prefix] = tuple(
              tf.Variable(value, trainable=False, name=f"{prefix}/{part}")
              for value, part in zip(stacked, _ADAPTER_PARTS))
          present = [f"{prefix}/down_project/bias" in weights for weights in task_weights]
          self.placements[prefix] = _placements(task_options, present)
          self.adapter_layer_norms[prefix] = {
              norm: tuple(tf.Variable(value, trainable=False, name=f"{prefix}/{norm}/{part}")
                          for value, part in zip(_stack_norm(f"{prefix}/{norm}", task_weights),
                                                 ("gamma", "beta")))
              for norm in _ADAPTER_NORMS
              if any(f"{prefix}/{norm}/gamma" in weights for weights in task_weights)}
      # "layer_<i>/<projection>" → the stacked method layers there, in the registry's order.
      self.projections = _stack_projections(task_weights, set_configs)

  def _layer_norm_prefixes(self):
    return ["embeddings/layer_norm"] + [
        f"transformer/layer_{index}/{slot}"
        for index in range(self.num_layers) for slot in _LAYER_NORM_SLOTS]

  def encoder_adapters(self, task_ids):
    """The stacked sets for a batch, as the encoder's `adapters=` argument.

    Args:
      task_ids: int32 `[batch]`, each example's task index; or one task for the whole batch,
        a Python int or a scalar tensor (that task's slices).

    Returns:
      An `EncoderAdapters` of functions.
    """
    def norm(prefix):
      gamma, beta = (_rows(v, task_ids) for v in self.layer_norms[prefix])
      return lambda x: layer_norm(x, gamma, beta, self.layer_norm_epsilon)

    def adapter(prefix):
      if prefix not in self.adapters:
        return None
      down_kernel, down_bias, up_kernel, up_bias = (
          _rows(v, task_ids) for v in self.adapters[prefix])
      norms = {}
      for norm, (gamma, beta) in self.adapter_layer_norms[prefix].items():
        norms[f"norm_{norm[3:]}"] = functools.partial(
            layer_norm, gamma=_rows(gamma, task_ids), beta=_rows(beta, task_ids),
            epsilon=adapter_lib.ADAPTER_LAYER_NORM_EPSILON)

      def project(x):
        # `place_adapter` passes float32, and the stacked variables are float32: the adapters
        # project in float32 even in a mixed-precision encoder (a small share of its work).
        return _matmul(self.activation(_matmul(x, down_kernel) + down_bias),
                       up_kernel) + up_bias

      def placed(hidden, sublayer_input, layer_norm):
        output = None
        for options, members in self.placements[prefix]:
          parts = adapter_lib.AdapterParts(
              project, **{f"norm_{norm[3:]}": norms[f"norm_{norm[3:]}"]
                          for norm in _ADAPTER_NORMS if options[norm]})
          placed_output = adapter_lib.place_adapter(parts, options, hidden, sublayer_input,
                                                    layer_norm)
          if members is None:  # Every task, placed alike.
            return placed_output
          if output is None:
            # Tasks without an adapter here take BERT's own path.
            output = layer_norm(sublayer_input + hidden)
          rows = tf.reshape(tf.gather(members, task_ids), [-1, 1, 1])
          output = tf.where(rows, placed_output, output)
        return output

      return placed

    def projections(index):
      return {key.split("/")[1]: tuple(stack.for_tasks(task_ids) for stack in stacks)
              for key, stacks in self.projections.items()
              if key.split("/")[0] == f"layer_{index}"}

    pooler = tuple(stack.for_tasks(task_ids) for stack in self.projections.get(_POOLER, ()))

    blocks = tuple(
        adapted_transformer_block.BlockAdapters(
            *(adapter(f"transformer/layer_{index}/{slot}") if slot in _ADAPTER_SLOTS
              else norm(f"transformer/layer_{index}/{slot}")
              for slot in adapted_transformer_block.SLOTS), projections=projections(index))
        for index in range(self.num_layers))
    return adapter_set.EncoderAdapters(norm("embeddings/layer_norm"), blocks, pooler)


def _stack_projections(task_weights, set_configs):
  """`{"layer_<i>/<projection>": [stacked modules], "pooler": [...]}` of the tasks' LoRA and
  (IA)³ weights."""
  found = {}  # (layer, projection, method) → per task its weights by name; layer -1: pooler.
  for task, weights in enumerate(task_weights):
    for key, value in weights.items():
      match = _PROJECTION_KEY.fullmatch(key)
      pooler = _POOLER_KEY.fullmatch(key)
      if match and match.group(2) in projection_delta.PROJECTIONS:
        layer, target, method, part = match.groups()
      elif pooler and pooler.group(1) in registry.names():
        (method, part), layer, target = pooler.groups(), -1, projection_delta.POOLER
      else:
        continue
      found.setdefault((int(layer), target, method), [{} for _ in task_weights])
      found[(int(layer), target, method)][task][part] = value
  if found and (set_configs is None or len(set_configs) != len(task_weights)):
    raise ValueError("Tasks with LoRA or (IA)^3 weights need their set_configs.")
  projections = {}
  for (layer, target, method), per_task in sorted(
      found.items(), key=lambda item: (item[0][0], item[0][1],
                                       registry.names().index(item[0][2]))):
    entry = registry.get(method)
    entries = [(weights, entry.config_class.from_dict(set_configs[task]).layer_options(target))
               if weights else None for task, weights in enumerate(per_task)]
    projections.setdefault(_POOLER if layer < 0 else f"layer_{layer}/{target}", []).extend(
        entry.layer_class.stacked(entries, name=f"layer_{layer}_{target}_{method}"
                                  if layer >= 0 else f"{target}_{method}"))
  return projections


def _rows(variable, task_ids):
  """One task's slice, or each example's (with a sequence axis to broadcast over)."""
  rows = tf.gather(variable, task_ids)
  if rows.shape.rank == variable.shape.rank - 1:  # One task.
    return rows
  # Biases and LayerNorm parameters [batch, n] → [batch, 1, n]; kernels stay [batch, n, k].
  return rows[:, tf.newaxis] if rows.shape.rank == 2 else rows


def _matmul(inputs, kernel):
  """`[batch, seq, n]` times a kernel `[n, k]` or per-example kernels `[batch, n, k]`."""
  if kernel.shape.rank == 2:
    return tf.einsum("bsn,nk->bsk", inputs, kernel)
  return tf.einsum("bsn,bnk->bsk", inputs, kernel)


def _layer_options(options):
  """An `Adapter`'s options (all but which sub-layers get one), defaults filled in."""
  adapter_lib.validate_options(options or {})
  return {name: value for name, value in {**adapter_lib.ADAPTER_OPTIONS,
                                          **(options or {})}.items()
          if name not in ("mh_adapter", "output_adapter")}


def _placements(task_options, present):
  """Each distinct placement among the tasks with an adapter at one position: its options
  and a `[tasks]` bool constant of the tasks it serves (`None`: all of them)."""
  placements = []
  for options in task_options:
    members = [p and o == options for p, o in zip(present, task_options)]
    if any(members) and all(options != other for other, _ in placements):
      placements.append((options, None if all(members) else tf.constant(members)))
  return placements


def _stack_norm(prefix, task_weights):
  """`[tasks, hidden]` gamma and beta of an adapter's own LayerNorm (identity where absent)."""
  hidden = next(weights[f"{prefix}/gamma"].shape[0]
                for weights in task_weights if f"{prefix}/gamma" in weights)
  gammas = [weights.get(f"{prefix}/gamma", np.ones([hidden], np.float32))
            for weights in task_weights]
  betas = [weights.get(f"{prefix}/beta", np.zeros([hidden], np.float32))
           for weights in task_weights]
  return np.stack(gammas), np.stack(betas)


def _stack_adapters(prefix, task_weights):
  """`[tasks, ...]` arrays of one adapter position, zero-padded; `None` if no task has one."""
  sizes = [weights[f"{prefix}/down_project/bias"].shape[0]
           if f"{prefix}/down_project/bias" in weights else 0 for weights in task_weights]
  size = max(sizes)
  if not size:
    return None
  hidden = next(weights[f"{prefix}/up_project/bias"].shape[0]
                for weights in task_weights if f"{prefix}/up_project/bias" in weights)
  down_kernel = np.zeros([len(task_weights), hidden, size], np.float32)
  down_bias = np.zeros([len(task_weights), size], np.float32)
  up_kernel = np.zeros([len(task_weights), size, hidden], np.float32)
  up_bias = np.zeros([len(task_weights), hidden], np.float32)
  for task, (weights, m) in enumerate(zip(task_weights, sizes)):
    if m:
      down_kernel[task, :, :m] = weights[f"{prefix}/down_project/kernel"]
      down_bias[task, :m] = weights[f"{prefix}/down_project/bias"]
      up_kernel[task, :m] = weights[f"{prefix}/up_project/kernel"]
      up_bias[task] = weights[f"{prefix}/up_project/bias"]
  return down_kernel, down_bias, up_kernel, up_bias

"""LoRA's one definition, for Keras 2 and Keras 3: its weights, how they start, the update and
the merge rule, DoRA's (`use_dora`, `dora.py`) included.

Plain Python over an `ops` namespace with TensorFlow's names and meanings (`matmul`,
`reshape`, `cast`, `shape`): `tf` for the Keras 2 layer, `keras.ops` for the Keras 3 one.
"""

import math

from keras_adapters.methods.lora import dora

# How A and B start: "lora" is peft's and AdapterHub's default (A as PyTorch's `nn.Linear`,
# Kaiming-uniform with a=sqrt(5), i.e. uniform in ±1/sqrt(in); B zero), "gaussian" peft's
# `init_lora_weights="gaussian"` (A normal with std 1/r; B zero), "bert" AdapterHub's
# `init_weights="bert"` (both normal with std 0.02). With B zero the model starts as the base.
INITIALISATIONS = ("lora", "gaussian", "bert")


def scaling(options):
  """The factor `s` on `A · B`: `alpha / r`, or `alpha / sqrt(r)` with rsLoRA."""
  rank, alpha = options["rank"], options["alpha"]
  return alpha / (math.sqrt(rank) if options.get("use_rslora") else rank)


def weights(options, width_in, units):
  """Weight name → `(shape, initializer)`, the initializer as a config that Keras 2 and
  Keras 3 both read (`keras.initializers.get`)."""
  rank, init = options["rank"], options["init_weights"]
  if init not in INITIALISATIONS:
    raise ValueError(f"Unknown LoRA init_weights {init!r}; choose one of "
                     f"{list(INITIALISATIONS)}.")
  bound = 1 / math.sqrt(width_in)
  a_init, b_init = {
      "lora": (_initializer("RandomUniform", minval=-bound, maxval=bound), "zeros"),
      "gaussian": (_initializer("RandomNormal", stddev=1 / rank), "zeros"),
      "bert": (_initializer("RandomNormal", stddev=0.02),
               _initializer("RandomNormal", stddev=0.02)),
  }[init]
  found = {"lora_a": ((width_in, rank), a_init), "lora_b": ((rank, units), b_init)}
  if options.get("use_dora"):
    # Ones until `start_from` reads the base's norms.
    found["magnitude"] = ((units,), "ones")
  return found


def start_from(ops, weights_by_key, options, kernel):
  """Weight name → the value it takes once the frozen projection holds the base's `[in, out]`
  `kernel`: DoRA's magnitudes, the norms it starts from (none for plain LoRA)."""
  if not options.get("use_dora"):
    return {}
  variant = options["dora_variant"]
  # peft starts from the norm of the LoRA-changed kernel, AdapterHub from the base's.
  update = (scaling(options) * ops.matmul(weights_by_key["lora_a"], weights_by_key["lora_b"])
            if variant == "peft" else ops.zeros_like(kernel))
  return {"magnitude": dora.column_norm(ops, kernel, update, variant)}


def apply(ops, weights_by_key, options, inputs, project, dropout):
  """`project(inputs) + s · dropout(x) · A · B` for `inputs` `[..., in]`, or with `use_dora`
  DoRA's output (`dora.py`).

  Args:
    ops: The ops namespace (`tf` or `keras.ops`).
    weights_by_key: The layer's weights by `weights()` name.
    options: The layer's options (`LoRAConfig.layer_options`).
    inputs: The projection's input.
    project: The frozen projection, a function of `inputs`; for DoRA with the frozen
      `kernel` `[in, out]` and `bias` `[out]` as attributes.
    dropout: The layer's dropout as a function of the update's input while it drops
      (training with a rate above zero), else `None`.
  """
  tokens = ops.reshape(inputs, [-1, inputs.shape[-1]])
  if dropout is not None:
    tokens = dropout(tokens)
  output = project(inputs)
  update = low_rank_update(ops, weights_by_key, options, tokens)
  update = ops.reshape(ops.cast(update, output.dtype), ops.shape(output))
  if not options.get("use_dora"):
    return output + update
  variant = options["dora_variant"]
  factor = ops.cast(dora_factor(ops, weights_by_key, options, project.kernel), output.dtype)
  if variant == "peft" and dropout is not None:
    # peft's base share with dropout on: the dropped input through the frozen kernel.
    base = ops.matmul(tokens, ops.cast(project.kernel, tokens.dtype))
    base = ops.reshape(ops.cast(base, output.dtype), ops.shape(output))
    return output + (factor - 1) * base + factor * update
  return dora.combine(output, update, factor, ops.cast(project.bias, output.dtype), variant)


def low_rank_update(ops, weights_by_key, options, tokens):
  """`s · tokens · A · B` for `tokens` `[n, in]`, in their dtype."""
  # One 2-D product per factor, over every token, as the attention's projections are.
  return ops.matmul(ops.matmul(tokens, ops.cast(weights_by_key["lora_a"], tokens.dtype)),
                    ops.cast(weights_by_key["lora_b"] * scaling(options), tokens.dtype))


def dora_factor(ops, weights_by_key, options, kernel):
  """DoRA's `c = m / ‖W + ν · A · B‖` `[out]` for the frozen `kernel` `[in, out]`, in float32
  (`ν`: `dora.norm_update_scale`)."""
  variant = options["dora_variant"]
  update = dora.norm_update_scale(variant, scaling(options)) * ops.matmul(
      weights_by_key["lora_a"], weights_by_key["lora_b"])
  # Under a mixed policy a layer reads its magnitudes in the compute dtype.
  return (ops.cast(weights_by_key["magnitude"], "float32")
          / dora.column_norm(ops, kernel, update, variant))


def merge(ops, weights_by_key, options, kernel, bias):
  """The `[in, out]` kernel and `[out]` bias with the update (and DoRA's factor) folded in."""
  merged = kernel + scaling(options) * ops.matmul(weights_by_key["lora_a"],
                                                  weights_by_key["lora_b"])
  if not options.get("use_dora"):
    return merged, bias
  factor = dora_factor(ops, weights_by_key, options, kernel)
  return factor * merged, factor * bias if dora.rescales_bias(options["dora_variant"]) else bias


def _initializer(class_name, **config):
  return {"class_name": class_name, "config": config}

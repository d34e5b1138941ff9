"""LoRA's one definition, for Keras 2 and Keras 3: its weights, how they start, the update and
the merge rule.

Plain Python over an `ops` namespace with TensorFlow's names and meanings (`matmul`,
`reshape`, `cast`, `shape`): `tf` for the Keras 2 layer, `keras.ops` for the Keras 3 one.
"""

import math

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
  return {"lora_a": ((width_in, rank), a_init), "lora_b": ((rank, units), b_init)}


def apply(ops, weights_by_key, options, inputs, project, dropout):
  """`project(inputs) + s · dropout(x) · A · B` for `inputs` `[..., in]`.

  Args:
    ops: The ops namespace (`tf` or `keras.ops`).
    weights_by_key: The layer's weights by `weights()` name.
    options: The layer's options (`rank`, `alpha`, `use_rslora`).
    inputs: The projection's input.
    project: The frozen projection, a function of `inputs`.
    dropout: A function of the update's input, the layer's dropout.
  """
  tokens = dropout(ops.reshape(inputs, [-1, inputs.shape[-1]]))
  output = project(inputs)
  update = low_rank_update(ops, weights_by_key, options, tokens)
  return output + ops.reshape(ops.cast(update, output.dtype), ops.shape(output))


def low_rank_update(ops, weights_by_key, options, tokens):
  """`s · tokens · A · B` for `tokens` `[n, in]`, in their dtype."""
  # One 2-D product per factor, over every token, as the attention's projections are.
  return ops.matmul(ops.matmul(tokens, ops.cast(weights_by_key["lora_a"], tokens.dtype)),
                    ops.cast(weights_by_key["lora_b"] * scaling(options), tokens.dtype))


def merge(ops, weights_by_key, options, kernel, bias):
  """The `[in, out]` kernel and `[out]` bias with the update folded in."""
  return kernel + scaling(options) * ops.matmul(weights_by_key["lora_a"],
                                                weights_by_key["lora_b"]), bias


def _initializer(class_name, **config):
  return {"class_name": class_name, "config": config}

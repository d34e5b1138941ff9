"""DoRA (Liu et al. 2024): LoRA whose update also learns each output feature's length.

The changed kernel is `W' = m ⊙ (W + s·A·B) / ‖W + s·A·B‖`: the norm is taken per output
feature over the input axis (our kernels are `[in, out]`, so over axis 0; peft's and
AdapterHub's `[out, in]` rows), and `m` `[out]` is trained beside `A` and `B`. peft and
AdapterHub compute it differently, and each `variant` reproduces one exactly:

- `"peft"` (peft's `LoraConfig(use_dora=True)`): `y = c ⊙ (x·W + s·x·A·B) + b` with
  `c = m / ‖W + s·A·B‖`, the norm a constant in the backward pass (the paper's section 4.3).
  With dropout on while training, the base's share uses the dropped input, as peft does:
  `y = x·W + b + (c - 1) ⊙ (drop(x)·W) + c ⊙ s·drop(x)·A·B`. `m` starts as `‖W + s·A·B‖`.
- `"adapterhub"` (AdapterHub's `LoRAConfig(use_dora=True)`): `y = c ⊙ (x·W + b + s·drop(x)·A·B)`
  with `c = m / ‖W + A·B‖`: the bias is rescaled too, the norm leaves out the scale `s`, and
  gradients flow through it. `m` starts as `‖W‖`.

Plain Python over an `ops` namespace with TensorFlow's names (`tf` or `keras.ops`), as
`definition.py`, so the config imports it without loading TensorFlow.
"""

VARIANTS = ("peft", "adapterhub")


def norm_update_scale(variant, scaling):
  """The factor on `A·B` inside the norm: LoRA's `scaling` for peft, 1 for AdapterHub."""
  return scaling if variant == "peft" else 1.0


def rescales_bias(variant):
  """Whether the factor `c` multiplies the bias too (AdapterHub) or not (peft)."""
  return variant == "adapterhub"


def column_norm(ops, kernel, update, variant):
  """`‖W + update‖` per output feature (`kernel` `[..., in, out]`), in float32; a constant
  for the backward pass in peft's variant."""
  norm = ops.norm(ops.cast(kernel, "float32") + ops.cast(update, "float32"), axis=-2)
  return ops.stop_gradient(norm) if variant == "peft" else norm


def combine(output, update, factor, bias, variant):
  """The DoRA output from the projection's `output` (`x·W + b`), LoRA's scaled `update`
  (`s·x·A·B`), the factor `c = m / norm` and the frozen `bias`, when the base's share is
  `output` itself (no dropout on it); all broadcastable to `output`."""
  if rescales_bias(variant):
    return factor * (output + update)
  return factor * (output + update) + (1 - factor) * bias

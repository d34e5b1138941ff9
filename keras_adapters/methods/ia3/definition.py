"""(IA)³'s one definition, for Keras 2 and Keras 3: its weight, how it starts, the scaling and
the merge rule.

Plain Python over an `ops` namespace with TensorFlow's names and meanings (`cast`): `tf` for
the Keras 2 layer, `keras.ops` for the Keras 3 one.
"""


def weights(options, width_in, units):
  """Weight name → `(shape, initializer)`: one scale per channel of the input or the output,
  starting at one (the projection unchanged)."""
  return {"scale": ((width_in if options["scales_input"] else units,), "ones")}


def apply(ops, weights_by_key, options, inputs, project, dropout):
  """`project(inputs ⊙ l)` or `project(inputs) ⊙ l` (no dropout: `dropout` is unused)."""
  del dropout
  scale = weights_by_key["scale"]
  if options["scales_input"]:
    return project(inputs * ops.cast(scale, inputs.dtype))
  output = project(inputs)
  return output * ops.cast(scale, output.dtype)


def merge(ops, weights_by_key, options, kernel, bias):
  """The `[in, out]` kernel and `[out]` bias with the scale folded in."""
  del ops
  scale = weights_by_key["scale"]
  if options["scales_input"]:
    return kernel * scale[:, None], bias
  return kernel * scale, bias * scale

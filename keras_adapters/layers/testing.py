"""Test cases shared by the layer tests: adapter placements (AdapterHub's three presets and
combinations of its options) and mixed-precision policies."""

import numpy as np

# Name → `adapter_options` (AdapterHub's names). The first three are AdapterHub's
# DoubleSeqBnConfig (Houlsby), SeqBnConfig (Pfeiffer) and ParBnConfig (parallel); the others
# together set every remaining option away from its default at least once.
PLACEMENT_VARIANTS = {
    "houlsby": {},
    "pfeiffer": dict(mh_adapter=False, original_ln_before=True),
    "parallel": dict(mh_adapter=False, is_parallel=True, scaling=4.0),
    "own_layer_norms_post_add": dict(original_ln_before=True, residual_before_ln="post_add",
                                     ln_before=True, ln_after=True,
                                     adapter_residual_before_ln=True),
    "parallel_own_layer_norms": dict(is_parallel=True, ln_before=True, ln_after=True,
                                     scaling=0.5),
    "residual_after_ln_alone": dict(output_adapter=False, original_ln_before=True,
                                    residual_before_ln=False, original_ln_after=False,
                                    scaling=2.0),
}

# The mixed-precision policies everything must work under, as `parameterized.named_parameters`
# cases (name, `training.precision` name, machine epsilon of the compute dtype). A test enters
# each with `precision.policy_scope(name)`, which restores the policy it found, and states its
# tolerances against float32 in epsilons: bfloat16 keeps 8 bits of mantissa, float16 11.
MIXED_PRECISIONS = (("bfloat16", "bfloat16", 2.0**-7), ("float16", "float16", 2.0**-10))


def mixed_precision_gap(actual, expected, epsilon):
  """The largest difference of a mixed-precision result from the float32 one, in `epsilon`s
  times the float32 result's largest magnitude (at least 1): the rounding errors of sums of
  products grow with the magnitudes summed, not with each element's."""
  expected = np.asarray(expected, np.float64)
  difference = np.max(np.abs(np.asarray(actual, np.float64) - expected))
  return float(difference / (epsilon * max(1.0, float(np.max(np.abs(expected))))))

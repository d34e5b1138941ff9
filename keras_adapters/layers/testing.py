"""Adapter placements for tests: AdapterHub's three presets and combinations of its options."""

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

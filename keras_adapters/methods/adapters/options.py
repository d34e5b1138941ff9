"""Where a bottleneck adapter joins a Transformer sub-layer: AdapterHub's options, their
defaults and their checks, in plain Python for the config and both stacks' layers."""

# Where an adapter sits and how it joins the residual stream, under AdapterHub's names (its
# `BnConfig`); the defaults are Houlsby's placement, AdapterHub's `DoubleSeqBnConfig`.
# - mh_adapter / output_adapter: an adapter after the attention / feed-forward sub-layer.
# - is_parallel: the adapter reads the sub-layer's input and its output is added to the
#   sub-layer's (He et al. 2022) instead of transforming the sub-layer's output.
# - scaling: factor on the adapter's up-projection.
# - original_ln_before: the base's residual add and LayerNorm come before the adapter too.
# - original_ln_after: the base's residual add and LayerNorm come after the adapter.
# - residual_before_ln: the adapter's own skip connection starts before the base LayerNorm
#   (True), after it (False), or after the base residual add ("post_add").
# - adapter_residual_before_ln: with ln_after, the adapter's skip joins before that LayerNorm.
# - ln_before / ln_after: a LayerNorm of the adapter's own on its input / on its output.
ADAPTER_OPTIONS = dict(
    mh_adapter=True, output_adapter=True, is_parallel=False, scaling=1.0,
    original_ln_before=False, original_ln_after=True, residual_before_ln=True,
    adapter_residual_before_ln=False, ln_before=False, ln_after=False)
# Options of one adapter (the others say which sub-layers get one).
LAYER_OPTIONS = tuple(k for k in ADAPTER_OPTIONS
                      if k not in ("mh_adapter", "output_adapter"))


def validate_options(options):
  """Raises a clear error for unknown options or combinations AdapterHub cannot run either.

  Args:
    options: A dict of some `ADAPTER_OPTIONS` keys.
  """
  unknown = sorted(set(options) - set(ADAPTER_OPTIONS))
  if unknown:
    raise ValueError(f"Unknown adapter options {unknown}; known: {list(ADAPTER_OPTIONS)}.")
  options = {**ADAPTER_OPTIONS, **options}
  for name in ADAPTER_OPTIONS:
    if name not in ("scaling", "residual_before_ln") and not isinstance(options[name], bool):
      raise ValueError(f"Adapter option {name} must be True or False, got {options[name]!r}.")
  if options["residual_before_ln"] not in (True, False, "post_add"):
    raise ValueError("residual_before_ln must be True, False or 'post_add', got "
                     f"{options['residual_before_ln']!r}.")
  if options["residual_before_ln"] == "post_add" and not options["original_ln_before"]:
    raise ValueError("residual_before_ln='post_add' takes the skip after the base's residual "
                     "add, which only original_ln_before=True makes: set both.")
  if options["is_parallel"] and options["original_ln_before"]:
    raise ValueError("original_ln_before=True applies to sequential adapters only; a parallel "
                     "adapter (is_parallel=True) reads the sub-layer's input.")
  scaling = options["scaling"]
  if isinstance(scaling, bool) or not isinstance(scaling, (int, float)):
    raise ValueError(
        f"scaling must be a number, got {scaling!r} (AdapterHub's learned scalings 'learned' "
        "and 'channel' are not supported).")

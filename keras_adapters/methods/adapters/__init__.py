"""Bottleneck adapters (Houlsby et al. 2019; Pfeiffer's and the parallel placement by their
options): their config, registered as the method "adapters".

Their layers are `keras_adapters.layers.adapter.Adapter` (Keras 2) and
`keras_adapters.keras3.layers` (Keras 3), both computing with `layers/bottleneck.py`; a block
places them after its sub-layers by the config's `bottleneck_size` and `adapter_options`, so
the method has no projection layer. Their settings keep the flags and the `model.adapter`
section they had before the registry: unprefixed (`--adapter_size`, `--leave_out`), and
`tuning` (the paper's baselines: `layer_norm`, `top_k`, `full`) among them.
"""

from keras_adapters.methods import registry
from keras_adapters.methods.adapters.config import AdapterConfig

registry.register(
    AdapterConfig,
    # Past the paper's range: at the short CPU budgets it scores 81.90 on airline's validation
    # split against 79.30 at 1e-3 (Figure 7's study, `--study=learning_rate`).
    learning_rate=3e-3,
    comparison_settings=dict(tuning="adapters", adapter_size=64),
    section="adapter", flag_prefix="", size=("adapter_size", "m"),
    artifact_keys=(r"transformer/layer_\d+/(attention_adapter|feedforward_adapter)/",))

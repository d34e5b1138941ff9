"""`AdapterConfig`: the bottleneck adapters' settings (Houlsby's, Pfeiffer's, parallel), as
peft's and AdapterHub's config objects."""

import dataclasses
import math
import numbers
from typing import Optional, Tuple, Union

from keras_adapters.methods import method_config
from keras_adapters.methods.adapters import options as options_lib
from keras_adapters.methods.adapters import tuning as tuning_lib
from keras_adapters.utils import settings

_OPTIONS = options_lib.ADAPTER_OPTIONS
# AdapterHub's activation names (`non_linearity`) that Keras spells otherwise.
_ACTIVATION_ALIASES = {"silu": "swish"}


@dataclasses.dataclass(frozen=True)
class AdapterConfig:
  """What one adapter set is: its bottleneck, where it sits and what trains with it.

  Passed to `AdaptedBert(handle, adapter_config=...)` and `AdaptedBert.add_adapter(name,
  config)`, and stored in every adapter artifact, so a saved task says how to rebuild it.

  Example:
  >>> config = AdapterConfig(adapter_size=16, leave_out=(0, 1))
  >>> AdapterConfig.from_dict(config.to_dict()) == config
  True

  The placement and residual options carry AdapterHub's names (its `BnConfig`), so its
  configs map one to one: the defaults are Houlsby's placement (AdapterHub's
  `DoubleSeqBnConfig`, with the paper's ReLU and m=64); `AdapterConfig(mh_adapter=False,
  original_ln_before=True, reduction_factor=16)` is Pfeiffer's (`SeqBnConfig`);
  `AdapterConfig(mh_adapter=False, is_parallel=True, scaling=4.0, reduction_factor=2)` is
  He et al.'s parallel adapter (`ParBnConfig`).

  Each field's help text (its `settings.setting`) says what it does; the command-line flags
  and the run records take it from there.
  """
  # The registry's name of the bottleneck adapters: `--method=adapters`. Their dicts carry
  # no "method" key, as artifacts always stored them.
  method = "adapters"
  # The fields `keras_adapters.keras3.adapt` takes (sequential adapters, with the base's
  # residual add and LayerNorm after them, and before them too with `original_ln_before`);
  # any other must keep its default there.
  keras3_fields = ("adapter_size", "activation", "init_stddev", "leave_out", "reduction_factor",
                   "mh_adapter", "output_adapter", "scaling", "original_ln_before",
                   "residual_before_ln", "adapter_residual_before_ln", "ln_before", "ln_after",
                   "freeze_below_adapters", "is_parallel")
  adapter_size: Optional[int] = settings.setting(
      64, "Bottleneck size m of every adapter (the paper: 2 to 256); unused when "
      "reduction_factor is set. None: no adapters (the layer_norm, top_k and full baselines).")
  activation: str = settings.setting(
      "relu", "Nonlinearity inside the adapters, any Keras activation name (ReLU in the paper; "
      "AdapterHub offers relu, swish (= silu), gelu and tanh).", flag="adapter_activation")
  init_stddev: float = settings.setting(
      1e-2, "Standard deviation of the adapters' truncated-normal initial projections; 0 makes "
      "every adapter an exact identity.", flag="adapter_init_stddev")
  leave_out: Tuple[int, ...] = settings.setting(
      (), "Indices of the Transformer layers that get no adapters (AdapterHub's leave_out); "
      "their LayerNorms still train, unless freeze_below_adapters.")
  freeze_below_adapters: bool = settings.setting(
      False, "AdapterDrop's training (Rücklé et al. 2021): the LayerNorms of the layers below "
      "the lowest adapted one, and the embeddings', stay frozen, so nothing below the lowest "
      "adapters trains and the backward pass stops there. Needs tuning=adapters and layer 0 in "
      "leave_out.")
  tuning: str = settings.setting(
      "adapters", "What trains: adapters (+ LayerNorms, the paper), layer_norm, top_k or full.",
      choices=tuning_lib.TUNING_POLICIES)
  top_k: Optional[int] = settings.setting(None, "Number of top layers that train with "
                                          "tuning=top_k.")
  reduction_factor: Optional[float] = settings.setting(
      None, "AdapterHub's way to size the bottleneck: m = hidden_size // reduction_factor, in "
      "place of adapter_size.")
  mh_adapter: bool = settings.setting(_OPTIONS["mh_adapter"],
                                      "An adapter after the attention sub-layer.")
  output_adapter: bool = settings.setting(_OPTIONS["output_adapter"],
                                          "An adapter after the feed-forward sub-layer.")
  is_parallel: bool = settings.setting(
      _OPTIONS["is_parallel"], "Parallel adapters (He et al. 2022): each reads its sub-layer's "
      "input and adds to its output.")
  scaling: float = settings.setting(_OPTIONS["scaling"], "Factor on each adapter's output.")
  original_ln_before: bool = settings.setting(
      _OPTIONS["original_ln_before"],
      "The base's residual add and LayerNorm also come before the adapter.")
  original_ln_after: bool = settings.setting(
      _OPTIONS["original_ln_after"], "The base's residual add and LayerNorm come after the "
      "adapter.")
  residual_before_ln: Union[bool, str] = settings.setting(
      _OPTIONS["residual_before_ln"], "Where the adapter's skip starts: before the base "
      "LayerNorm (true), after it (false), or after the base's residual add (post_add).")
  adapter_residual_before_ln: bool = settings.setting(
      _OPTIONS["adapter_residual_before_ln"],
      "With ln_after, the adapter's skip joins before that LayerNorm.")
  ln_before: bool = settings.setting(_OPTIONS["ln_before"],
                                     "A LayerNorm of the adapter's own on its input.")
  ln_after: bool = settings.setting(_OPTIONS["ln_after"],
                                    "A LayerNorm of the adapter's own on its output.")

  def __post_init__(self):
    method_config.use_python_numbers(self)
    size = self.adapter_size
    # bool is an int subclass: True must not pass as a size of 1.
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
      raise ValueError(
          f"adapter_size must be a positive integer (the paper uses 2 to 256), or None for "
          f"no adapters; got {size!r}.")
    rate = self.reduction_factor
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                             or rate <= 0):
      raise ValueError(f"reduction_factor must be a number > 0 (AdapterHub uses 16 or 2), "
                       f"got {rate!r}.")
    if rate is not None and size is None:
      raise ValueError("reduction_factor sizes adapters, but adapter_size=None asks for none: "
                       "leave adapter_size at its default.")
    options_lib.validate_options(self.adapter_options())
    object.__setattr__(self, "activation",
                       _ACTIVATION_ALIASES.get(self.activation, self.activation))
    if (isinstance(self.init_stddev, bool) or not isinstance(self.init_stddev, numbers.Real)
        or not math.isfinite(self.init_stddev) or self.init_stddev < 0):
      raise ValueError(
          f"init_stddev must be a finite number >= 0 (0: identity adapters), got "
          f"{self.init_stddev!r}.")
    if isinstance(self.leave_out, (str, bytes)) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.leave_out):
      raise ValueError(
          f"leave_out must list layer indices (integers >= 0), got {self.leave_out!r}.")
    # A canonical form, so equal configs compare (and serialise) equal.
    object.__setattr__(self, "leave_out", tuple(sorted(set(self.leave_out))))
    if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(
        self.top_k, int) or self.top_k < 1):
      raise ValueError(f"top_k must be a whole number of at least 1, got {self.top_k!r}.")
    if self.tuning not in tuning_lib.TUNING_POLICIES:
      raise ValueError(
          f"Unknown tuning policy {self.tuning!r}; choose one of "
          f"{list(tuning_lib.TUNING_POLICIES)}.")
    self._check_freeze_below_adapters()

  def _check_freeze_below_adapters(self):
    if not isinstance(self.freeze_below_adapters, bool):
      raise ValueError(f"freeze_below_adapters must be True or False, got "
                       f"{self.freeze_below_adapters!r}.")
    if not self.freeze_below_adapters:
      return
    if self.tuning != "adapters":
      raise ValueError(
          f"freeze_below_adapters=True freezes what lies below the lowest adapters, but "
          f"tuning={self.tuning!r} trains no adapters: use it with tuning='adapters'.")
    if 0 not in self.leave_out:
      raise ValueError(
          f"freeze_below_adapters=True freezes the layers below the lowest adapted one, but "
          f"layer 0 has adapters (leave_out={list(self.leave_out)}): leave the lowest layers "
          f"out, e.g. leave_out=(0, 1).")

  @property
  def trains_base(self):
    """Whether training this set changes the shared base (`top_k`, `full`)."""
    return self.tuning not in tuning_lib.BASE_FROZEN_POLICIES

  @property
  def train_layer_norms(self):
    """Whether the LayerNorms train under this tuning (the paper's adapters: they do)."""
    return True

  @property
  def lowest_adapted_layer(self):
    """The index of the lowest Transformer layer with adapters: the lowest not left out."""
    return next(index for index in range(len(self.leave_out) + 1)
                if index not in self.leave_out)

  @property
  def layer_norms_frozen_below(self):
    """The Transformer layer below which every LayerNorm stays frozen, the embeddings' counted
    below layer 0: the lowest adapted layer with `freeze_below_adapters` (AdapterDrop), else
    0 (none frozen). Both stacks freeze by it (`models.tuning`, `keras3.adapt`)."""
    return self.lowest_adapted_layer if self.freeze_below_adapters else 0

  def delta_specs(self):
    """No changes to the projections (LoRA, (IA)³ have their own configs)."""
    return []

  def adapter_options(self):
    """The placement and residual options, as the layers take them (`adapter_options=`)."""
    return {name: getattr(self, name) for name in _OPTIONS}

  def bottleneck_size(self, hidden_size):
    """The adapters' `m` in an encoder of width `hidden_size` (`None`: no adapters)."""
    if self.reduction_factor is not None:
      return max(1, int(hidden_size // self.reduction_factor))
    return self.adapter_size

  def validate_for(self, num_layers):
    """Raises a clear error when this config cannot apply to a `num_layers`-layer encoder."""
    tuning_lib.validate_tuning(self.tuning, self.top_k, num_layers,
                               self.adapter_size is not None)
    outside = [i for i in self.leave_out if i >= num_layers]
    if outside:
      raise ValueError(
          f"leave_out={list(self.leave_out)} names layers {outside} that the encoder does not "
          f"have: it has layers 0..{num_layers - 1}.")
    if self.layer_norms_frozen_below >= num_layers:
      raise ValueError(
          f"freeze_below_adapters=True with leave_out={list(self.leave_out)} freezes the whole "
          f"encoder, which has layers 0..{num_layers - 1} only: leave some layer's adapters "
          f"in, or set freeze_below_adapters=False.")

  def to_dict(self):
    """A JSON-serialisable dict that `from_dict` turns back into this config."""
    values = dataclasses.asdict(self)
    values["leave_out"] = list(self.leave_out)
    return values

  @classmethod
  def from_dict(cls, values):
    """The config of a `to_dict()` dict; unknown keys are an error naming them."""
    values = {k: v for k, v in values.items() if (k, v) != ("method", cls.method)}
    unknown = sorted(set(values) - {field.name for field in dataclasses.fields(cls)})
    if unknown:
      raise ValueError(
          f"Unknown AdapterConfig fields {unknown}; it has "
          f"{[field.name for field in dataclasses.fields(cls)]}.")
    values = dict(values)
    if "leave_out" in values:
      values["leave_out"] = tuple(values["leave_out"])
    return cls(**values)

"""`AdapterConfig`: one task's adapter settings, as peft's and AdapterHub's config objects."""

import dataclasses
from typing import Optional, Tuple

from keras_adapters.models import tuning as tuning_lib


@dataclasses.dataclass(frozen=True)
class AdapterConfig:
  """What one adapter set is: its bottleneck, where it sits and what trains with it.

  Passed to `AdaptedBert(handle, adapter_config=...)` and `AdaptedBert.add_adapter(name,
  config)`, and stored in every adapter artifact, so a saved task says how to rebuild it.

  Example:
  >>> config = AdapterConfig(adapter_size=16, leave_out=(0, 1))
  >>> AdapterConfig.from_dict(config.to_dict()) == config
  True

  Attributes:
    adapter_size: Bottleneck `m` of every adapter, or `None` for no adapters (the
      `layer_norm`, `top_k` and `full` baselines).
    activation: Nonlinearity inside the adapters, any Keras activation name (ReLU in the
      paper).
    init_stddev: Standard deviation of the adapters' truncated-normal initial projections;
      `0` makes every adapter an exact identity.
    leave_out: Indices of the Transformer layers that get no adapters (AdapterHub's
      `leave_out`); their LayerNorms still belong to the set.
    tuning: What trains: `"adapters"` (adapters + LayerNorms, the paper), `"layer_norm"`,
      `"top_k"` or `"full"`; see `keras_adapters.models.tuning`.
    top_k: Number of top layers that train with `tuning="top_k"`.
  """
  adapter_size: Optional[int] = 64
  activation: str = "relu"
  init_stddev: float = 1e-2
  leave_out: Tuple[int, ...] = ()
  tuning: str = "adapters"
  top_k: Optional[int] = None

  def __post_init__(self):
    size = self.adapter_size
    # bool is an int subclass: True must not pass as a size of 1.
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
      raise ValueError(
          f"adapter_size must be a positive integer (the paper uses 2 to 256), or None for "
          f"no adapters; got {size!r}.")
    if not isinstance(self.init_stddev, (int, float)) or self.init_stddev < 0:
      raise ValueError(f"init_stddev must be a number >= 0, got {self.init_stddev!r}.")
    if isinstance(self.leave_out, (str, bytes)) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.leave_out):
      raise ValueError(
          f"leave_out must list layer indices (integers >= 0), got {self.leave_out!r}.")
    # A canonical form, so equal configs compare (and serialise) equal.
    object.__setattr__(self, "leave_out", tuple(sorted(set(self.leave_out))))
    if self.tuning not in tuning_lib.TUNING_POLICIES:
      raise ValueError(
          f"Unknown tuning policy {self.tuning!r}; choose one of "
          f"{list(tuning_lib.TUNING_POLICIES)}.")

  @property
  def trains_base(self):
    """Whether training this set changes the shared base (`top_k`, `full`)."""
    return self.tuning not in tuning_lib.BASE_FROZEN_POLICIES

  def validate_for(self, num_layers):
    """Raises a clear error when this config cannot apply to a `num_layers`-layer encoder."""
    tuning_lib.validate_tuning(self.tuning, self.top_k, num_layers,
                               self.adapter_size is not None)
    outside = [i for i in self.leave_out if i >= num_layers]
    if outside:
      raise ValueError(
          f"leave_out={list(self.leave_out)} names layers {outside} that the encoder does not "
          f"have: it has layers 0..{num_layers - 1}.")

  def to_dict(self):
    """A JSON-serialisable dict that `from_dict` turns back into this config."""
    values = dataclasses.asdict(self)
    values["leave_out"] = list(self.leave_out)
    return values

  @classmethod
  def from_dict(cls, values):
    """The config of a `to_dict()` dict; unknown keys are an error naming them."""
    unknown = sorted(set(values) - {field.name for field in dataclasses.fields(cls)})
    if unknown:
      raise ValueError(
          f"Unknown AdapterConfig fields {unknown}; it has "
          f"{[field.name for field in dataclasses.fields(cls)]}.")
    values = dict(values)
    if "leave_out" in values:
      values["leave_out"] = tuple(values["leave_out"])
    return cls(**values)

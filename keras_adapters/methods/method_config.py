"""What the configs of the projection methods share: validation, serialisation, the spec
the encoder builds their layers from."""

import dataclasses
import math
import numbers

import numpy as np

from keras_adapters.methods import projections


class MethodConfig:
  """Mixin of a method's frozen dataclass config (`LoRAConfig`, `IA3Config`).

  A subclass declares `method` (its registry name), the fields `target_modules`, `leave_out`
  and `train_layer_norms` among its settings, and `layer_options(target)`: the keyword
  arguments of its layer at one projection. The base stays frozen: the method's layers, the
  head and (with `train_layer_norms`) the LayerNorms train.
  """

  method = None
  # The tuning policy a set of this method follows: its own modules train, the base is frozen.
  tuning = "adapters"
  top_k = None
  trains_base = False
  # Every LayerNorm that trains does (AdapterDrop's frozen bottom is `AdapterConfig`'s).
  layer_norms_frozen_below = 0

  def _check_common(self):
    """Checks and canonicalises `target_modules` and `leave_out`; call from `__post_init__`."""
    targets = self.target_modules
    if isinstance(targets, str):
      targets = (targets,)
    unknown = [t for t in targets if t not in projections.TARGETS]
    if unknown or not targets:
      raise ValueError(
          f"target_modules must name some of {list(projections.TARGETS)}, got "
          f"{list(targets)!r}.")
    object.__setattr__(self, "target_modules", tuple(
        t for t in projections.TARGETS if t in targets))
    if isinstance(self.leave_out, (str, bytes)) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.leave_out):
      raise ValueError(
          f"leave_out must list layer indices (integers >= 0), got {self.leave_out!r}.")
    object.__setattr__(self, "leave_out", tuple(sorted(set(self.leave_out))))
    if not isinstance(self.train_layer_norms, bool):
      raise ValueError(f"train_layer_norms must be True or False, got "
                       f"{self.train_layer_norms!r}.")

  def bottleneck_size(self, hidden_size):  # pylint: disable=unused-argument
    """No bottleneck adapters: `None`, as `AdapterConfig.bottleneck_size` says for none."""
    return None

  def adapter_options(self):
    """No bottleneck adapters, so no placement options."""
    return {}

  def delta_specs(self):
    """What the encoder builds: `[{"method", "leave_out", "targets": {target: options}}]`."""
    return [dict(method=self.method, leave_out=list(self.leave_out),
                 targets={t: self.layer_options(t) for t in self.target_modules})]

  def layer_options(self, target):
    raise NotImplementedError

  def validate_for(self, num_layers):
    """Raises a clear error when this config cannot apply to a `num_layers`-layer encoder."""
    outside = [i for i in self.leave_out if i >= num_layers]
    if outside:
      raise ValueError(
          f"leave_out={list(self.leave_out)} names layers {outside} that the encoder does not "
          f"have: it has layers 0..{num_layers - 1}.")
    if len(self.leave_out) >= num_layers:
      raise ValueError(
          f"leave_out={list(self.leave_out)} leaves out every layer of the encoder, so "
          f"{type(self).__name__} would change nothing: leave some of layers "
          f"0..{num_layers - 1} in.")

  def to_dict(self):
    """A JSON-serialisable dict, with the method's name, that `from_dict` reads back."""
    values = {name: list(value) if isinstance(value, tuple) else value
              for name, value in dataclasses.asdict(self).items()}
    return dict(values, method=self.method)

  @classmethod
  def from_dict(cls, values):
    """The config of a `to_dict()` dict; unknown keys are an error naming them."""
    values = {k: v for k, v in values.items() if k != "method"}
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
      raise ValueError(f"Unknown {cls.__name__} fields {unknown}; it has {list(fields)}.")
    return cls(**{name: tuple(value) if isinstance(value, list) else value
                  for name, value in values.items()})


def use_python_numbers(config):
  """Replaces the NumPy scalars among the fields of `config` (a frozen dataclass), and in its
  tuples and lists, by the Python numbers they hold: `LoRAConfig(r=np.int64(8))`, with a
  value taken from an array or a sweep, is `LoRAConfig(r=8)`, checked, compared and written
  to JSON alike. Call first in `__post_init__`."""
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if isinstance(value, (tuple, list)):
      value = type(value)(_python_number(item) for item in value)
    object.__setattr__(config, field.name, _python_number(value))


def _python_number(value):
  if isinstance(value, (np.bool_, np.integer, np.floating)):
    return value.item()
  return value


def check_number(name, value, *, positive=False, below=None):
  """Raises a `ValueError` naming `name` unless `value` is a finite real number in range."""
  if (isinstance(value, bool) or not isinstance(value, numbers.Real)
      or not math.isfinite(value)
      or (positive and value <= 0) or (not positive and value < 0)
      or (below is not None and value >= below)):
    bound = "> 0" if positive else ">= 0"
    raise ValueError(f"{name} must be a finite number {bound}"
                     + (f" and below {below}" if below is not None else "")
                     + f", got {value!r}.")

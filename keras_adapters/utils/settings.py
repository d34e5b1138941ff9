"""One definition per setting: its default, help text and flag name, on the config field.

A config dataclass declares each field with `setting(...)`; the command-line flags, their
help, the keys of a run's record and the checks are all read from there
(`keras_adapters.core.config_definitions`), so a setting is written down once:

  learning_rate: float = settings.setting(3e-4, "Peak learning rate.")
"""

import dataclasses
import math
import numbers
from typing import Any, Optional, Sequence

from keras_adapters.utils import errors

HELP = "help"
CHOICES = "choices"
FLAG = "flag"
# A setting that says how a run executes, not what it learns (the strategy, the checkpoint
# interval): a run may resume under another value, so it is not part of the run's record.
EXECUTION = "execution"


def setting(default: Any, help: str, *, choices: Optional[Sequence[str]] = None,  # pylint: disable=redefined-builtin
            flag: Optional[str] = None, execution: bool = False) -> Any:
  """A dataclass field that carries its own documentation.

  Args:
    default: The default value.
    help: The help text, as the command line shows it.
    choices: The allowed values of a string setting (a flag of those choices).
    flag: The flag and record name, when the field's own name is too generic for a flat
      namespace of flags (`activation` → `adapter_activation`).
    execution: Whether the setting only says how a run executes (see `EXECUTION`).
  """
  metadata = {HELP: help, FLAG: flag, EXECUTION: execution,
              CHOICES: None if choices is None else tuple(choices)}
  if isinstance(default, (list, dict, set)):
    raise TypeError("A setting's default must be immutable; use a tuple.")
  return dataclasses.field(default=default, metadata=metadata)


def flag_name(field: dataclasses.Field) -> str:
  return field.metadata.get(FLAG) or field.name


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
  if value not in choices:
    raise errors.UsageError(f"{name}={value!r}: choose one of {', '.join(choices)}.")


def check_number(name: str, value: Any, *, above: Optional[float] = None,
                 at_least: Optional[float] = None, below: Optional[float] = None) -> None:
  """Raises unless `value` is a finite real number within the bounds given."""
  if above == 0 and at_least is None and below is None:
    expected = "must be positive and finite"
  else:
    bounds = [f"above {above:g}" if above is not None else None,
              f"at least {at_least:g}" if at_least is not None else None,
              f"below {below:g}" if below is not None else None]
    expected = f"must be a finite number {' and '.join(b for b in bounds if b)}"
  if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
      or (above is not None and value <= above) or (at_least is not None and value < at_least)
      or (below is not None and value >= below)):
    raise errors.UsageError(f"{name}={value!r}: {expected}.")


def check_integer(name: str, value: Any, minimum: int) -> None:
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
    raise errors.UsageError(f"{name}={value!r}: must be a whole number of at least {minimum}.")

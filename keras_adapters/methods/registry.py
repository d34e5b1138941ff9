"""The methods by name: each one's config class and layer class."""

from typing import NamedTuple


class Method(NamedTuple):
  """A registered method: its `name`, its config dataclass and its `ProjectionDelta` layer."""
  name: str
  config_class: type
  layer_class: type


_METHODS = {}


def register(name, config_class, layer_class):
  """Registers a method under `name` (its config's `method` and its flags' prefix)."""
  if name in _METHODS:
    raise ValueError(f"A method named {name!r} is registered already.")
  _METHODS[name] = Method(name, config_class, layer_class)


def get(name):
  """The `Method` registered as `name`, or an error listing the known ones."""
  if name not in _METHODS:
    raise ValueError(f"Unknown method {name!r}; known: {sorted(_METHODS)}.")
  return _METHODS[name]


def names():
  """The registered method names, in order of registration."""
  return tuple(_METHODS)


def config_classes():
  """The registered config classes, in order of registration."""
  return tuple(method.config_class for method in _METHODS.values())

"""The methods by name: each one's config class, layer class and definition.

A method registers without loading its Keras 2 layer (`layer` is the class's dotted path,
imported on first use), so its config serves Keras 3 without tf_keras in the process.
"""

import importlib
import types
from typing import NamedTuple, Optional, Union


class Method(NamedTuple):
  """A registered method: its `name`, its config dataclass, its `ProjectionDelta` layer (or
  that class's dotted path) and its `definition`, the module both stacks compute it with
  (`weights`, `apply`, `merge`; `None`: Keras 2 only)."""
  name: str
  config_class: type
  layer: Union[type, str]
  definition: Optional[types.ModuleType] = None

  @property
  def layer_class(self):
    """The Keras 2 layer class, imported on first use."""
    if not isinstance(self.layer, str):
      return self.layer
    module, _, name = self.layer.rpartition(".")
    return getattr(importlib.import_module(module), name)


_METHODS = {}


def register(name, config_class, layer, definition=None):
  """Registers a method under `name` (its config's `method` and its flags' prefix)."""
  if name in _METHODS:
    raise ValueError(f"A method named {name!r} is registered already.")
  _METHODS[name] = Method(name, config_class, layer, definition)


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

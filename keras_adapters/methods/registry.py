"""The methods by name: each one's config class, layer, definition and what the rest of the
library derives from them.

A method is registered once, from its folder (`methods/<name>/__init__.py`), by its config
class: the config's `method` attribute is its name, and everything outside the folder finds
the method here. Its config's fields are its settings: the experiment config tree has a
section of the method's (`section`), each field a flag `<name>_<field>` (`flag_name`); its
layers' tensors in an adapter artifact match its `artifact_keys`; a comparison trains it at
its `learning_rate`.

A method registers without loading its Keras 2 layer (`layer` is the class's dotted path,
imported on first use), so its config serves Keras 3 without tf_keras in the process.
"""

import dataclasses
import importlib
import re
import types
from typing import Mapping, NamedTuple, Optional, Tuple, Union

from keras_adapters.methods import projections
from keras_adapters.utils import settings


class Method(NamedTuple):
  """A registered method.

  Attributes:
    config_class: Its config dataclass, whose `method` attribute is the method's name.
    layer: Its `ProjectionDelta` layer (or that class's dotted path), built by the block at
      each projection its config's `delta_specs()` names; `None` for a method the block
      places otherwise (the bottleneck adapters: `bottleneck_size()`, `adapter_options()`).
    definition: The module both stacks compute it with (`weights`, `apply`, `merge`, and
      `start_from` for a method whose start reads the base's kernel), or `None`.
    learning_rate: The peak learning rate a method comparison trains it at.
    comparison_settings: Other settings a comparison pins for it, by flag name.
    section: Its section of the experiment config tree (`model.<section>`).
    flag_prefix: What its settings' flags start with, before the field's name.
    artifact_keys: Regular expressions that match the start of its tensors' names in an
      artifact (`transformer/layer_3/query/lora/lora_a`).
    size: The config field that sizes its trained parameters and the letter that tags a
      point of it in tables and figures (LoRA's rank: `("r", "r")`), or `None`.
  """
  config_class: type
  layer: Union[type, str, None]
  definition: Optional[types.ModuleType]
  learning_rate: float
  comparison_settings: Mapping[str, object]
  section: str
  flag_prefix: str
  artifact_keys: Tuple[str, ...]
  size: Optional[Tuple[str, str]]

  @property
  def name(self):
    return self.config_class.method

  @property
  def layer_class(self):
    """The Keras 2 layer class, imported on first use."""
    if not isinstance(self.layer, str):
      return self.layer
    module, _, name = self.layer.rpartition(".")
    return getattr(importlib.import_module(module), name)

  def flag_name(self, field):
    """The flag (and record key) of one of its config's fields: the one the field names
    (`flag=`), else `<flag_prefix><field>`."""
    return field.metadata.get(settings.FLAG) or self.flag_prefix + field.name

  @property
  def size_tag(self):
    """`(setting, letter)` of its `size` (`("lora_r", "r")`), or `None`."""
    if self.size is None:
      return None
    field_name, letter = self.size
    fields = {field.name: field for field in dataclasses.fields(self.config_class)}
    return self.flag_name(fields[field_name]), letter


_METHODS = {}


def register(config_class, *, learning_rate, layer=None, definition=None,
             comparison_settings=None, section=None, flag_prefix=None, artifact_keys=None,
             size=None):
  """Registers the method of `config_class` under its `method` name.

  Args:
    config_class: A frozen dataclass with a `method` class attribute (the name, a Python
      identifier), `to_dict`/`from_dict`, `validate_for(num_layers)`, `delta_specs()`,
      `bottleneck_size(hidden_size)` and `adapter_options()` (`MethodConfig` gives all but
      the name and the fields).
    learning_rate: The rate a method comparison trains it at.
    layer: See `Method.layer`.
    definition: See `Method.definition`.
    comparison_settings: See `Method.comparison_settings`.
    section: Its config tree section; default: its name.
    flag_prefix: Default: `<name>_`.
    artifact_keys: Default: its layers at a block's projections
      (`transformer/layer_<i>/<projection>/<name>/`) and at the pooler's.
    size: See `Method.size`.

  Returns:
    The `Method`.
  """
  name = getattr(config_class, "method", None)
  if not isinstance(name, str) or not name.isidentifier():
    raise ValueError(f"{config_class.__name__}.method must name the method (a Python "
                     f"identifier), got {name!r}.")
  if not dataclasses.is_dataclass(config_class):
    raise ValueError(f"{config_class.__name__} must be a dataclass: its fields are the "
                     "method's settings.")
  if name in _METHODS:
    raise ValueError(f"A method named {name!r} is registered already.")
  section = section or name
  taken = [m.name for m in _METHODS.values() if m.section == section]
  if taken:
    raise ValueError(f"The config section {section!r} is method {taken[0]!r}'s already.")
  if artifact_keys is None:
    artifact_keys = (
        rf"transformer/layer_\d+/({'|'.join(projections.PROJECTIONS)})/{re.escape(name)}/",
        rf"pooler_transform/{re.escape(name)}/")
  method = Method(config_class, layer, definition, learning_rate,
                  types.MappingProxyType(dict(comparison_settings or {})), section,
                  f"{name}_" if flag_prefix is None else flag_prefix, tuple(artifact_keys),
                  None if size is None else tuple(size))
  _METHODS[name] = method
  return method


def get(name):
  """The `Method` registered as `name`, or an error listing the known ones."""
  if name not in _METHODS:
    raise ValueError(f"Unknown method {name!r}; known: {sorted(_METHODS)}.")
  return _METHODS[name]


def methods():
  """The registered `Method`s, in order of registration."""
  return tuple(_METHODS.values())


def names():
  """The registered method names, in order of registration."""
  return tuple(_METHODS)


def config_classes():
  """The registered config classes, in order of registration."""
  return tuple(method.config_class for method in _METHODS.values())


def of_config(config_class):
  """The `Method` whose config class is `config_class`, or `None`."""
  for method in _METHODS.values():
    if method.config_class is config_class:
      return method
  return None

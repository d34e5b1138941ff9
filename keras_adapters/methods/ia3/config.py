"""`IA3Config`: which projections (IA)³ rescales, as peft's `IA3Config`."""

import dataclasses
from typing import Tuple

from keras_adapters.methods import method_config
from keras_adapters.utils import settings


@dataclasses.dataclass(frozen=True)
class IA3Config(method_config.MethodConfig):
  """(IA)³ (Liu et al. 2022): learned per-channel scales, initialised to one.

  The defaults are the paper's and peft's for BERT: the keys and values are scaled, and so is
  the feed-forward intermediate activation, as the scaled input of the feed-forward `output`
  projection (peft's `target_modules=["key", "value", "output.dense"]` with
  `feedforward_modules=["output.dense"]`). AdapterHub's `IA3Config` scales the output of
  `intermediate` (before the activation) instead: `IA3Config(target_modules=("key",
  "value", "intermediate"), feedforward_modules=())`.

  Example:
  >>> config = IA3Config()
  >>> config.target_modules, config.feedforward_modules
  (('key', 'value', 'output'), ('output',))
  """
  method = "ia3"
  # The fields `keras_adapters.keras3.adapt` takes; any other must keep its default there.
  keras3_fields = ("target_modules", "feedforward_modules", "leave_out", "train_layer_norms")

  target_modules: Tuple[str, ...] = settings.setting(
      ("key", "value", "output"), "Projections of each block that (IA)^3 rescales: query, "
      "key, value, attention_output, intermediate, output, and pooler (BERT's pooler "
      "projection).")
  feedforward_modules: Tuple[str, ...] = settings.setting(
      ("output",), "Of --ia3_target_modules, those whose input is scaled rather than their "
      "output (peft's feedforward_modules; output: the intermediate activation, as in the "
      "paper).")
  leave_out: Tuple[int, ...] = settings.setting(
      (), "Indices of the Transformer layers that get no (IA)^3 scales.")
  train_layer_norms: bool = settings.setting(
      False, "Train the base's LayerNorms with (IA)^3 (peft and AdapterHub keep them frozen).")

  def __post_init__(self):
    method_config.use_python_numbers(self)
    self._check_common()
    feedforward = ((self.feedforward_modules,) if isinstance(self.feedforward_modules, str)
                   else tuple(self.feedforward_modules))
    stray = [m for m in feedforward if m not in self.target_modules]
    if stray:
      raise ValueError(f"feedforward_modules {stray} are not among target_modules "
                       f"{list(self.target_modules)}: a scaled input needs the projection.")
    object.__setattr__(self, "feedforward_modules", tuple(
        t for t in self.target_modules if t in feedforward))

  def layer_options(self, target):
    return dict(scales_input=target in self.feedforward_modules)

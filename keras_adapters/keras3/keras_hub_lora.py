"""keras-hub's own LoRA files (`backbone.save_lora_weights`, `.lora.h5`), read and written by
layer name with shape checks.

keras-hub identifies a LoRA layer by its position in the backbone's flattened list of
layers with weights (`lora/<position>/vars/lora_kernel_a`), so a file of another
architecture can load into the wrong layers (keras-hub issue 2701). `save_keras_hub_lora`
writes keras-hub's file with each layer's path recorded beside its position (keras-hub still
reads it); `load_keras_hub_lora` places each tensor by that path, or, in a file keras-hub
wrote, checks that every position holds a layer keras-hub's `enable_lora` targets, of the
file's shapes, before it changes anything.
"""

import os

import h5py

from keras_adapters.utils import errors

_PATH_ATTRIBUTE = "layer_path"


def save_keras_hub_lora(backbone, path):
  """Writes the LoRA weights of a backbone with keras-hub's LoRA (`enable_lora`) to `path`
  (`.lora.h5`): keras-hub's own file, each layer's path recorded.

  Returns:
    `path`.
  """
  path = os.fspath(path)
  if not path.endswith(".lora.h5"):
    raise errors.UsageError(f"{path!r}: keras-hub's LoRA files end in .lora.h5; name it so.")
  positions = getattr(backbone, "_lora_enabled_layers", None)
  if not positions:
    raise errors.UsageError(
        f"The {type(backbone).__name__} has no keras-hub LoRA layers: call "
        "backbone.enable_lora(rank) and train before saving them.")
  partial = path[:-len(".lora.h5")] + ".partial.lora.h5"
  backbone.save_lora_weights(partial)
  layers = _layers_with_weights(backbone)
  with h5py.File(partial, "a") as file:
    for position in positions:
      file[f"lora/{position}"].attrs[_PATH_ATTRIBUTE] = layers[position].path
  os.replace(partial, path)
  return path


def load_keras_hub_lora(backbone, path):
  """Loads a keras-hub LoRA file into `backbone`, enabling keras-hub's LoRA at its rank.

  Every tensor goes to the layer of its recorded path (files of `save_keras_hub_lora`) or,
  in a file of keras-hub's `save_lora_weights`, to the layer at its position, which must be
  one `enable_lora` targets. The file must cover exactly the layers this backbone's
  `enable_lora` targets, with their shapes at the file's rank.

  Raises:
    UsageError: The file is missing or not a keras-hub LoRA file, or it does not fit the
      backbone (another architecture, another rank than the backbone's LoRA): the message
      names the first mismatch. Nothing is changed then.
  """
  path = os.fspath(path)
  rank, entries = _read(path)
  enabled_rank = getattr(backbone, "_lora_rank", None)
  if getattr(backbone, "_lora_enabled_layers", None) and enabled_rank != rank:
    raise errors.UsageError(
        f"{path!r} holds LoRA of rank {rank}; the backbone's LoRA has rank {enabled_rank}: "
        "load it into a backbone without LoRA (its rank is enabled) or of that rank.")
  layers = _layers_with_weights(backbone)
  by_path = {layer.path: layer for layer in layers}
  targets = {position: layer.path for position, layer in enumerate(layers)
             if layer.name in backbone.default_lora_layer_names()
             and hasattr(layer, "enable_lora")}
  placed = {}
  for position, (recorded, kernel_a, kernel_b) in sorted(entries.items()):
    if recorded is not None:
      layer = by_path.get(recorded)
      where = f"layer {recorded!r}"
    else:
      layer = layers[position] if position in targets else None
      where = f"position {position} (a keras-hub file names layers by position)"
    if layer is None:
      raise errors.UsageError(
          f"{path!r} holds LoRA for {where}, which this {type(backbone).__name__} has no "
          "LoRA layer at: the file is of another architecture. Load it into the backbone "
          "it was trained on.")
    _check_shapes(path, where, layer, rank, kernel_a, kernel_b)
    placed[layer.path] = (layer, kernel_a, kernel_b)
  uncovered = [layer_path for layer_path in targets.values() if layer_path not in placed]
  if uncovered:
    raise errors.UsageError(
        f"{path!r} holds no LoRA for layer {uncovered[0]!r}, which this "
        f"{type(backbone).__name__}'s enable_lora targets ({len(placed)} of {len(targets)} "
        "layers covered): the file is of another architecture. Load it into the backbone it "
        "was trained on.")
  if not getattr(backbone, "_lora_enabled_layers", None):
    backbone.enable_lora(rank)
  for layer, kernel_a, kernel_b in placed.values():
    layer.lora_kernel_a.assign(kernel_a)
    layer.lora_kernel_b.assign(kernel_b)


def _check_shapes(path, where, layer, rank, kernel_a, kernel_b):
  """Refuses LoRA factors that are not `kernel.shape[:-1] + (rank,)` and
  `(rank, kernel.shape[-1])` for the layer's kernel."""
  kernel = tuple(layer.kernel.shape)
  expected = (kernel[:-1] + (rank,), (rank, kernel[-1]))
  if (kernel_a.shape, kernel_b.shape) != expected:
    raise errors.UsageError(
        f"{path!r} holds LoRA for {where} of shapes {list(kernel_a.shape)} and "
        f"{list(kernel_b.shape)}; layer {layer.path!r} (kernel {list(kernel)}) needs "
        f"{list(expected[0])} and {list(expected[1])} at the file's rank {rank}: the file is "
        "of another architecture or its rank is not the one it records.")


def _read(path):
  """The file's rank and, by position, (recorded layer path or `None`, A, B)."""
  if not os.path.isfile(path):
    raise errors.UsageError(f"No keras-hub LoRA file at {path!r}; pass the .lora.h5 file "
                            "backbone.save_lora_weights or kak.save_keras_hub_lora wrote.")
  try:
    with h5py.File(path, "r") as file:
      lora = file["lora"]
      rank = int(lora["vars/rank"][()])
      entries = {}
      for name, group in lora.items():
        if name == "vars":
          continue
        recorded = group.attrs.get(_PATH_ATTRIBUTE)
        entries[int(name)] = (None if recorded is None else str(recorded),
                              group["vars/lora_kernel_a"][()], group["vars/lora_kernel_b"][()])
  except (OSError, KeyError, ValueError) as error:
    raise errors.UsageError(
        f"{path!r} is not a keras-hub LoRA file ({error}); pass the .lora.h5 file "
        "backbone.save_lora_weights or kak.save_keras_hub_lora wrote.") from None
  return rank, entries


def _layers_with_weights(backbone):
  """keras-hub's list of LoRA positions: the backbone's layers that have weights."""
  return [layer for layer in backbone._flatten_layers(include_self=False)  # pylint: disable=protected-access
          if layer.weights]

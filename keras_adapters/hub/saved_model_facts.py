"""What a Keras SavedModel says about itself beyond its variables: layer configs and assets.

A TF Hub model exported from Keras (the Model Garden's `export_tfhub_lib` does so) stores each
layer's `get_config()` in `keras_metadata.pb`, beside the graph. That is where the facts the
weights cannot show live: the feed-forward activation, the LayerNorm epsilon, the attention
options, the tokenizer's casing. Assets (a vocab file, a SentencePiece model) are files the
restored object points to.
"""

import hashlib
import json
import os
from typing import Dict, List, Tuple

import tensorflow as tf

from keras_adapters.hub import read_cache

_METADATA_FILE = "keras_metadata.pb"


# Its old path: what keys a SavedModel read once per process.
cache_key = read_cache.cache_key


def layer_configs(export_dir: str) -> List[Tuple[str, Dict]]:
  """The `(class_name, config)` of every Keras layer recorded in a SavedModel.

  Args:
    export_dir: A local SavedModel folder.

  Returns:
    One pair per layer node, in the file's order; empty when the SavedModel was not saved
    by Keras (it has no `keras_metadata.pb`).
  """
  # The proto lives in tf_keras; imported here so that reading variables never needs it.
  from tf_keras.protobuf import saved_metadata_pb2  # pylint: disable=g-import-not-at-top
  path = os.path.join(export_dir, _METADATA_FILE)
  if not tf.io.gfile.exists(path):
    return []
  metadata = saved_metadata_pb2.SavedMetadata()
  with tf.io.gfile.GFile(path, "rb") as f:
    metadata.ParseFromString(f.read())
  pairs = []
  for node in metadata.nodes:
    try:
      values = json.loads(node.metadata)
    except ValueError:
      continue  # A node Keras could not describe tells nothing here.
    config = values.get("config")
    if isinstance(config, dict):
      pairs.append((values.get("class_name", ""), config))
  return pairs


def tracked_objects(restored) -> List[object]:
  """Every object a restored SavedModel object tracks, itself first, breadth first."""
  found, seen, pending = [], set(), [restored]
  while pending:
    node = pending.pop(0)
    if id(node) in seen:
      continue
    seen.add(id(node))
    found.append(node)
    children = getattr(node, "_trackable_children", None)
    if callable(children):
      try:
        pending.extend(children().values())
      except (TypeError, ValueError):
        continue  # Some restored functions cannot list children outside a save.
  return found


def asset_paths(restored) -> List[str]:
  """The paths of every asset a restored SavedModel object refers to, in tracking order."""
  return [node.asset_path.numpy().decode() for node in tracked_objects(restored)
          if isinstance(node, tf.saved_model.Asset)]


def variables(restored) -> List[tf.Variable]:
  """The variables of a restored SavedModel: its `variables` where it lists them (Keras and
  TF Hub models do), else every variable it tracks."""
  listed = getattr(restored, "variables", None)
  if listed is not None:
    return list(listed)
  return [node for node in tracked_objects(restored) if isinstance(node, tf.Variable)]


def vocabulary_digest(path: str, kind: str) -> str:
  """SHA-256 of a tokenizer asset: a `"wordpiece"` vocab's tokens (so line endings and a
  final newline do not count) or a `"sentencepiece"` model's bytes."""
  with tf.io.gfile.GFile(path, "rb") as f:
    content = f.read()
  if kind == "wordpiece":
    content = b"\n".join(line.strip() for line in content.splitlines())
  return hashlib.sha256(content).hexdigest()


def wordpiece_tokens(path: str) -> List[str]:
  """The tokens of a wordpiece vocab file, one per line."""
  with tf.io.gfile.GFile(path, "r") as f:
    return [line.strip() for line in f.read().splitlines()]

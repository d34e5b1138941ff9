"""What reading a base SavedModel proved, kept on disk under a digest of its files.

Reading a TF Hub encoder restores its SavedModel (every function of its graph), runs it, and
builds and runs the encoder rebuilt from its weights beside it: seconds for BERT-base, in
every run. What that finds depends only on the SavedModel's files, this library and
TensorFlow. A record of it, named by their digest, lets a later read of the same files in any
process take the variables from the checkpoint (`checkpoint_variables`) and restore nothing.
Changed files, another version of the library or of TensorFlow: another digest, and the base
is proven again.

The records live in `$KERAS_ADAPTERS_PROOFS`, else `<cache>/proofs` (`paths.cache_dir`).
"""

import hashlib
import os
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from keras_adapters import version
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths

# The folder of the records, when not the cache's: the tests give each session its own, so
# that every base is proven once in it.
SETTING = "KERAS_ADAPTERS_PROOFS"
# Bumped when a record's meaning changes: older records are then never read.
_FORMAT = 1
_CHUNK_BYTES = 2**24


def folder() -> str:
  """Where the records are."""
  return os.environ.get(SETTING) or os.path.join(paths.cache_dir(), "proofs")


def key(export_dir: str, reader: str) -> str:
  """The digest that names `reader`'s record of the SavedModel at `export_dir`.

  Args:
    export_dir: The SavedModel folder; every file in it counts, by path and bytes.
    reader: What reads it, e.g. `"hub_encoder"`: each reader proves its own facts.
  """
  digest = hashlib.sha256(
      f"{_FORMAT}|{reader}|{version.__version__}|{tf.__version__}".encode())
  for root, folders, files in tf.io.gfile.walk(export_dir):
    folders.sort()  # Walked in place: the same order on every file system.
    for name in sorted(files):
      path = os.path.join(root, name)
      digest.update(f"|{os.path.relpath(path, export_dir)}|".encode())
      with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda f=f: f.read(_CHUNK_BYTES), b""):
          digest.update(chunk)
  return digest.hexdigest()


def recall(digest: str) -> Optional[dict]:
  """The record `remember` wrote under `digest`, or `None`."""
  try:
    record = atomic_io.read_json(_path(digest))
  except ValueError:  # Not JSON (a file someone else wrote there): proven again, rewritten.
    return None
  return record if isinstance(record, dict) else None


def remember(digest: str, record: dict) -> None:
  """Writes `record` (JSON-ready) under `digest`, atomically; where the folder cannot be
  written, nothing: the next read proves the base again, which is all a record saves."""
  try:
    atomic_io.write_json(_path(digest), record)
  except (OSError, tf.errors.OpError):
    pass


def _path(digest):
  return os.path.join(folder(), f"{digest}.json")


def checkpoint_variables(export_dir: str) -> List[Tuple[str, np.ndarray]]:
  """`(name, value)` of every variable of a SavedModel, read from its checkpoint: the values
  `tf.saved_model.load` would restore, without restoring the graph's functions (most of a
  load's time).

  The SavedModel's object graph and its checkpoint's number their objects alike (both are
  written from one list of the saved objects), so a variable node's checkpoint entry is the
  `VARIABLE_VALUE` of the checkpoint node of the same index.

  Args:
    export_dir: A SavedModel folder (a local path or a URL `tf.io.gfile` reads).

  Returns:
    One pair per variable node, in the object graph's order, under the name it was saved with
    (a loaded variable's `name` less its `:0`, e.g. `"word_embeddings/embeddings"`).
  """
  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
  from tensorflow.core.protobuf import saved_model_pb2
  from tensorflow.core.protobuf import trackable_object_graph_pb2
  # pylint: enable=g-import-not-at-top,g-direct-tensorflow-import
  saved_model = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
  nodes = saved_model.meta_graphs[0].object_graph_def.nodes
  reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
  checkpoint_graph = trackable_object_graph_pb2.TrackableObjectGraph()
  checkpoint_graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  pairs = []
  for node, checkpointed in zip(nodes, checkpoint_graph.nodes):
    if node.WhichOneof("kind") == "variable":
      (key,) = [a.checkpoint_key for a in checkpointed.attributes if a.name == "VARIABLE_VALUE"]
      pairs.append((node.variable.name, reader.get_tensor(key)))
  return pairs

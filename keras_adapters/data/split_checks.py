"""Checks of a task's splits before a run learns from them, and their fingerprints: shared by
the Keras 2 runner (`tasks.classification`) and the Keras 3 one (`keras3.training`)."""

import hashlib
import json
from typing import Mapping

from absl import logging
import numpy as np

from keras_adapters.data import examples as examples_lib


def check_splits(spec: examples_lib.TaskSpec,
                 splits: Mapping[str, examples_lib.TextExamples]) -> None:
  """Raises a `ValueError` for data a run cannot learn from or score.

  Args:
    spec: The task.
    splits: Split name → examples, with "train".
  """
  if "train" not in splits:
    raise ValueError(f"run_task needs a 'train' split; got {sorted(splits)}.")
  if not len(splits["train"]):
    raise ValueError(f"The training split of task {spec.name!r} is empty.")
  if not spec.is_regression and spec.num_classes < 2:
    raise ValueError(f"Task {spec.name!r} has the classes {list(spec.label_names)}: a "
                     "classifier needs at least two.")
  for name, split in splits.items():
    if len(split.texts) != len(spec.text_fields):
      raise ValueError(
          f"Split {name!r} has {len(split.texts)} text fields; task {spec.name!r} reads "
          f"{len(spec.text_fields)} ({', '.join(spec.text_fields)}).")
    if split.labels is None:
      continue
    labels = np.asarray(split.labels)
    if spec.is_regression:
      bad = ~np.isfinite(labels.astype(np.float64))
      if bad.any():
        raise ValueError(f"Split {name!r} of task {spec.name!r} has a score that is not a "
                         f"finite number: example {split.ids[int(np.argmax(bad))]!r}.")
      continue
    if not np.issubdtype(labels.dtype, np.integer):
      raise ValueError(f"Split {name!r} of task {spec.name!r} has labels of dtype "
                       f"{labels.dtype}; a classification task needs integer class ids.")
    outside = (labels < 0) | (labels >= spec.num_classes)
    if outside.any():
      raise ValueError(
          f"Split {name!r} of task {spec.name!r} has the label {labels[outside][0]} (example "
          f"{split.ids[int(np.argmax(outside))]!r}), outside the class ids 0..."
          f"{spec.num_classes - 1} of {list(spec.label_names)}.")
  if spec.is_regression:
    return
  train_labels = np.asarray(splits["train"].labels)
  present = np.unique(train_labels)
  if len(present) < 2:
    raise ValueError(
        f"The training split of task {spec.name!r} has examples of one class only, "
        f"{spec.label_names[present[0]]!r} ({len(train_labels)} examples): a classifier learns "
        "nothing from it. Check that the labels are read from the right column and that the "
        "data holds every class.")
  absent = [spec.label_names[i] for i in range(spec.num_classes) if i not in set(present)]
  if absent:
    logging.warning("The training split of task %r has no example of the classes %s: the "
                    "model will never predict them.", spec.name, absent)


def data_fingerprint(examples: examples_lib.TextExamples) -> str:
  """SHA-256 of the examples' ids, texts and labels, in their order."""
  labels = None if examples.labels is None else np.asarray(examples.labels).tolist()
  record = [list(examples.ids), [list(field) for field in examples.texts], labels]
  return "sha256:" + hashlib.sha256(json.dumps(record).encode("ascii")).hexdigest()

"""Fixed, seeded, stratified train/validation/test splits and the manifests that record them.

A split is made once, written to a JSON manifest and re-applied from it, so that every method
is trained and scored on exactly the same examples. The manifest holds a fingerprint of the
data it was made from; re-applying it to data that changed since is an error. Splits the data
comes with (a dataset's official test set, a user's own train/validation/test files) are
recorded as given, and only the other examples are split.
"""

import collections
import dataclasses
import fractions as fractions_lib
import hashlib
import json
import math
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_adapters.data import examples as examples_lib
from keras_adapters.data import text_classification
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors

TaskSpec = examples_lib.TaskSpec
TextExamples = examples_lib.TextExamples

SPLIT_NAMES = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)
_FORMAT_VERSION = 1
_MANIFEST_KEYS = ("format_version", "task", "label_names", "seed", "fractions",
                  "num_examples", "fingerprint", "class_counts", "ids")
# Written only when splits were given, so manifests without them keep their bytes.
_GIVEN_KEY = "given_splits"

Splits = Tuple[TextExamples, TextExamples, TextExamples]
# Split name to the ids of the examples the data puts in that split.
GivenSplits = Mapping[str, Sequence[str]]


@dataclasses.dataclass(frozen=True)
class SplitManifest:
  """The record of one split of a task's examples.

  Attributes:
    task: Name of the task that was split.
    label_names: The task's classes, in label-id order.
    seed: Seed of the shuffle that assigned examples to splits.
    fractions: Fractions of each class in the train, validation and test splits, of the
      examples that were not in a given split; with every split given, each split's share.
    fingerprint: SHA-256 of the ids, texts and labels of all examples that were split.
    ids: Example ids of each split, keyed by split name, in source order.
    class_counts: Examples of each class in each split, keyed by split and class name.
    given_splits: The splits the data came with, taken as they are.
    path: The file the manifest was loaded from, if any; used in error messages only.
  """
  task: str
  label_names: Tuple[str, ...]
  seed: int
  fractions: Tuple[float, float, float]
  fingerprint: str
  ids: Dict[str, Tuple[str, ...]]
  class_counts: Dict[str, Dict[str, int]]
  given_splits: Tuple[str, ...] = ()
  path: Optional[str] = dataclasses.field(default=None, compare=False)

  @property
  def num_examples(self) -> int:
    return sum(len(ids) for ids in self.ids.values())


def stratified_split(spec: TaskSpec, examples: TextExamples,
                     fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0) -> Splits:
  """Splits examples into train, validation and test sets with the same class proportions.

  Each class is shuffled with `seed` and cut by `fractions`, its examples rounded to whole
  numbers by largest remainder, so every class is split in proportion. Each split keeps the
  source order; shuffle when training.

  Args:
    spec: The task; names the classes in error messages.
    examples: All labelled examples of the task, with unique ids.
    fractions: Fractions of each class for the train, validation and test splits; they sum
      to 1 and train's is above 0.
    seed: Seed of the shuffle; the same seed and data give the same split.

  Returns:
    The train, validation and test examples.

  Raises:
    ValueError: Bad fractions, missing or out-of-range labels, repeated ids, examples of one
      class only, or a class with fewer than 2 examples.
  """
  return tuple(text_classification.select_examples(examples, indices)
               for indices in _split_indices(spec, examples, fractions, seed))


def make_split_manifest(spec: TaskSpec, examples: TextExamples,
                        fractions: Sequence[float] = DEFAULT_FRACTIONS,
                        seed: int = 0, given: Optional[GivenSplits] = None) -> SplitManifest:
  """Makes the split `stratified_split` makes and returns its record.

  Args:
    spec: The task.
    examples: All labelled examples of the task, with unique ids.
    fractions: Fractions of each class for the train, validation and test splits, applied
      to the examples outside `given`; not used when every example is in `given`.
    seed: Seed of the shuffle.
    given: Splits the data comes with, as split name to example ids (e.g. a dataset's
      official test set); they are kept as they are.

  Returns:
    The manifest; save it with `save_split_manifest`, apply it with `apply_split_manifest`.
  """
  parts = _split_indices(spec, examples, fractions, seed, given)
  if _all_given(examples, given):
    # Nothing was split: record the share of each given split instead.
    fractions = [len(part) / len(examples) for part in parts]
  return SplitManifest(
      task=spec.name,
      label_names=tuple(spec.label_names),
      seed=int(seed),
      fractions=tuple(float(f) for f in fractions),
      fingerprint=fingerprint(spec, examples),
      ids={split: tuple(examples.ids[i] for i in indices)
           for split, indices in zip(SPLIT_NAMES, parts)},
      class_counts={
          split: {name: int(np.sum(examples.labels[indices] == label))
                  for label, name in enumerate(spec.label_names)}
          for split, indices in zip(SPLIT_NAMES, parts)},
      given_splits=tuple(split for split in SPLIT_NAMES if split in (given or {})))


def apply_split_manifest(manifest: SplitManifest, spec: TaskSpec,
                         examples: TextExamples) -> Splits:
  """Re-makes a recorded split from the same data.

  Args:
    manifest: The split, from `make_split_manifest` or `load_split_manifest`.
    spec: The task.
    examples: All labelled examples of the task, as they were when the split was made.

  Returns:
    The train, validation and test examples, each in the manifest's order.

  Raises:
    ValueError: The examples are not the ones the manifest was made from.
  """
  actual = fingerprint(spec, examples)
  if actual != manifest.fingerprint:
    source = f"split manifest {manifest.path}" if manifest.path else "the split manifest"
    raise errors.UsageError(
        f"The examples of task {spec.name!r} are not the ones {source} was made from: their "
        f"fingerprint is {actual}, the manifest's {manifest.fingerprint}. "
        f"{_describe_mismatch(manifest, spec, examples)} Every method must be scored on the "
        "same examples: restore the data the manifest was made from, or make a new manifest "
        "and re-run every method on it.")
  position = {example_id: i for i, example_id in enumerate(examples.ids)}
  return tuple(
      text_classification.select_examples(examples, [position[i] for i in manifest.ids[split]])
      for split in SPLIT_NAMES)


def split_with_manifest(path: str, spec: TaskSpec, examples: TextExamples,
                        fractions: Sequence[float] = DEFAULT_FRACTIONS,
                        seed: int = 0, given: Optional[GivenSplits] = None) -> Splits:
  """Applies the manifest at `path`, first making and saving it if there is none.

  This is the one call experiments need: the first run fixes the split, later runs and other
  methods reuse it.

  Args:
    path: The manifest's JSON file.
    spec: The task.
    examples: All labelled examples of the task.
    fractions: Fractions of each class for the train, validation and test splits; must
      match the manifest's if it exists, unless every split is given.
    seed: Seed of the shuffle; must match the manifest's if it exists, unless every split
      is given.
    given: Splits the data comes with, as split name to example ids; must match the
      manifest's if it exists.

  Returns:
    The train, validation and test examples.

  Raises:
    ValueError: The manifest records another seed, other fractions, other given splits or
      other examples.
  """
  given = given or {}
  if not tf.io.gfile.exists(path):
    manifest = make_split_manifest(spec, examples, fractions, seed, given)
    save_split_manifest(path, manifest)
  else:
    manifest = load_split_manifest(path)
    if set(manifest.given_splits) != set(given) or any(
        set(manifest.ids[split]) != set(ids) for split, ids in given.items()):
      raise errors.UsageError(
          f"Split manifest {path} records the given splits {list(manifest.given_splits)}; "
          f"the splits given now are {[s for s in SPLIT_NAMES if s in given]}, or hold other "
          "examples. Delete the manifest to make a new one (and re-run every method on it).")
    if not _all_given(examples, given) and (manifest.seed != seed or (
        _check_fractions(manifest.fractions) != _check_fractions(fractions))):
      raise errors.UsageError(
          f"Split manifest {path} was made with seed {manifest.seed} and fractions "
          f"{list(manifest.fractions)}, not seed {seed} and fractions {list(fractions)}. Pass "
          "the recorded values to reuse the split, or delete the manifest to make a new one "
          "(and re-run every method on it).")
  return apply_split_manifest(manifest, spec, examples)


def fingerprint(spec: TaskSpec, examples: TextExamples) -> str:
  """SHA-256 of the examples' ids, texts and label names, independent of their order.

  Labels enter by name, so a manifest still applies after `label_names` are re-ordered.

  Args:
    spec: The task; gives the label names.
    examples: Labelled examples with unique ids.

  Returns:
    `"sha256:"` followed by the hex digest.
  """
  _check_examples(spec, examples)
  names = [spec.label_names[label] for label in examples.labels.tolist()]
  order = sorted(range(len(examples)), key=lambda i: examples.ids[i])
  records = [[examples.ids[i], [field[i] for field in examples.texts], names[i]]
             for i in order]
  # JSON keeps the boundaries between ids, texts and labels unambiguous; ASCII escapes make
  # the bytes independent of any text encoding.
  digest = hashlib.sha256(json.dumps(records).encode("ascii"))
  return "sha256:" + digest.hexdigest()


def save_split_manifest(path: str, manifest: SplitManifest) -> None:
  """Writes `manifest` to `path` as JSON, atomically: a crash leaves the old file or none.

  Args:
    path: The JSON file; its folder is created if needed.
    manifest: The split to record.
  """
  record = {
      "format_version": _FORMAT_VERSION,
      "task": manifest.task,
      "label_names": list(manifest.label_names),
      "seed": manifest.seed,
      "fractions": dict(zip(SPLIT_NAMES, manifest.fractions)),
      "num_examples": manifest.num_examples,
      "fingerprint": manifest.fingerprint,
      "class_counts": manifest.class_counts,
      "ids": {split: list(manifest.ids[split]) for split in SPLIT_NAMES},
  }
  if manifest.given_splits:
    record[_GIVEN_KEY] = list(manifest.given_splits)
  atomic_io.write_text(path, json.dumps(record, ensure_ascii=False, indent=1) + "\n")


def load_split_manifest(path: str) -> SplitManifest:
  """Reads a manifest written by `save_split_manifest`.

  Args:
    path: The JSON file.

  Returns:
    The manifest.

  Raises:
    FileNotFoundError: There is no file at `path`.
    IsADirectoryError: `path` is a folder.
    ValueError: The file is not a valid split manifest.
  """
  if tf.io.gfile.isdir(path):
    raise IsADirectoryError(
        f"Split manifest {path} is a folder: give the path of a JSON file (a new split is "
        "written there when it does not exist), e.g. split_manifest=<folder>/split.json.")
  try:
    record = atomic_io.read_json(path)
  except json.JSONDecodeError as e:
    raise errors.DataError(
        f"Split manifest {path}, line {e.lineno}, column {e.colno}: not valid JSON "
        f"({e.msg}). Restore it from where it was kept, or delete it to make a new split."
    ) from e
  if record is None:
    raise FileNotFoundError(
        f"Split manifest {path} does not exist; make one with make_split_manifest and "
        "save_split_manifest, or call split_with_manifest.")
  _check_record(path, record)
  return SplitManifest(
      task=record["task"],
      label_names=tuple(record["label_names"]),
      seed=record["seed"],
      fractions=tuple(record["fractions"][split] for split in SPLIT_NAMES),
      fingerprint=record["fingerprint"],
      ids={split: tuple(record["ids"][split]) for split in SPLIT_NAMES},
      class_counts=record["class_counts"],
      given_splits=tuple(record.get(_GIVEN_KEY, ())),
      path=path)


def _check_record(path: str, record) -> None:
  """Checks a manifest's JSON is what `save_split_manifest` writes."""
  missing = list(_MANIFEST_KEYS) if not isinstance(record, dict) else [
      key for key in _MANIFEST_KEYS if key not in record]
  missing += [f"{key}.{split}" for key in ("fractions", "ids") if key not in missing
              for split in SPLIT_NAMES if split not in record[key]]
  if missing:
    raise errors.DataError(
        f"Split manifest {path} lacks the keys {missing}; it was not written by "
        "save_split_manifest. Restore it, or delete it to make a new split.")
  unknown = set(record.get(_GIVEN_KEY, ())) - set(SPLIT_NAMES)
  if unknown:
    raise errors.DataError(
        f"Split manifest {path} names given splits {sorted(unknown)}; the splits are "
        f"{list(SPLIT_NAMES)}. Restore it, or delete it to make a new split.")
  if record["format_version"] != _FORMAT_VERSION:
    raise errors.DataError(
        f"Split manifest {path} has format version {record['format_version']}; this code "
        f"reads version {_FORMAT_VERSION}. Use the code that wrote it.")
  seen = set()
  for split in SPLIT_NAMES:
    repeated = seen.intersection(record["ids"][split])
    if repeated:
      raise errors.DataError(
          f"Split manifest {path} puts ids {sorted(repeated)[:5]} in more than one split; "
          "it was edited by hand. Restore it, or delete it to make a new split.")
    seen.update(record["ids"][split])


def _split_indices(spec: TaskSpec, examples: TextExamples, fractions: Sequence[float],
                   seed: int, given: Optional[GivenSplits] = None
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Sorted example indices of the train, validation and test splits."""
  _check_examples(spec, examples)
  if not len(examples):
    raise errors.DataError(f"Task {spec.name!r} has no examples to split.")
  shares = _check_fractions(fractions)
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
    raise errors.UsageError(f"seed must be an integer, got {seed!r}.")
  parts = tuple([np.empty(0, np.int64)] for _ in SPLIT_NAMES)
  rest = np.ones(len(examples), bool)
  for split, indices in _given_indices(spec, examples, given or {}).items():
    parts[SPLIT_NAMES.index(split)].append(indices)
    rest[indices] = False
  rest = np.flatnonzero(rest)
  if not len(rest):
    return tuple(np.sort(np.concatenate(part)) for part in parts)
  classes = np.unique(examples.labels[rest])
  if len(classes) < 2:
    raise errors.DataError(
        f"Task {spec.name!r} has examples of one class only, "
        f"{spec.label_names[classes[0]]!r} ({len(rest)} examples): a classifier learns "
        "nothing from it. Check that the labels are read from the right column "
        "(label_column=) and that the data holds every class.")
  rng = np.random.default_rng(seed)
  for label in classes:
    members = rest[examples.labels[rest] == label]
    if len(members) < 2:
      raise errors.DataError(
          f"Class {spec.label_names[label]!r} of task {spec.name!r} has only 1 example (id "
          f"{examples.ids[members[0]]!r}), too few to split stratified. Add examples of it, "
          "or drop its example and the class from label_names.")
    counts = _apportion(len(members), shares)
    for part, chunk in zip(parts, np.split(rng.permutation(members), np.cumsum(counts)[:-1])):
      part.append(chunk)
  return tuple(np.sort(np.concatenate(part)) for part in parts)


def _all_given(examples: TextExamples, given: Optional[GivenSplits]) -> bool:
  """Whether `given` puts every example in a split, so that nothing is left to split."""
  return bool(given) and sum(len(ids) for ids in given.values()) == len(examples)


def _given_indices(spec: TaskSpec, examples: TextExamples,
                   given: GivenSplits) -> Dict[str, np.ndarray]:
  """The example indices of each given split, after checking the splits and their ids."""
  position = {example_id: i for i, example_id in enumerate(examples.ids)}
  indices, seen = {}, set()
  for split, ids in given.items():
    if split not in SPLIT_NAMES:
      raise errors.UsageError(
          f"Given split {split!r} of task {spec.name!r} is not one of {list(SPLIT_NAMES)}.")
    unknown = [i for i in ids if i not in position]
    if unknown:
      raise errors.UsageError(
          f"Given split {split!r} of task {spec.name!r} names ids that are not among the "
          f"examples, e.g. {unknown[:3]}; give ids of the examples passed.")
    repeated = seen.intersection(ids) or {
        i for i, count in collections.Counter(ids).items() if count > 1}
    if repeated:
      raise errors.UsageError(
          f"Given split {split!r} of task {spec.name!r} names ids twice or ids of another "
          f"given split, e.g. {sorted(repeated)[:3]}; give every example once at most.")
    seen.update(ids)
    indices[split] = np.array([position[i] for i in ids], np.int64)
  return indices


def _apportion(total: int, shares: Sequence[fractions_lib.Fraction]) -> Tuple[int, ...]:
  """Whole counts in proportion to `shares` (summing to 1), by largest remainder."""
  quotas = [total * share for share in shares]
  counts = [math.floor(quota) for quota in quotas]
  # Ties go to the earlier split, so the same data always gets the same counts.
  by_remainder = sorted(range(len(shares)), key=lambda i: (counts[i] - quotas[i], i))
  for i in by_remainder[:total - sum(counts)]:
    counts[i] += 1
  return tuple(counts)


def _check_fractions(fractions: Sequence[float]) -> Tuple[fractions_lib.Fraction, ...]:
  """Checks the split fractions; returns them as exact fractions that sum to 1."""
  if len(fractions) != len(SPLIT_NAMES) or not all(
      math.isfinite(f) and f >= 0 for f in fractions):
    raise errors.UsageError(
        f"fractions must be 3 numbers >= 0 for {', '.join(SPLIT_NAMES)}; got "
        f"{list(fractions)}.")
  if not math.isclose(sum(fractions), 1.0, abs_tol=1e-6) or fractions[0] == 0:
    raise errors.UsageError(
        f"fractions {list(fractions)} must sum to 1 with a train fraction above 0, e.g. "
        f"{list(DEFAULT_FRACTIONS)}.")
  # Exact decimals (0.1 is 1/10, not the float nearest to it) so that 10 examples cut by
  # 0.8/0.1/0.1 give exactly 8/1/1.
  shares = [fractions_lib.Fraction(f).limit_denominator(10**6) for f in fractions]
  return tuple(share / sum(shares) for share in shares)


def _check_examples(spec: TaskSpec, examples: TextExamples) -> None:
  """Checks the examples carry in-range class labels and unique ids."""
  if spec.is_regression or examples.labels is None:
    raise errors.DataError(
        f"Task {spec.name!r} has no class labels; stratified splits and manifests need "
        "labelled classification examples.")
  labels = np.asarray(examples.labels)
  if not np.issubdtype(labels.dtype, np.integer):
    raise errors.DataError(f"Labels of task {spec.name!r} must be integer class ids; got dtype "
                           f"{labels.dtype}.")
  out_of_range = labels[(labels < 0) | (labels >= spec.num_classes)]
  if out_of_range.size:
    raise errors.DataError(
        f"Labels of task {spec.name!r} must be class ids in [0, {spec.num_classes}) for "
        f"label_names {list(spec.label_names)}; got {out_of_range[0]}.")
  if len(set(examples.ids)) < len(examples.ids):
    seen = set()
    repeated = [i for i in examples.ids if i in seen or seen.add(i)]
    raise errors.DataError(
        f"Example ids of task {spec.name!r} repeat, e.g. {repeated[:5]}; splits are recorded "
        "by id, so give every example its own id.")


def _describe_mismatch(manifest: SplitManifest, spec: TaskSpec,
                       examples: TextExamples) -> str:
  """Says how the examples differ from those a manifest was made from."""
  recorded = set().union(*manifest.ids.values())
  current = set(examples.ids)
  if recorded != current:
    gone = sorted(recorded - current)
    new = sorted(current - recorded)
    return (f"{len(gone)} of its ids are gone (e.g. {gone[:3]}) and {len(new)} ids are new "
            f"(e.g. {new[:3]}).")
  if set(manifest.label_names) != set(spec.label_names):
    return (f"The label names changed from {list(manifest.label_names)} to "
            f"{list(spec.label_names)}.")
  return "The ids are the same, but texts or labels of some examples changed."

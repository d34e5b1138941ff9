"""Tests for seeded stratified splits and split manifests."""

import dataclasses
import json
import os

import numpy as np
import pytest

from keras_adapters.data import examples as examples_lib
from keras_adapters.data import splits


def _task(class_sizes=(("a", 50), ("b", 30), ("c", 20))):
  ids, texts, labels = [], [], []
  for label, (name, size) in enumerate(class_sizes):
    for i in range(size):
      ids.append(f"{name}{i}")
      texts.append(f"text {i} of {name}")
      labels.append(label)
  spec = examples_lib.TaskSpec("toy", ("text",), tuple(name for name, _ in class_sizes))
  return spec, examples_lib.TextExamples(ids, (texts,), np.array(labels, np.int32))


def _ids(parts):
  return [list(part.ids) for part in parts]


def test_same_seed_same_split_other_seed_other_split():
  spec, examples = _task()
  assert _ids(splits.stratified_split(spec, examples, seed=3)) == _ids(
      splits.stratified_split(spec, examples, seed=3))
  assert _ids(splits.stratified_split(spec, examples, seed=3)) != _ids(
      splits.stratified_split(spec, examples, seed=4))


@pytest.mark.parametrize("fractions, expected", [
    ((0.8, 0.1, 0.1), [[40, 24, 16], [5, 3, 2], [5, 3, 2]]),
    ((0.6, 0.2, 0.2), [[30, 18, 12], [10, 6, 4], [10, 6, 4]]),
    ((0.7, 0.3, 0.0), [[35, 21, 14], [15, 9, 6], [0, 0, 0]]),
])
def test_every_class_split_in_proportion(fractions, expected):
  spec, examples = _task()
  parts = splits.stratified_split(spec, examples, fractions=fractions)
  assert [np.bincount(part.labels, minlength=3).tolist() for part in parts] == expected


def test_rounding_is_by_largest_remainder_per_class():
  spec, examples = _task((("a", 7), ("b", 2), ("c", 5)))
  parts = splits.stratified_split(spec, examples)
  # a: 5.6/0.7/0.7 -> 5/1/1; b: 1.6/0.2/0.2 -> 2/0/0; c: 4/0.5/0.5 -> 4/1/0, as a tie goes
  # to the earlier split.
  assert [np.bincount(part.labels, minlength=3).tolist() for part in parts] == [
      [5, 2, 4], [1, 0, 1], [1, 0, 0]]


def test_splits_are_disjoint_cover_everything_and_keep_rows_together():
  spec, examples = _task()
  parts = splits.stratified_split(spec, examples, seed=7)
  all_ids = [i for part in parts for i in part.ids]
  assert sorted(all_ids) == sorted(examples.ids)
  assert len(set(all_ids)) == len(all_ids)
  text_of = dict(zip(examples.ids, examples.texts[0]))
  label_of = dict(zip(examples.ids, examples.labels))
  for part in parts:
    assert [text_of[i] for i in part.ids] == list(part.texts[0])
    assert [label_of[i] for i in part.ids] == part.labels.tolist()


@pytest.mark.parametrize("fractions, message", [
    ((0.8, 0.2), "must be 3 numbers"),
    ((0.8, 0.3, -0.1), "must be 3 numbers >= 0"),
    ((0.8, 0.1, 0.2), "must sum to 1"),
    ((0.0, 0.5, 0.5), "train fraction above 0"),
])
def test_bad_fractions(fractions, message):
  spec, examples = _task()
  with pytest.raises(ValueError, match=message):
    splits.stratified_split(spec, examples, fractions=fractions)


def test_repeated_ids_and_missing_labels_are_errors():
  spec, examples = _task()
  repeated = dataclasses.replace(examples, ids=["same"] * len(examples))
  with pytest.raises(ValueError, match=r"ids of task 'toy' repeat, e.g. \['same'"):
    splits.stratified_split(spec, repeated)
  with pytest.raises(ValueError, match="has no class labels"):
    splits.stratified_split(spec, dataclasses.replace(examples, labels=None))


def test_manifest_round_trip(tmp_path):
  spec, examples = _task()
  manifest = splits.make_split_manifest(spec, examples, fractions=(0.6, 0.2, 0.2), seed=5)
  path = str(tmp_path / "manifests" / "toy.json")
  splits.save_split_manifest(path, manifest)
  assert os.listdir(tmp_path / "manifests") == ["toy.json"]  # No temp file left behind.
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  assert record["seed"] == 5
  assert record["fractions"] == {"train": 0.6, "validation": 0.2, "test": 0.2}
  assert record["class_counts"]["validation"] == {"a": 10, "b": 6, "c": 4}
  assert record["fingerprint"].startswith("sha256:") and len(record["fingerprint"]) == 71
  loaded = splits.load_split_manifest(path)
  assert loaded == manifest
  assert _ids(splits.apply_split_manifest(loaded, spec, examples)) == _ids(
      splits.stratified_split(spec, examples, fractions=(0.6, 0.2, 0.2), seed=5))


def test_manifest_applies_to_reordered_examples_and_relabelled_classes():
  spec, examples = _task()
  manifest = splits.make_split_manifest(spec, examples)
  order = np.arange(len(examples))[::-1]
  reordered = examples_lib.TextExamples(
      [examples.ids[i] for i in order], ([examples.texts[0][i] for i in order],),
      # Classes listed c, b, a: the ids change, the class of each example does not.
      2 - examples.labels[order])
  relabelled_spec = dataclasses.replace(spec, label_names=("c", "b", "a"))
  assert _ids(splits.apply_split_manifest(manifest, relabelled_spec, reordered)) == [
      list(ids) for ids in manifest.ids.values()]


def _changed_text(examples):
  texts = list(examples.texts[0])
  texts[3] += " edited"
  return dataclasses.replace(examples, texts=(texts,))


def _changed_label(examples):
  labels = examples.labels.copy()
  labels[0] = 1
  return dataclasses.replace(examples, labels=labels)


def _dropped_and_added(examples):
  ids = list(examples.ids)
  ids[0] = "new0"
  return dataclasses.replace(examples, ids=ids)


@pytest.mark.parametrize("change, detail", [
    (_changed_text, "texts or labels of some examples changed"),
    (_changed_label, "texts or labels of some examples changed"),
    (_dropped_and_added, r"1 of its ids are gone \(e.g. \['a0'\]\) and 1 ids are new"),
])
def test_manifest_refuses_changed_data(tmp_path, change, detail):
  spec, examples = _task()
  path = str(tmp_path / "toy.json")
  splits.save_split_manifest(path, splits.make_split_manifest(spec, examples))
  manifest = splits.load_split_manifest(path)
  with pytest.raises(ValueError, match=f"are not the ones split manifest {path} was made "
                     f"from.*{detail}.*make a new manifest"):
    splits.apply_split_manifest(manifest, spec, change(examples))


def test_split_with_manifest_makes_once_then_reuses(tmp_path):
  spec, examples = _task()
  path = str(tmp_path / "toy.json")
  first = splits.split_with_manifest(path, spec, examples, seed=1)
  assert os.path.exists(path)
  assert _ids(splits.split_with_manifest(path, spec, examples, seed=1)) == _ids(first)
  with pytest.raises(ValueError, match=r"was made with seed 1 .* not seed 2"):
    splits.split_with_manifest(path, spec, examples, seed=2)


def test_failed_save_keeps_the_old_manifest(tmp_path, monkeypatch):
  spec, examples = _task()
  path = str(tmp_path / "toy.json")
  manifest = splits.make_split_manifest(spec, examples)
  splits.save_split_manifest(path, manifest)

  def fail(*args, **kwargs):
    raise OSError("disk full")

  monkeypatch.setattr(os, "fsync", fail)
  with pytest.raises(OSError, match="disk full"):
    splits.save_split_manifest(path, splits.make_split_manifest(spec, examples, seed=9))
  monkeypatch.undo()
  assert os.listdir(tmp_path) == ["toy.json"]
  assert splits.load_split_manifest(path) == manifest


@pytest.mark.parametrize("content, message", [
    ('{"seed": 1,\n "ids": [}', r"line 2, column \d+: not valid JSON"),
    ('{"seed": 1}', r"lacks the keys \['format_version', 'task'"),
    ('[1, 2]', r"lacks the keys \['format_version', 'task'"),
])
def test_load_rejects_broken_manifests(tmp_path, content, message):
  path = tmp_path / "toy.json"
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError, match=message):
    splits.load_split_manifest(str(path))


def test_load_missing_manifest(tmp_path):
  with pytest.raises(FileNotFoundError, match="toy.json does not exist"):
    splits.load_split_manifest(str(tmp_path / "toy.json"))


def test_load_rejects_ids_in_two_splits(tmp_path):
  spec, examples = _task()
  path = str(tmp_path / "toy.json")
  splits.save_split_manifest(path, splits.make_split_manifest(spec, examples))
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  record["ids"]["test"].append(record["ids"]["train"][0])
  with open(path, "w", encoding="utf-8") as f:
    json.dump(record, f)
  with pytest.raises(ValueError, match=r"puts ids \['a\d+'\] in more than one split"):
    splits.load_split_manifest(path)


def test_given_split_is_kept_and_the_rest_split_stratified(tmp_path):
  """A given test set (as SNLI's official one) stays as it is; the other examples are split
  by the fractions, each class in proportion, and the manifest says which split was given."""
  spec, examples = _task()
  test_ids = ["a0", "a1", "b0", "c0"]
  path = str(tmp_path / "toy.json")
  train, validation, test = splits.split_with_manifest(
      path, spec, examples, fractions=(0.75, 0.25, 0.0), given={"test": test_ids})
  assert list(test.ids) == test_ids
  # a: 48 left -> 36/12, b: 29 -> 21.75/7.25 -> 22/7, c: 19 -> 14.25/4.75 -> 14/5.
  assert [np.bincount(part.labels, minlength=3).tolist() for part in (train, validation)] == [
      [36, 22, 14], [12, 7, 5]]
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  assert record["given_splits"] == ["test"]
  assert record["fractions"] == {"train": 0.75, "validation": 0.25, "test": 0.0}
  manifest = splits.load_split_manifest(path)
  assert manifest.given_splits == ("test",)
  again = splits.split_with_manifest(path, spec, examples, fractions=(0.75, 0.25, 0.0),
                                     given={"test": test_ids})
  assert _ids(again) == _ids((train, validation, test))
  with pytest.raises(ValueError, match=r"records the given splits \['test'\]; the splits "
                     r"given now are \[\]"):
    splits.split_with_manifest(path, spec, examples, fractions=(0.75, 0.25, 0.0))
  with pytest.raises(ValueError, match=r"records the given splits \['test'\]; the splits "
                     r"given now are \['test'\], or hold other examples"):
    splits.split_with_manifest(path, spec, examples, fractions=(0.75, 0.25, 0.0),
                               given={"test": test_ids[:3]})


def test_manifest_without_given_splits_has_no_such_key(tmp_path):
  """Manifests made before given splits existed keep their bytes when made again."""
  spec, examples = _task()
  path = str(tmp_path / "toy.json")
  splits.split_with_manifest(path, spec, examples)
  with open(path, encoding="utf-8") as f:
    assert "given_splits" not in json.load(f)
  assert splits.load_split_manifest(path).given_splits == ()


def test_every_split_given_records_their_shares_and_ignores_seed(tmp_path):
  """A user's own train/validation/test files: nothing is drawn, the manifest records each
  split's share, and reruns reuse it whatever the seed; changed files are refused."""
  spec, examples = _task()
  given = {"train": list(examples.ids[:70]), "validation": list(examples.ids[70:85]),
           "test": list(examples.ids[85:])}
  path = str(tmp_path / "toy.json")
  parts = splits.split_with_manifest(path, spec, examples, given=given)
  assert _ids(parts) == [given["train"], given["validation"], given["test"]]
  manifest = splits.load_split_manifest(path)
  assert manifest.fractions == (0.7, 0.15, 0.15)
  assert manifest.given_splits == ("train", "validation", "test")
  assert _ids(splits.split_with_manifest(path, spec, examples, seed=3, given=given)) == _ids(
      parts)
  with pytest.raises(ValueError, match="are not the ones split manifest"):
    splits.split_with_manifest(path, spec, _changed_text(examples), given=given)


@pytest.mark.parametrize("given, message", [
    ({"dev": ["a0"]}, r"Given split 'dev' of task 'toy' is not one of \['train', "),
    ({"test": ["a0", "zz"]}, r"names ids that are not among the examples, e.g. \['zz'\]"),
    ({"validation": ["a0"], "test": ["a0"]}, r"or ids of another given split, e.g. \['a0'\]"),
    ({"test": ["a0", "a1", "a0"]}, r"names ids twice or ids of another given split, e.g. "
     r"\['a0'\]"),
])
def test_bad_given_splits(given, message):
  spec, examples = _task()
  with pytest.raises(ValueError, match=message):
    splits.make_split_manifest(spec, examples, given=given)

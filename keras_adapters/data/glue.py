"""The GLUE benchmark as data: task specs, official file layouts and readers.

Two sources give the same `TextExamples` (same text fields, label ids and split names):

* `read_glue_split` reads the TSV files as the GLUE download script (`download_glue_data.py`)
  lays them out: `<data_dir>/<Folder>/{train,dev,test}.tsv`, with the folders `CoLA`, `SST-2`,
  `MRPC`, `STS-B`, `QQP`, `MNLI` (`dev_matched.tsv`, `dev_mismatched.tsv`, `test_matched.tsv`,
  `test_mismatched.tsv`), `QNLI`, `RTE`, `WNLI` and `diagnostic/diagnostic.tsv`.
* `read_glue_tfds` reads `glue/<config>` already prepared by TensorFlow Datasets under a local
  `data_dir`; it never downloads.

Split names follow TFDS: `train`, `validation`, `test`; MNLI has `validation_matched`,
`validation_mismatched`, `test_matched` and `test_mismatched`, and reads plain `validation` and
`test` as the matched ones. Label ids follow TFDS's class order, so models trained on either
source agree. Besides the nine tasks of `GLUE_TASKS`, `glue_task("ax")` names the diagnostic
set: a test split only, predicted by an MNLI model.
"""

import codecs
import dataclasses
import os
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_adapters.data import examples

_MNLI_LABELS = ("entailment", "neutral", "contradiction")
_NLI_LABELS = ("entailment", "not_entailment")
_BINARY_FILE_LABELS = ("0", "1")
# STS-B similarity scores are averaged human ratings on this scale.
STSB_SCORE_RANGE: Tuple[float, float] = (0.0, 5.0)


@dataclasses.dataclass(frozen=True)
class TsvLayout:
  """The columns of one GLUE file.

  Attributes:
    columns: Column names in file order: the header row, or for a file without one the names
      the official readers give its positions.
    has_header: Whether the first line is a header row.
    id_column: The column holding the example id; `None` numbers the rows from 0.
    label_column: The column holding the label; `None` for an unlabelled test file.
    bom: Whether the official file starts with a UTF-8 byte-order mark.
  """
  columns: Tuple[str, ...]
  has_header: bool = True
  id_column: Optional[str] = "index"
  label_column: Optional[str] = None
  bom: bool = False


@dataclasses.dataclass(frozen=True)
class GlueLayout:
  """Where a GLUE task's files are and how to read them.

  Attributes:
    spec: The task.
    folder: The task's folder under the GLUE data directory.
    text_columns: The file columns holding the texts, one per `spec.text_fields`.
    file_labels: The label strings of the files in class-id order; `None` for regression.
    files: Split name to (file name, layout).
    split_aliases: Other accepted split names, mapped to a key of `files`.
    empty_text_ok: Whether an empty text is part of the official data and kept.
  """
  spec: examples.TaskSpec
  folder: str
  text_columns: Tuple[str, ...]
  file_labels: Optional[Tuple[str, ...]]
  files: Mapping[str, Tuple[str, TsvLayout]]
  split_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
  empty_text_ok: bool = False

  def resolve_split(self, split: str) -> str:
    """Returns the split name `split` stands for, raising if the task has no such split."""
    split = self.split_aliases.get(split, split)
    if split not in self.files:
      raise ValueError(
          f"GLUE task {self.spec.name!r} has no split {split!r}; valid splits: "
          f"{', '.join([*self.files, *self.split_aliases])}.")
    return split

  def is_labelled(self, split: str) -> bool:
    """Returns whether the files of `split` hold labels (test files do not)."""
    return self.files[self.resolve_split(split)][1].label_column is not None


def _standard_files(labelled: TsvLayout, test: TsvLayout) -> Mapping[str, Tuple[str, TsvLayout]]:
  return {"train": ("train.tsv", labelled), "validation": ("dev.tsv", labelled),
          "test": ("test.tsv", test)}


def _indexed_files(*text_columns: str) -> Mapping[str, Tuple[str, TsvLayout]]:
  """Files of `index <texts> label`, the test file without the label (QNLI, RTE, WNLI)."""
  columns = ("index",) + text_columns
  return _standard_files(TsvLayout(columns + ("label",), label_column="label"),
                         TsvLayout(columns))


_STSB_COLUMNS = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
                 "sentence1", "sentence2")
_MRPC_COLUMNS = ("#1 ID", "#2 ID", "#1 String", "#2 String")
_MNLI_COLUMNS = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                 "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                 "sentence2")
_MNLI_TRAIN = TsvLayout(_MNLI_COLUMNS + ("label1", "gold_label"), label_column="gold_label")
# Dev files keep all five annotators' labels before the gold label.
_MNLI_DEV = TsvLayout(
    _MNLI_COLUMNS + ("label1", "label2", "label3", "label4", "label5", "gold_label"),
    label_column="gold_label")
_MNLI_TEST = TsvLayout(_MNLI_COLUMNS)

# The selection metric comes first: the one the paper (like BERT) reports on the GLUE server
# table, i.e. F1 for MRPC and QQP and Spearman for STS-B.
_LAYOUTS: Mapping[str, GlueLayout] = {layout.spec.name: layout for layout in (
    GlueLayout(
        spec=examples.TaskSpec("cola", ("sentence",), ("unacceptable", "acceptable"),
                               ("matthews_corrcoef",)),
        folder="CoLA", text_columns=("sentence",), file_labels=_BINARY_FILE_LABELS,
        # Train and dev files have no header; `original_label` is the source's "*" mark.
        files=_standard_files(
            TsvLayout(("source", "label", "original_label", "sentence"), has_header=False,
                      id_column=None, label_column="label"),
            TsvLayout(("index", "sentence")))),
    GlueLayout(
        spec=examples.TaskSpec("sst2", ("sentence",), ("negative", "positive")),
        folder="SST-2", text_columns=("sentence",), file_labels=_BINARY_FILE_LABELS,
        files=_standard_files(
            TsvLayout(("sentence", "label"), id_column=None, label_column="label"),
            TsvLayout(("index", "sentence")))),
    GlueLayout(
        spec=examples.TaskSpec("mrpc", ("sentence1", "sentence2"),
                               ("not_equivalent", "equivalent"), ("f1", "accuracy")),
        folder="MRPC", text_columns=("#1 String", "#2 String"), file_labels=_BINARY_FILE_LABELS,
        # The download script copies the header of Microsoft's msr_paraphrase_train.txt, BOM
        # included, into train.tsv and dev.tsv, and writes its own header into test.tsv.
        files=_standard_files(
            TsvLayout(("Quality",) + _MRPC_COLUMNS, id_column=None, label_column="Quality",
                      bom=True),
            TsvLayout(("index",) + _MRPC_COLUMNS))),
    GlueLayout(
        spec=examples.TaskSpec("stsb", ("sentence1", "sentence2"), None,
                               ("spearman", "pearson")),
        folder="STS-B", text_columns=("sentence1", "sentence2"), file_labels=None,
        files=_standard_files(TsvLayout(_STSB_COLUMNS + ("score",), label_column="score"),
                              TsvLayout(_STSB_COLUMNS))),
    GlueLayout(
        spec=examples.TaskSpec("qqp", ("question1", "question2"),
                               ("not_duplicate", "duplicate"), ("f1", "accuracy")),
        folder="QQP", text_columns=("question1", "question2"), file_labels=_BINARY_FILE_LABELS,
        files=_standard_files(
            TsvLayout(("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
                      id_column="id", label_column="is_duplicate"),
            TsvLayout(("id", "question1", "question2"), id_column="id")),
        # The official train.tsv has two rows with an empty question2; BERT's, TFDS's and
        # Hugging Face's readers keep them, and so does this one.
        empty_text_ok=True),
    GlueLayout(
        spec=examples.TaskSpec("mnli", ("premise", "hypothesis"), _MNLI_LABELS),
        folder="MNLI", text_columns=("sentence1", "sentence2"), file_labels=_MNLI_LABELS,
        files={"train": ("train.tsv", _MNLI_TRAIN),
               "validation_matched": ("dev_matched.tsv", _MNLI_DEV),
               "validation_mismatched": ("dev_mismatched.tsv", _MNLI_DEV),
               "test_matched": ("test_matched.tsv", _MNLI_TEST),
               "test_mismatched": ("test_mismatched.tsv", _MNLI_TEST)},
        split_aliases={"validation": "validation_matched", "test": "test_matched"}),
    GlueLayout(
        spec=examples.TaskSpec("qnli", ("question", "sentence"), _NLI_LABELS),
        folder="QNLI", text_columns=("question", "sentence"), file_labels=_NLI_LABELS,
        files=_indexed_files("question", "sentence")),
    GlueLayout(
        spec=examples.TaskSpec("rte", ("sentence1", "sentence2"), _NLI_LABELS),
        folder="RTE", text_columns=("sentence1", "sentence2"), file_labels=_NLI_LABELS,
        files=_indexed_files("sentence1", "sentence2")),
    GlueLayout(
        # WNLI files write 1 for entailment.
        spec=examples.TaskSpec("wnli", ("sentence1", "sentence2"),
                               ("not_entailment", "entailment")),
        folder="WNLI", text_columns=("sentence1", "sentence2"), file_labels=_BINARY_FILE_LABELS,
        files=_indexed_files("sentence1", "sentence2")),
    GlueLayout(
        # GLUE scores the diagnostic set with R3, the 3-class Matthews correlation.
        spec=examples.TaskSpec("ax", ("premise", "hypothesis"), _MNLI_LABELS,
                               ("matthews_corrcoef",)),
        folder="diagnostic", text_columns=("sentence1", "sentence2"), file_labels=_MNLI_LABELS,
        files={"test": ("diagnostic.tsv", TsvLayout(("index", "sentence1", "sentence2")))}),
)}

# The nine GLUE tasks in leaderboard order; the diagnostic set `ax` is not a task to train.
GLUE_TASKS: Mapping[str, examples.TaskSpec] = {
    name: layout.spec for name, layout in _LAYOUTS.items() if name != "ax"}

# Houlsby et al. (2019), like BERT, leave WNLI out of their tables and GLUE average: no model
# then beat predicting its majority class. WNLI stays readable and submittable.
PAPER_GLUE_TASKS: Tuple[str, ...] = tuple(name for name in GLUE_TASKS if name != "wnli")


def glue_layout(task: str) -> GlueLayout:
  """Returns the files and layouts of a GLUE task.

  Args:
    task: A task name, case, "-" and "_" ignored: "sst2", "SST-2", "STS-B", "ax", ...

  Returns:
    The task's `GlueLayout`.

  Raises:
    ValueError: `task` names no GLUE task; the message lists the valid names.
  """
  key = task.lower().replace("-", "").replace("_", "")
  if key not in _LAYOUTS:
    raise ValueError(
        f"Unknown GLUE task {task!r}; valid names: {', '.join(_LAYOUTS)} (case, '-' and '_' "
        "are ignored, so 'SST-2' works too).")
  return _LAYOUTS[key]


def glue_task(task: str) -> examples.TaskSpec:
  """Returns the `TaskSpec` of a GLUE task (see `glue_layout` for accepted names)."""
  return glue_layout(task).spec


def canonical_split(task: str, split: str) -> str:
  """Returns the split name `split` stands for, e.g. MNLI's "test" is "test_matched"."""
  return glue_layout(task).resolve_split(split)


def splits_for(task: str) -> Tuple[str, ...]:
  """Returns the labelled evaluation splits of a task, e.g. MNLI's matched and mismatched."""
  layout = glue_layout(task)
  return tuple(split for split in layout.files
               if split != "train" and layout.is_labelled(split))


def test_splits_for(task: str) -> Tuple[str, ...]:
  """Returns the unlabelled test splits of a task, whose predictions go to the GLUE server."""
  layout = glue_layout(task)
  return tuple(split for split in layout.files if not layout.is_labelled(split))


def file_labels(task: str) -> Optional[Sequence[str]]:
  """Returns the label strings a task's files use, in class-id order (`None` for STS-B)."""
  return glue_layout(task).file_labels


def _listing(folder: str) -> str:
  names = sorted(tf.io.gfile.listdir(folder))
  shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
  return shown or "nothing"


def _missing_file_message(data_dir: str, layout: GlueLayout, path: str) -> str:
  folder = os.path.join(data_dir, layout.folder)
  if not tf.io.gfile.isdir(data_dir):
    problem = f"The GLUE data_dir {data_dir} does not exist"
  elif not tf.io.gfile.isdir(folder):
    problem = f"There is no folder {folder} (data_dir holds {_listing(data_dir)})"
  else:
    problem = f"There is no file {path} ({folder} holds {_listing(folder)})"
  expected = ",".join(file_name for file_name, _ in layout.files.values())
  return (
      f"{problem}. GLUE task {layout.spec.name!r} is read from the layout of the GLUE download "
      f"script (download_glue_data.py): <data_dir>/{layout.folder}/{{{expected}}}. Pass as "
      f"data_dir the folder that holds {layout.folder}/, or read a prepared TFDS copy with "
      "read_glue_tfds.")


def _read_lines(path: str) -> Iterator[Tuple[int, str]]:
  """Yields (line number, text) for the non-blank lines of a UTF-8 file.

  Fields are split later on tabs alone: GLUE files have no quoting (like csv.QUOTE_NONE), and
  QQP and MNLI hold unbalanced quotes that a quoting reader would join across lines.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    for line_number, raw in enumerate(f, start=1):
      raw = raw.rstrip(b"\r\n")
      if line_number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        column = len(raw[:e.start].decode("utf-8", errors="replace")) + 1
        raise ValueError(
            f"{path}, line {line_number}, column {column}: byte 0x{raw[e.start]:02x} is not "
            "UTF-8. GLUE files are UTF-8: download the file again or re-encode it, e.g. "
            f"`iconv -f latin1 -t utf-8 {path}`.") from None
      # A trailing blank line (left by an editor) holds no example.
      if text:
        yield line_number, text


def _cell(fields: Sequence[str], position: Mapping[str, int], column: str,
          where: str) -> Tuple[str, str]:
  """Returns a row's value in `column` and its location for error messages."""
  index = position[column]
  return fields[index], f"{where}, column {index + 1} ({column})"


def _check_text(layout: GlueLayout, text: str, where: str) -> str:
  if not text.strip() and not layout.empty_text_ok:
    raise ValueError(
        f"{where}: the text is empty. Every {layout.spec.name} example needs its text; fix or "
        "delete this row.")
  return text


def _parse_label(layout: GlueLayout, value: str, where: str):
  if layout.file_labels is not None:
    if value not in layout.file_labels:
      raise ValueError(
          f"{where}: unknown label {value!r}; {layout.spec.name} labels are "
          f"{', '.join(layout.file_labels)}.")
    return layout.file_labels.index(value)
  try:
    score = float(value)
  except ValueError:
    score = float("nan")
  if not STSB_SCORE_RANGE[0] <= score <= STSB_SCORE_RANGE[1]:
    raise ValueError(
        f"{where}: score {value!r} is not a number in [{STSB_SCORE_RANGE[0]:g}, "
        f"{STSB_SCORE_RANGE[1]:g}], the STS-B similarity scale.")
  return score


def _to_examples(layout: GlueLayout, ids: List[str], texts: List[List[str]],
                 labels: Optional[List[Any]]) -> examples.TextExamples:
  if labels is not None:
    labels = np.asarray(labels, np.float32 if layout.spec.is_regression else np.int32)
  return examples.TextExamples(ids=ids, texts=tuple(texts), labels=labels)


def read_glue_split(data_dir: str, task: str, split: str) -> examples.TextExamples:
  """Reads one split of a GLUE task from the TSV files of the GLUE download script.

  Args:
    data_dir: The folder holding the task folders (`CoLA/`, `SST-2/`, ...).
    task: A GLUE task name, e.g. "sst2" or "SST-2" (see `glue_layout`).
    split: "train", "validation" or "test"; for MNLI also "validation_matched",
      "validation_mismatched", "test_matched" and "test_mismatched".

  Returns:
    The split, in file order. Ids are the file's `index` (or QQP `id`) column, or the row
    number counted from 0 in files without one; test splits have no labels.

  Raises:
    FileNotFoundError: The file is missing; the message names the expected path and layout.
    ValueError: A malformed file: a missing header column, a row with too few columns, an
      unknown label, an empty text, a repeated id or bytes that are not UTF-8. The message
      names the file, line and column.
  """
  layout = glue_layout(task)
  file_name, tsv = layout.files[layout.resolve_split(split)]
  path = os.path.join(data_dir, layout.folder, file_name)
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    raise FileNotFoundError(_missing_file_message(data_dir, layout, path))
  lines = _read_lines(path)
  wanted = [column for column in (tsv.id_column, *layout.text_columns, tsv.label_column)
            if column is not None]
  names = tsv.columns
  if tsv.has_header:
    _, header = next(lines, (1, ""))
    names = tuple(header.split("\t"))
    missing = [column for column in wanted if column not in names]
    if missing:
      official = "\t".join(tsv.columns)
      raise ValueError(
          f"{path}, line 1: the header lacks column(s) {', '.join(missing)}; the official "
          f"{layout.folder}/{file_name} header is {official!r} (tab-separated).")
  position = {column: names.index(column) for column in wanted}

  ids, texts, labels, first_seen = [], [[] for _ in layout.text_columns], [], {}
  for row, (line_number, text) in enumerate(lines):
    fields = text.split("\t")
    where = f"{path}, line {line_number}"
    # Extra trailing columns are ignored, as the official readers (csv.DictReader in TFDS,
    # positional in BERT's run_classifier.py) ignore them.
    if len(fields) < len(names):
      raise ValueError(
          f"{where}: expected {len(names)} tab-separated columns ({', '.join(names)}), found "
          f"{len(fields)}. A missing tab or a line break inside a text does this; GLUE files "
          "have no quoting. Fix or delete this row.")
    example_id = fields[position[tsv.id_column]] if tsv.id_column else str(row)
    if example_id in first_seen:
      raise ValueError(
          f"{where}: id {example_id!r} was already used on line {first_seen[example_id]}; "
          "every example needs its own id.")
    first_seen[example_id] = line_number
    ids.append(example_id)
    for column, column_texts in zip(layout.text_columns, texts):
      column_texts.append(_check_text(layout, *_cell(fields, position, column, where)))
    if tsv.label_column:
      labels.append(_parse_label(layout, *_cell(fields, position, tsv.label_column, where)))
  if not ids:
    raise ValueError(f"{path} holds no examples; download it again.")
  return _to_examples(layout, ids, texts, labels if tsv.label_column else None)


def glue_examples_from_features(task: str, split: str, rows: Iterable[Mapping[str, Any]],
                                source: str) -> examples.TextExamples:
  """Converts TFDS-style GLUE feature dicts to `TextExamples`.

  Args:
    task: A GLUE task name (see `glue_layout`).
    split: The split the rows come from; test splits carry no labels.
    rows: One dict per example with the task's text fields (bytes or str), an integer "idx"
      and, for labelled splits, a "label" (class id, or score for STS-B), as in TFDS's
      `glue/<config>` features.
    source: Where the rows come from, used in error messages.

  Returns:
    The examples sorted by "idx", i.e. in the order of the official files; ids are the idx.

  Raises:
    ValueError: A row lacks a feature, has an empty text or an out-of-range label.
  """
  layout = glue_layout(task)
  labelled = layout.is_labelled(split)
  needed = (*layout.spec.text_fields, "idx") + (("label",) if labelled else ())
  ids, texts, labels = [], [[] for _ in layout.spec.text_fields], []
  # TFDS stores examples in hashed order; idx numbers the rows of the source file.
  for row in sorted(rows, key=lambda row: int(row["idx"]) if "idx" in row else -1):
    missing = [name for name in needed if name not in row]
    if missing:
      raise ValueError(
          f"{source}: an example lacks feature(s) {', '.join(missing)}; glue/"
          f"{layout.spec.name} examples have {', '.join(needed)}.")
    where = f"{source}, idx {int(row['idx'])}"
    ids.append(str(int(row["idx"])))
    for field, field_texts in zip(layout.spec.text_fields, texts):
      text = row[field]
      text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
      field_texts.append(_check_text(layout, text, f"{where} ({field})"))
    if labelled:
      labels.append(_feature_label(layout, row["label"], f"{where} (label)"))
  return _to_examples(layout, ids, texts, labels if labelled else None)


def _feature_label(layout: GlueLayout, label, where: str):
  if layout.spec.is_regression:
    return _parse_label(layout, str(label), where)
  label = int(label)
  if not 0 <= label < layout.spec.num_classes:
    raise ValueError(
        f"{where}: label {label} is not a class id of {layout.spec.name} (0 to "
        f"{layout.spec.num_classes - 1}: {', '.join(layout.spec.label_names)}).")
  return label


def read_glue_tfds(task: str, split: str, data_dir: str) -> examples.TextExamples:
  """Reads one split of `glue/<config>` prepared by TensorFlow Datasets, without downloading.

  Args:
    task: A GLUE task name (see `glue_layout`).
    split: A split name as for `read_glue_split`.
    data_dir: The TFDS data directory holding `glue/<config>/<version>/`.

  Returns:
    The split, in the order of the official files; ids are TFDS's `idx`.

  Raises:
    FileNotFoundError: `glue/<config>` is not prepared under `data_dir`; raised at once,
      since preparing it would need network access.
    ValueError: The prepared dataset lacks the split, or holds malformed examples.
  """
  layout = glue_layout(task)
  split = layout.resolve_split(split)
  name = f"glue/{layout.spec.name}"
  # The builder only reads local metadata here; nothing is downloaded before `as_dataset`.
  builder = tfds.builder(name, data_dir=data_dir)
  if not builder.is_prepared():
    config_dir = os.path.dirname(builder.data_path)
    found = (f"; {config_dir} holds versions {_listing(config_dir)}, not {builder.version}"
             if tf.io.gfile.isdir(config_dir) else "")
    raise FileNotFoundError(
        f"No prepared TFDS dataset {name} under {data_dir} (looked for "
        f"{builder.data_path}{found}). read_glue_tfds never downloads. Supply either the GLUE "
        "folder of download_glue_data.py to read_glue_split(data_dir=...), or a TFDS "
        f"data_dir where `tfds build {name} --data_dir=...` ran on a machine with network "
        "access.")
  if split not in builder.info.splits:
    raise ValueError(
        f"{builder.data_path} has splits {', '.join(builder.info.splits)}, not {split!r}.")
  dataset = builder.as_dataset(split=split, shuffle_files=False)
  return glue_examples_from_features(
      task, split, tfds.as_numpy(dataset), source=f"{name} {split} in {builder.data_path}")

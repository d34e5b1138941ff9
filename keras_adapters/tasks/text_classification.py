"""Reads labelled text-classification data into a `TaskSpec` and `TextExamples`.

Four layouts are read: CSV, TSV and JSON Lines files with one text column and one label
column, and folder trees with one sub-folder of `.txt` files per class (`root/<class>/*.txt`).
Every problem in the data is reported with the file, the row or line and what to do about it.
"""

import csv
import dataclasses
import io
import json
import os
import re
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from absl import logging
import numpy as np

from keras_adapters.tasks import examples as examples_lib

TaskSpec = examples_lib.TaskSpec
TextExamples = examples_lib.TextExamples

# One encoding, or several to try in order for each file (the first that decodes it wins).
Encoding = Union[str, Sequence[str]]

_FOLDER_TEXT_FIELD = "text"
_FILE_FORMATS = (".csv", ".tsv", ".jsonl")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Python's csv module refuses fields over 131,072 characters by default; a long article is
# not a malformed file. The largest limit every platform's C long holds.
_CSV_FIELD_LIMIT = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class _Row:
  """One labelled text as read, before the label set is known."""
  id: str
  text: str
  label: str
  where: str  # File and row, line or path, for error messages.


def read_text_classification(
    path: str,
    *,
    text_column: str = "text",
    label_column: str = "label",
    label_names: Optional[Sequence[str]] = None,
    encoding: Encoding = "utf-8",
    name: Optional[str] = None,
    drop_empty: bool = False,
    deduplicate: bool = False) -> Tuple[TaskSpec, TextExamples]:
  """Reads a labelled text-classification source.

  `path` is a `.csv`, `.tsv` (tab-separated, no quoting) or `.jsonl` file with a header
  row or one JSON object per line, or a folder with one sub-folder of `.txt` files per class,
  whose names are the labels. Example ids are stable so that split manifests stay valid: the
  data row number for CSV and TSV (1 for the first row after the header), the line number
  for JSONL and the `<class>/<file>` path for folders.

  Args:
    path: The file or the root folder of the class folders.
    text_column: Column or JSON key holding the text; not used for folders.
    label_column: Column or JSON key holding the label; not used for folders.
    label_names: The classes in label-id order. By default the sorted distinct labels (in
      numeric order when every label is an integer), or the sorted class-folder names.
    encoding: Text encoding of the files, or several to try in order for each file, e.g.
      `("utf-8", "latin-1")` for a corpus with a few latin-1 files among utf-8 ones.
    name: Task name; by default the file name without extension or the folder name.
    drop_empty: Drop examples whose text is empty or only whitespace instead of raising.
      Spaces around a label are dropped, with a warning: `"positive "` is `"positive"`.
    deduplicate: Keep only the first example of each exact duplicate text.

  Returns:
    The task and all its examples, in source order (class folders and their files sorted by
    name).

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: The data is malformed; the message names the file, row and fix.
  """
  encodings = (encoding,) if isinstance(encoding, str) else tuple(encoding)
  if not encodings:
    raise ValueError("`encoding` is empty; pass an encoding such as \"utf-8\".")
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"{path} does not exist. Pass a {', '.join(_FILE_FORMATS)} file or a folder with "
        "one sub-folder of .txt files per class.")
  rows, text_field, default_name = _read_rows(path, text_column, label_column, encodings)
  rows = _filter_rows(rows, path, drop_empty=drop_empty, deduplicate=deduplicate)
  label_names = _label_names(rows, label_names, path)
  label_ids = {label: i for i, label in enumerate(label_names)}
  spec = TaskSpec(name=name or default_name, text_fields=(text_field,),
                  label_names=label_names)
  examples = TextExamples(
      ids=[row.id for row in rows],
      texts=([row.text for row in rows],),
      labels=np.array([label_ids[row.label] for row in rows], dtype=np.int32))
  return spec, examples


def select_examples(examples: TextExamples, indices: Sequence[int]) -> TextExamples:
  """Returns the examples at `indices`, in that order."""
  indices = np.asarray(indices, dtype=np.int64)
  return TextExamples(
      ids=[examples.ids[i] for i in indices],
      texts=tuple([field[i] for i in indices] for field in examples.texts),
      labels=None if examples.labels is None else examples.labels[indices])


def concatenate_examples(parts: Sequence[TextExamples]) -> TextExamples:
  """Returns the examples of `parts` one after the other; all labelled or all unlabelled."""
  labels = [part.labels for part in parts]
  if any(label is None for label in labels) and not all(label is None for label in labels):
    raise ValueError("Concatenated examples must all be labelled or all be unlabelled.")
  return TextExamples(
      ids=[example_id for part in parts for example_id in part.ids],
      texts=tuple([text for part in parts for text in part.texts[field]]
                  for field in range(len(parts[0].texts))),
      labels=None if labels[0] is None else np.concatenate(labels))


def _read_rows(path: str, text_column: str, label_column: str,
               encodings: Sequence[str]) -> Tuple[List[_Row], str, str]:
  """Reads every row of `path`; returns them, the text field name and the default task name."""
  if os.path.isdir(path):
    return (list(_read_class_folders(path, encodings)), _FOLDER_TEXT_FIELD,
            os.path.basename(os.path.normpath(path)))
  stem, extension = os.path.splitext(os.path.basename(path))
  extension = extension.lower()
  if extension not in _FILE_FORMATS:
    raise ValueError(
        f"{path}: unknown file extension {extension!r}; supported are "
        f"{', '.join(_FILE_FORMATS)} and class folders. Rename the file if it is in one of "
        "those formats.")
  text = _decode_file(path, encodings)
  if extension == ".jsonl":
    rows = _read_jsonl(path, text, text_column, label_column)
  else:
    rows = _read_delimited(path, text, text_column, label_column, is_tsv=extension == ".tsv")
  return list(rows), text_column, stem


def _decode_file(path: str, encodings: Sequence[str]) -> str:
  """Decodes a whole file with the first of `encodings` that fits all its bytes."""
  with open(path, "rb") as f:
    data = f.read()
  first_error = None
  for encoding in encodings:
    try:
      text = data.decode(encoding)
    except UnicodeDecodeError as e:
      first_error = first_error or (encoding, e)
      continue
    except LookupError as e:
      raise ValueError(f"Unknown encoding {encoding!r}: pass a Python codec name such as "
                       "\"utf-8\" or \"latin-1\".") from e
    if encoding != encodings[0]:
      logging.info("%s is not valid %s; read it as %s.", path, encodings[0], encoding)
    # Editors on Windows start utf-8 files with a byte-order mark; it is not part of the
    # text and would otherwise glue itself to the first column name.
    return text[1:] if text.startswith("\ufeff") else text
  encoding, error = first_error
  line = _line_number(data[:error.start].decode(encoding, errors="replace"))
  raise ValueError(
      f"{path}, line {line}: bytes {data[error.start:error.end]!r} are not valid {encoding}. "
      "Pass the file's encoding, e.g. encoding=\"latin-1\", or encoding=(\"utf-8\", "
      "\"latin-1\") to fall back to latin-1 only for files that are not valid utf-8.")


def _line_number(text_before: str) -> int:
  """The 1-based line on which the text after `text_before` starts."""
  # Counts \r, \n and \r\n alike, as the csv module and editors do.
  return len(_LINE_BREAK.findall(text_before)) + 1


def _read_delimited(path: str, text: str, text_column: str, label_column: str,
                    is_tsv: bool) -> Iterator[_Row]:
  """Yields the rows of a CSV or TSV file with a header row."""
  if is_tsv:
    # TSV has no quoting: a quote character is part of the text, as in the GLUE files.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t",
                        quoting=csv.QUOTE_NONE)
    layout_hint = "TSV fields cannot contain tabs or line breaks"
  else:
    # Strict parsing turns a stray or unclosed quote into an error instead of a row that
    # silently swallows the rows after it.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    layout_hint = "quote fields that contain commas, quotes or line breaks"
  field_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
  next_line = 1
  try:
    header = next(reader, None)
    if header is None:
      raise ValueError(f"{path} is empty; it needs a header row naming its columns.")
    text_index = _column_index(path, header, text_column, "text_column")
    label_index = _column_index(path, header, label_column, "label_column")
    row_number = 0
    next_line = reader.line_num + 1
    for fields in reader:
      first_line, next_line = next_line, reader.line_num + 1
      if not fields:  # A blank line is no record.
        continue
      row_number += 1
      where = f"{path}, row {row_number} (line {first_line})"
      if len(fields) != len(header):
        raise ValueError(
            f"{where}: has {len(fields)} fields but the header has {len(header)}; "
            f"{layout_hint}.")
      yield _Row(id=str(row_number), text=fields[text_index], label=fields[label_index],
                 where=where)
  except csv.Error as e:
    opening = None if is_tsv else _unclosed_quote_line(text, next_line)
    if opening is not None:
      raise ValueError(
          f"{path}, line {opening}: a quoted field opens here and its closing quote is "
          f"missing (the file ends inside it, at line {reader.line_num}); {layout_hint}, and "
          "double a quote inside a quoted field (\"\").") from e
    raise ValueError(f"{path}, line {reader.line_num}: not valid {'TSV' if is_tsv else 'CSV'}"
                     f" ({e}); {layout_hint}.") from e
  finally:
    csv.field_size_limit(field_limit)


def _unclosed_quote_line(text: str, first_line: int) -> Optional[int]:
  """The line of the quote that opens a field and is never closed, in the CSV records from
  line `first_line` on, or `None` if every quoted field there is closed."""
  in_quotes, field_start, opened_at = False, True, None
  index = _line_offset(text, first_line)
  while index < len(text):
    char = text[index]
    if in_quotes:
      if text.startswith('""', index):  # An escaped quote inside the field.
        index += 1
      elif char == '"':
        in_quotes = False
    elif char == '"' and field_start:
      in_quotes, opened_at = True, index
    field_start = not in_quotes and char in ",\r\n"
    index += 1
  return _line_number(text[:opened_at]) if in_quotes else None


def _line_offset(text: str, line: int) -> int:
  """The offset of the first character of 1-based `line` in `text`."""
  if line <= 1:
    return 0
  for count, match in enumerate(_LINE_BREAK.finditer(text), start=2):
    if count == line:
      return match.end()
  return len(text)


def _column_index(path: str, header: Sequence[str], column: str, argument: str) -> int:
  """The position of `column` in `header`, or an error listing the columns there are."""
  if column not in header:
    raise ValueError(
        f"{path}: no column {column!r} ({argument}); the columns are {list(header)}. Pass "
        f"{argument}= naming one of them.")
  if header.count(column) > 1:
    raise ValueError(
        f"{path}: the header names column {column!r} {header.count(column)} times; rename "
        f"the copies so that {argument} picks one.")
  return header.index(column)


def _read_jsonl(path: str, text: str, text_column: str, label_column: str) -> Iterator[_Row]:
  """Yields the rows of a JSON Lines file, one JSON object per line."""
  # JSON escapes line breaks inside strings, so only "\n" ends a record; str.splitlines()
  # would also split at U+2028 and other separators that JSON strings may hold raw.
  for line_number, line in enumerate(text.split("\n"), start=1):
    if not line.strip():
      continue
    where = f"{path}, line {line_number}"
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise ValueError(
          f"{where}, column {e.colno}: not valid JSON ({e.msg}); each line of a .jsonl file "
          "must hold one JSON object.") from e
    if not isinstance(record, dict):
      raise ValueError(
          f"{where}: holds a JSON {type(record).__name__}, not an object with the keys "
          f"{text_column!r} and {label_column!r}.")
    text_value = _json_value(record, text_column, "text_column", where)
    label_value = _json_value(record, label_column, "label_column", where)
    if not isinstance(text_value, str):
      raise ValueError(
          f"{where}: {text_column!r} is {json.dumps(text_value)[:40]}, not a string; every "
          "text must be a JSON string.")
    if not isinstance(label_value, (str, int)):
      raise ValueError(
          f"{where}: {label_column!r} is {json.dumps(label_value)[:40]}; class labels must "
          "be JSON strings or integers.")
    yield _Row(id=str(line_number), text=text_value, label=str(label_value), where=where)


def _json_value(record: dict, key: str, argument: str, where: str):
  """`record[key]`, or an error listing the keys the record has."""
  if key not in record:
    raise ValueError(
        f"{where}: no key {key!r} ({argument}); this line has the keys {sorted(record)}. "
        f"Pass {argument}= naming one of them.")
  return record[key]


def _read_class_folders(root: str, encodings: Sequence[str]) -> Iterator[_Row]:
  """Yields one row per `root/<class>/*.txt` file, folders and files sorted by name."""
  # Sorted, because os.scandir() and os.listdir() return filesystem order, which differs
  # between machines and would change example ids' order and the label ids.
  class_names = sorted(entry.name for entry in os.scandir(root)
                       if entry.is_dir() and not entry.name.startswith("."))
  if not class_names:
    raise ValueError(
        f"{root} has no class folders; expected {os.path.join(root, '<class>', '*.txt')} "
        "with one sub-folder per class.")
  for class_name in class_names:
    folder = os.path.join(root, class_name)
    # Hidden files include macOS "._name.txt" resource forks, which are not text.
    file_names = sorted(
        name for name in os.listdir(folder)
        if name.lower().endswith(".txt") and not name.startswith(".")
        and os.path.isfile(os.path.join(folder, name)))
    if not file_names:
      raise ValueError(
          f"{folder} has no .txt files; every class folder needs at least one example. Add "
          "examples or remove the folder.")
    for file_name in file_names:
      file_path = os.path.join(folder, file_name)
      yield _Row(id=f"{class_name}/{file_name}", text=_decode_file(file_path, encodings),
                 label=class_name, where=file_path)


def _filter_rows(rows: List[_Row], path: str, drop_empty: bool,
                 deduplicate: bool) -> List[_Row]:
  """Checks labels and texts, drops empty texts and duplicates where asked to."""
  padded = [row for row in rows if row.label != row.label.strip()]
  if padded:
    # "positive " would otherwise be a class of its own beside "positive".
    logging.warning(
        "%s: %d labels have spaces around them, e.g. %r at %s; they are read without them.",
        path, len(padded), padded[0].label, padded[0].where)
    rows = [dataclasses.replace(row, label=row.label.strip()) for row in rows]
  kept = []
  for row in rows:
    if not row.label.strip():
      raise ValueError(f"{row.where}: the label is empty; give every example a label.")
    if row.text.strip():
      kept.append(row)
    elif not drop_empty:
      raise ValueError(
          f"{row.where}: the text is empty. Fill it in or remove the example, or pass "
          "drop_empty=True to drop examples with empty texts.")
  if len(kept) < len(rows):
    logging.info("Dropped %d examples with empty texts from %s.", len(rows) - len(kept),
                 path)
  if deduplicate:
    kept = _deduplicate(kept, path)
  if not kept:
    raise ValueError(f"{path} holds no examples.")
  return kept


def _deduplicate(rows: List[_Row], path: str) -> List[_Row]:
  """Keeps the first row of each distinct text and logs how many were dropped."""
  first_label = {}
  kept = []
  relabelled = 0
  for row in rows:
    if row.text in first_label:
      relabelled += first_label[row.text] != row.label
    else:
      first_label[row.text] = row.label
      kept.append(row)
  logging.info(
      "Dropped %d exact duplicate texts from %s (%d labelled differently from the first "
      "copy, which is kept); %d examples left.", len(rows) - len(kept), path, relabelled,
      len(kept))
  return kept


def _label_names(rows: Sequence[_Row], label_names: Optional[Sequence[str]],
                 path: str) -> Tuple[str, ...]:
  """The given label set after checking every label is in it, or the sorted labels found."""
  if label_names is None:
    found = {row.label for row in rows}
    if all(re.fullmatch(r"[+-]?\d+", label) for label in found):
      # Class ids then match the numbers: "10" sorts after "9", not after "1".
      return tuple(sorted(found, key=lambda label: (int(label), label)))
    return tuple(sorted(found))
  label_names = tuple(label_names)
  if len(set(label_names)) < len(label_names):
    raise ValueError(f"label_names {list(label_names)} for {path} name a class twice; "
                     "give each class once.")
  allowed = set(label_names)
  for row in rows:
    if row.label not in allowed:
      raise ValueError(
          f"{row.where}: label {row.label!r} is not one of label_names "
          f"{list(label_names)}. Add it to label_names or fix the label.")
  return label_names

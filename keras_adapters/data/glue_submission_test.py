"""Tests for glue_submission."""

import os
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from keras_adapters.data import glue
from keras_adapters.data import glue_submission
from keras_adapters.data import glue_testing


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


class FileNameTest(parameterized.TestCase):

  @parameterized.parameters(
      ("cola", "test", "CoLA.tsv"),
      ("SST-2", "test", "SST-2.tsv"),
      ("mrpc", "test", "MRPC.tsv"),
      ("STS-B", "test", "STS-B.tsv"),
      ("qqp", "test", "QQP.tsv"),
      ("mnli", "test", "MNLI-m.tsv"),
      ("mnli", "test_matched", "MNLI-m.tsv"),
      ("mnli", "test_mismatched", "MNLI-mm.tsv"),
      ("qnli", "test", "QNLI.tsv"),
      ("rte", "test", "RTE.tsv"),
      ("wnli", "test", "WNLI.tsv"),
      ("ax", "test", "AX.tsv"),
  )
  def test_server_file_names(self, task, split, expected):
    self.assertEqual(glue_submission.submission_file_name(task, split), expected)

  def test_every_test_split_has_a_file_and_a_size(self):
    expected = {(task, split) for task in (*glue.GLUE_TASKS, "ax")
                for split in glue.test_splits_for(task)}
    self.assertEqual(set(glue_submission.SUBMISSION_FILES), expected)
    self.assertEqual(set(glue_submission.GLUE_TEST_SIZES),
                     set(glue_submission.SUBMISSION_FILES.values()))

  def test_validation_split_is_not_a_test_set(self):
    with self.assertRaisesRegex(ValueError, r"'rte' split 'validation' is not a GLUE test "
                                r"set; the server scores only cola/test, .*mnli/test_matched"):
      glue_submission.submission_file_name("rte", "validation")


class FormatTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("cola_digits", "cola", [1, 0], ["1", "0"]),
      ("qqp_digits", "qqp", [0, 1], ["0", "1"]),
      ("wnli_one_is_entailment", "wnli", [1, 0], ["1", "0"]),
      ("mnli_names", "mnli", [0, 1, 2], ["entailment", "neutral", "contradiction"]),
      ("ax_names", "ax", [2, 0], ["contradiction", "entailment"]),
      ("rte_names", "rte", [1, 0], ["not_entailment", "entailment"]),
      ("qnli_float_ids", "qnli", np.array([0., 1.]), ["entailment", "not_entailment"]),
      ("stsb_clipped_3_decimals", "stsb", [-0.4, 2.34567, 5.2, 1], ["0.000", "2.346", "5.000",
                                                                     "1.000"]),
      ("stsb_keras_column", "stsb", np.array([[4.25], [0.5]]), ["4.250", "0.500"]),
  )
  def test_predictions_as_the_files_write_labels(self, task, predictions, expected):
    self.assertEqual(glue_submission.format_predictions(task, predictions), expected)

  @parameterized.named_parameters(
      ("logits", "sst2", [[0.1, 0.9]], r"np.argmax"),
      ("class_out_of_range", "mnli", [3], r"class id 3, outside the 3 classes"),
      ("nan_score", "stsb", [np.nan], r"NaN"),
      ("empty", "cola", [], r"empty"),
  )
  def test_bad_predictions(self, task, predictions, message):
    with self.assertRaisesRegex(ValueError, message):
      glue_submission.format_predictions(task, predictions)


class WriteTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.output_dir = os.path.join(self.create_tempdir().full_path, "submission")

  def test_writes_header_and_rows_in_order(self):
    path = glue_submission.write_glue_submission(
        self.output_dir, "mnli", "test_mismatched", ["0", "1", "2"], [2, 0, 1])
    self.assertEqual(path, os.path.join(self.output_dir, "MNLI-mm.tsv"))
    self.assertEqual(_read(path),
                     "index\tprediction\n0\tcontradiction\n1\tentailment\n2\tneutral\n")
    self.assertEqual(os.listdir(self.output_dir), ["MNLI-mm.tsv"])

  def test_ids_of_a_read_test_split(self):
    data_dir = self.create_tempdir().full_path
    glue_testing.write_tiny_glue(data_dir, "stsb", num_examples=3)
    test = glue.read_glue_split(data_dir, "stsb", "test")
    path = glue_submission.write_glue_submission(self.output_dir, "stsb", "test", test.ids,
                                                 [1.0, 2.5, 9.0])
    self.assertEqual(_read(path), "index\tprediction\n0\t1.000\n1\t2.500\n2\t5.000\n")

  def test_failed_write_keeps_the_old_file_and_leaves_no_temp_file(self):
    path = glue_submission.write_glue_submission(self.output_dir, "rte", "test", ["0"], [0])
    with mock.patch.object(os, "replace", side_effect=OSError("disk full")):
      with self.assertRaisesRegex(OSError, "disk full"):
        glue_submission.write_glue_submission(self.output_dir, "rte", "test", ["0"], [1])
    self.assertEqual(_read(path), "index\tprediction\n0\tentailment\n")
    self.assertEqual(os.listdir(self.output_dir), ["RTE.tsv"])

  def test_rewrite_replaces_the_file(self):
    glue_submission.write_glue_submission(self.output_dir, "cola", "test", ["0", "1"], [0, 0])
    path = glue_submission.write_glue_submission(self.output_dir, "cola", "test", ["0"], [1])
    self.assertEqual(_read(path), "index\tprediction\n0\t1\n")

  def test_ids_and_predictions_differ_in_number(self):
    with self.assertRaisesRegex(ValueError, r"Got 2 ids but 1 predictions for CoLA.tsv"):
      glue_submission.write_glue_submission(self.output_dir, "cola", "test", ["0", "1"], [1])
    self.assertFalse(os.path.exists(self.output_dir))

  def test_repeated_id(self):
    with self.assertRaisesRegex(ValueError, r"Id '1' occurs more than once .* QQP.tsv"):
      glue_submission.write_glue_submission(self.output_dir, "qqp", "test", ["0", "1", "1"],
                                            [0, 1, 1])


class CheckTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.output_dir = self.create_tempdir().full_path
    self.sizes = {name: 2 for name in glue_submission.GLUE_TEST_SIZES}

  def _write_all(self):
    for task, split in glue_submission.SUBMISSION_FILES:
      glue_submission.write_glue_submission(self.output_dir, task, split, ["0", "1"], [0, 1])

  def test_complete_submission_passes(self):
    self._write_all()
    glue_submission.check_glue_submission(self.output_dir, self.sizes)

  def test_lists_every_problem(self):
    self._write_all()
    os.remove(os.path.join(self.output_dir, "AX.tsv"))
    glue_submission.write_glue_submission(self.output_dir, "wnli", "test", ["0"], [1])
    with open(os.path.join(self.output_dir, "RTE.tsv"), "w") as f:
      f.write("id\tlabel\n0\tentailment\n1\tentailment\n")
    with self.assertRaisesRegex(
        ValueError, r"would reject .*: RTE.tsv does not start with the header "
        r"'index\\tprediction'; WNLI.tsv has 1 predictions; its test set has 2; AX.tsv is "
        r"missing\."):
      glue_submission.check_glue_submission(self.output_dir, self.sizes)

  def test_official_sizes_by_default(self):
    self._write_all()
    with self.assertRaisesRegex(ValueError, r"QQP.tsv has 2 predictions; its test set has "
                                r"390965"):
      glue_submission.check_glue_submission(self.output_dir)


if __name__ == "__main__":
  absltest.main()

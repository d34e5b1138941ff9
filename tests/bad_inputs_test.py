"""Every case of bad_input_cases.py as a test of its own: the bad input or fault must end in a
clear error (the expected exception with a message naming the problem and the fix; from a CLI
the exit status and one line without a traceback) or the correct result, as the replay judges
it. Then the machinery of the replay: judging outcomes, replaying cases, the table, and that
it holds 40 cases or more of every class.

The cases share one workspace (the tiny models, data files, a finished run), as in the
replay, and so do the CLI cases' processes: they start with the first test, two at a time,
and run beside the library cases.
"""

import concurrent.futures
import re
import shutil
import subprocess
import tempfile

from absl.testing import parameterized
import tensorflow as tf

import bad_input_cases

from keras_adapters.utils import warm_python

_CASES = bad_input_cases.cases()


class BadInputCasesTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(prefix="bad_inputs_test_")
    cls.workspace = bad_input_cases.Workspace(cls.root)
    cls.pool = concurrent.futures.ThreadPoolExecutor(2)
    cls.started = bad_input_cases.start_cli_cases(cls.pool, _CASES, cls.workspace)

  @classmethod
  def tearDownClass(cls):
    cls.pool.shutdown(cancel_futures=True)
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  @parameterized.named_parameters(
      (f"{number:02d}_{re.sub(r'[^a-z0-9]+', '_', case.name.lower()).strip('_')}", case)
      for number, case in enumerate(_CASES, start=1))
  def test_case(self, case):
    outcome = (self.started[case.name].result() if case.cli
               else bad_input_cases.outcome_of(case, self.workspace))
    verdict, detail = case.judge(outcome)
    self.assertNotEqual(verdict, bad_input_cases.WRONG, f"{case.category}: {case.name}: {detail}")


def _process(returncode, stderr):
  return subprocess.CompletedProcess(["x.py"], returncode, stdout="", stderr=stderr)


class BadInputsTest(tf.test.TestCase):

  def test_an_error_is_clear_only_of_the_expected_type_and_message(self):
    judge = bad_input_cases.expect_error(ValueError, r"epochs=nan: must be")
    self.assertEqual(judge(("raised", ValueError("epochs=nan: must be positive.\nmore"))),
                     (bad_input_cases.CLEAR_ERROR, "epochs=nan: must be positive."))
    self.assertEqual(judge(("raised", TypeError("epochs=nan: must be positive")))[0],
                     bad_input_cases.WRONG)
    self.assertEqual(judge(("raised", ValueError("Tensor had NaN values")))[0],
                     bad_input_cases.WRONG)
    self.assertEqual(judge(("returned", {"accuracy": 0.3})),
                     (bad_input_cases.WRONG, "no error; returned {'accuracy': 0.3}"))

  def test_a_result_is_correct_only_when_checked(self):
    judge = bad_input_cases.expect_result(lambda value: None if value == 2 else "not 2", "two")
    self.assertEqual(judge(("returned", 2)), (bad_input_cases.CORRECT_RESULT, "two"))
    self.assertEqual(judge(("returned", 3)), (bad_input_cases.WRONG, "not 2"))
    self.assertEqual(judge(("raised", RuntimeError("boom"))), (bad_input_cases.WRONG,
                                                               "RuntimeError: boom"))

  def test_a_cli_error_is_one_line_with_its_status_and_no_traceback(self):
    judge = bad_input_cases.expect_cli_error(2, r"^x\.py: error: --epochs=nan")
    line = "x.py: error: --epochs=nan: must be positive and finite."
    self.assertEqual(judge(("returned", _process(2, line + "\n"))),
                     (bad_input_cases.CLEAR_ERROR, line))
    for process in (_process(1, line), _process(2, "Traceback (most recent call last):\n" + line),
                    _process(2, "2026 E cuda_platform.cc] failed call to cuInit\n" + line),
                    _process(2, "x.py: error: something else")):
      self.assertEqual(judge(("returned", process))[0], bad_input_cases.WRONG, process.stderr)
    failed = bad_input_cases.expect_cli_error(1, "Training diverged")
    self.assertEqual(failed(("returned", _process(
        1, "x.py: error: Training diverged at step 2\nRerun with --verbose for the "
        "traceback.\n")))[0], bad_input_cases.CLEAR_ERROR)

  def test_replay_runs_library_and_cli_cases_and_tabulates_them(self):
    script = "import sys; print('x.py: error: --seeds=abc: give numbers', file=sys.stderr); " \
             "sys.exit(2)"
    cases = [
        bad_input_cases.Case("8 messages", "library error", lambda ws: int(ws),
                        bad_input_cases.expect_error(ValueError, "invalid literal")),
        bad_input_cases.Case("7 CLI errors", "cli error", lambda ws: subprocess.run(
            warm_python.command("-c", script), capture_output=True, text=True, check=False),
                        bad_input_cases.expect_cli_error(2, "--seeds=abc"), cli=True),
        bad_input_cases.Case("1 reruns", "silent success", lambda ws: 42,
                        bad_input_cases.expect_error(ValueError, "anything")),
    ]
    rows = bad_input_cases.replay(cases, "abc")
    self.assertEqual([(row["number"], row["kind"], row["verdict"]) for row in rows],
                     [(1, "library", bad_input_cases.CLEAR_ERROR),
                      (2, "CLI", bad_input_cases.CLEAR_ERROR),
                      (3, "library", bad_input_cases.WRONG)])
    self.assertEqual(bad_input_cases.counts(rows), dict(
        total={bad_input_cases.CLEAR_ERROR: 2, bad_input_cases.WRONG: 1},
        by_category={"8 messages": {bad_input_cases.CLEAR_ERROR: 1},
                     "7 CLI errors": {bad_input_cases.CLEAR_ERROR: 1},
                     "1 reruns": {bad_input_cases.WRONG: 1}}))
    table = bad_input_cases.markdown_table(rows)
    self.assertIn("| 2 | 7 CLI errors | cli error (CLI) | clear error | x.py: error: "
                  "--seeds=abc: give numbers |", table)
    self.assertIn("3 cases: 2 clear errors, 0 correct results, 1 wrong.", table)

  def test_the_replay_covers_every_class_with_40_cases_or_more(self):
    cases = _CASES
    self.assertGreaterEqual(len(cases), 40)
    self.assertLen({case.name for case in cases}, len(cases))
    self.assertEqual(sorted({int(case.category.split()[0]) for case in cases}),
                     list(range(1, 11)))
    self.assertGreaterEqual(sum(case.cli for case in cases), 8)


if __name__ == "__main__":
  tf.test.main()

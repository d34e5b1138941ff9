"""End-to-end tests of the `experiments/run_analysis.py` command line.

In subprocesses, as a user runs it (the CLIs' flags cannot share one process), on the tiny
random encoder and a small CSV: the ablation study trains its one run, removes its adapters
from every span of the 2 layers, writes its JSON and figure, and a rerun trains nothing again;
the suite builds its table from hand-made comparisons without running anything; bad usage ends
with one line naming the flag, status 2 (a refusal of absl's parser and one of `main` as a user
meets them, the other refusals of `main` in one further process by `experiments.testing`).
"""

import concurrent.futures
import json
import os
import shutil
import subprocess

import tensorflow as tf

from keras_adapters.analysis import suite
from keras_adapters.hub import testing as hub_testing
from keras_adapters.tasks import testing
from keras_adapters.training import trainer
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
  env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
  return subprocess.run(warm_python.command(os.path.join("experiments", "run_analysis.py"), *args),
                        cwd=_REPO_ROOT, capture_output=True, text=True, check=False, env=env)


# Runs, in one process, each command line of stdin's JSON list through `cli_error` (as `cli.run`
# would) and prints the exit statuses and lines.
_CLI_ERRORS = """
import json, sys
from experiments import run_analysis
from experiments import testing
print(json.dumps([testing.cli_error(run_analysis.main, ["run_analysis.py", *args])
                  for args in json.load(sys.stdin)]))
"""


def _cli_errors(cases):
  """(exit status, lines) of each case's refusal by `run_analysis.main`, all in one process."""
  result = subprocess.run(warm_python.command("-c", _CLI_ERRORS), input=json.dumps(cases),
                          cwd=_REPO_ROOT, capture_output=True, text=True, check=True)
  return [(status, lines) for status, lines in json.loads(result.stdout.splitlines()[-1])]


def _main(argv):
  """Runs the command line with `argv`; returns what it printed, failing on an error."""
  result = _run(*argv)
  if result.returncode:
    raise AssertionError(f"run_analysis.py {' '.join(argv)} failed:\n{result.stderr[-4000:]}")
  return result.stdout


def _comparison(task, scores):
  rows = [dict(method=method, scores=[score, score + 1.0, score + 2.0], seeds=[0, 1, 2],
               mean=score + 1.0, sem=0.58, trainable_parameters=parameters,
               trainable_percent_of_base=100.0 * parameters / 1_000_000)
          for method, score, parameters in zip(suite.BERT_METHODS, scores,
                                               (20_000, 990_000, 300_000, 500, 2_500, 400))]
  return dict(task=task, metric="accuracy", eval_split="test", eval_examples=50,
              train_examples=2000, epochs=2.0, max_seq_length=128, batch_size=32, rows=rows)


class RunAnalysisTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "run_analysis_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    os.makedirs(cls.root)
    cls.model_flags = [
        f"--hub_handle={hub_testing.tiny_hub_handle()}",
        f"--preprocess_handle={hub_testing.tiny_preprocess_handle(testing.SEQ_LENGTH)}",
        f"--max_seq_length={testing.SEQ_LENGTH}", "--batch_size=8"]

  def test_ablation_study_writes_its_figure_and_resumes_without_work(self):
    data = testing.write_csv(os.path.join(self.root, "reviews.csv"))
    model_dir, results_dir = (os.path.join(self.root, name) for name in ("runs", "results"))
    argv = ["--study=ablation", f"--data_path={data}", "--text_column=review",
            "--label_column=sentiment", f"--model_dir={model_dir}",
            f"--results_dir={results_dir}", "--max_train_examples=0", "--epochs=1",
            f"--split_manifest={os.path.join(self.root, 'split.json')}", *self.model_flags]
    output = _main(argv)
    self.assertIn("Study ablation (Figure 6 (left, centre)) on reviews: 1 run(s), 0 finished "
                  "already. Budget cpu: 24 training examples, 1 epoch(s), batch 8, 16 tokens "
                  "max; scored on 3 validation examples.", output)
    self.assertRegex(output, r"Measured: 1 of 1 runs finished; \d+\.\d min of training")
    summary_path = os.path.join(results_dir, "analysis", "ablation.json")
    with open(summary_path, encoding="utf-8") as f:
      summary = json.load(f)
    self.assertTrue(summary["complete"])
    self.assertEqual(sorted(summary["ablation"]["scores"]), ["0-0", "0-1", "1-1", "none"])
    self.assertEqual(summary["ablation"]["changes"][1][0], None)  # Below the diagonal.
    with open(os.path.join(results_dir, "analysis", "ablation.png"), "rb") as f:
      self.assertTrue(f.read(8).startswith(b"\x89PNG"))
    (run,) = summary["runs"]
    marker = os.path.join(model_dir, run["name"], trainer.COMPLETION_MARKER)
    trained_at = os.path.getmtime(marker)

    output = _main(argv)
    self.assertIn("1 run(s), 1 finished already", output)
    self.assertEqual(os.path.getmtime(marker), trained_at)
    with open(summary_path, encoding="utf-8") as f:
      self.assertEqual(json.load(f)["ablation"], summary["ablation"])

  def test_suite_reads_complete_comparisons_and_writes_the_table(self):
    results_dir = os.path.join(self.root, "suite_results")
    for task, scores in (("airline", (80.0, 81.0, 82.0, 75.0, 78.0, 77.0)),
                         ("bbc_news", (95.0, 96.0, 97.0, 90.0, 93.0, 92.0))):
      os.makedirs(os.path.join(results_dir, task))
      with open(os.path.join(results_dir, task, "comparison.json"), "w",
                encoding="utf-8") as f:
        json.dump(_comparison(task, scores), f)
    model_dir = os.path.join(self.root, "suite_runs")
    output = _main(["--study=suite", "--tasks=airline,bbc_news", f"--results_dir={results_dir}",
                    f"--model_dir={model_dir}", *self.model_flags])
    self.assertFalse(os.path.exists(model_dir))  # Nothing was run.
    self.assertIn(f"No learning-rate study at {results_dir}/airline/analysis/learning_rate.json: "
                  "each method trains at its registered rate", output)
    self.assertIn("- `airline`: Crowdflower US airline tweets", output)
    self.assertIn("| average | | | | | 88.50 | 89.50 | 90.50 | 83.50 | 86.50 | 85.50 |", output)
    self.assertIn("| total params, 2 tasks | | | | | 1.04× (1.0M) | 1.98× (2.0M) |", output)
    with open(os.path.join(results_dir, "suite.md"), encoding="utf-8") as f:
      self.assertIn(f.read(), output)
    with open(os.path.join(results_dir, "suite.json"), encoding="utf-8") as f:
      self.assertEqual([task["task"] for task in json.load(f)["tasks"]],
                       ["airline", "bbc_news"])


class CommandLineErrorsTest(tf.test.TestCase):

  def test_bad_usage_is_one_line_naming_the_flag(self):
    # As a user runs it: refused by absl's parser (the value as typed), and by `main`.
    command_lines = {
        ("--study=nope",): "--study=nope",
        ("--study=init_scale", "--seeds=a"): "--seeds=a",
        ("--study=tradeoff", "--learning_rate=0.1"): "--learning_rate is set by --study=tradeoff",
        ("--study=adapter_drop", "--leave_out=0"): "--leave_out is set by --study=adapter_drop",
    }
    # `main`'s other refusals, each reported as `cli.run` reports it.
    in_one_process = {
        (): "--study is required",
        ("--study=suite", "--tasks=airline,nope"): "--tasks=airline,nope: nope is no built-in",
        ("--study=ablation", "--tasks=airline"): "--tasks is for --study=suite",
        ("--study=tradeoff", "--rerun=adapters"): "--rerun is for --study=suite",
        ("--study=suite", "--learning_rates_from=/nowhere/lr.json"):
            "--learning_rates_from=/nowhere/lr.json: no such file",
        ("--study=learning_rate", "--learning_rates_from=lr.json"):
            "--study=learning_rate selects the rates itself",
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
      reported = pool.submit(_cli_errors, [list(args) for args in in_one_process])
      results = dict(zip(command_lines, pool.map(lambda args: _run(*args), command_lines)))
    for args, expected in command_lines.items():
      result = results[args]
      lines = result.stderr.strip().splitlines()
      self.assertEqual(result.returncode, 2, (args, result.stderr))
      self.assertLen(lines, 1, (args, result.stderr))
      self.assertStartsWith(lines[0], "run_analysis.py: error: ")
      self.assertIn(expected, lines[0])
    for (args, expected), (status, lines) in zip(in_one_process.items(), reported.result()):
      self.assertEqual(status, 2, (args, lines))
      self.assertLen(lines, 1, (args, lines))
      self.assertIn(expected, lines[0])

if __name__ == "__main__":
  tf.test.main()

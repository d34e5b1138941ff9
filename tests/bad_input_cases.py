r"""Bad inputs and faults against the library and the CLIs, each with what must happen.

Each case is something a careless or unlucky user does (a rerun with other settings into the
same folder, a learning rate of 1e6, a label with a trailing space, a truncated checkpoint, a
flag of `nan`...), with what must happen: a clear error (the expected exception type with a
message naming the problem and the fix; for a CLI, exit status 2 for bad usage or 1 for a
failed run and one line, `script.py: error: ...`, without a traceback) or the correct result.
Anything else is `WRONG`. The cases run on the tiny random encoder of
`keras_adapters.hub.testing` and the tiny task of `keras_adapters.training.testing`, so the
whole replay takes minutes; the CLI cases run as subprocesses, beside the library ones.

`bad_inputs_test.py` runs each case of `cases()` as a test of its own, part of `pytest`;

  python bench/bad_inputs.py

replays the same cases, writes their verdicts to bench/results/bad_inputs.json and exits with
status 1 if a verdict is `WRONG`.
"""

import os

# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
import collections
import concurrent.futures
import dataclasses
import functools
import glob
import json
import logging as std_logging
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable, Optional, Sequence, Tuple
from unittest import mock

import numpy as np
import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.hub import default_model
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import task_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import squad
from keras_adapters.data import text_classification
from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import peft
from keras_adapters.models import merging
from keras_adapters.utils import quiet_logs
from keras_adapters.serving import multitask_export
from safetensors import numpy as safetensors_numpy
import tf_keras as keras
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.training import distribution
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLEAR_ERROR = "clear error"
CORRECT_RESULT = "correct result"
WRONG = "WRONG"

# What a case did: ("raised", the exception) or ("returned", the value).
Outcome = Tuple[str, Any]
# A verdict and what it is based on (the message, or what was checked).
Verdict = Tuple[str, str]


@dataclasses.dataclass(frozen=True)
class Case:
  """One bad input or fault.

  Attributes:
    category: The class of mistake it belongs to.
    name: What the user does.
    run: Does it, given the workspace; returns a value (a CLI case: its CompletedProcess).
    judge: Turns the outcome into a verdict.
    cli: Whether `run` starts a CLI process (these run concurrently).
  """
  category: str
  name: str
  run: Callable[["Workspace"], Any]
  judge: Callable[[Outcome], Verdict]
  cli: bool = False


def expect_error(error_type, pattern: str) -> Callable[[Outcome], Verdict]:
  """A clear error: `error_type` raised with a message matching `pattern`."""
  def judge(outcome):
    kind, value = outcome
    if kind == "raised" and isinstance(value, error_type) and re.search(pattern, str(value)):
      return CLEAR_ERROR, _first_line(str(value))
    if kind == "raised":
      return WRONG, f"{type(value).__name__}: {_first_line(str(value))}"
    return WRONG, f"no error; returned {str(value)[:200]}"
  return judge


def expect_result(check: Callable[[Any], Optional[str]],
                  what: str) -> Callable[[Outcome], Verdict]:
  """The correct result: `check(value)` returns `None` (or what is wrong)."""
  def judge(outcome):
    kind, value = outcome
    if kind == "raised":
      return WRONG, f"{type(value).__name__}: {_first_line(str(value))}"
    problem = check(value)
    return (WRONG, problem) if problem else (CORRECT_RESULT, what)
  return judge


# What a failed run's one error line is followed by (experiments/cli.py).
_VERBOSE_HINT = "Rerun with --verbose for the traceback."


def expect_cli_error(status: int, pattern: str) -> Callable[[Outcome], Verdict]:
  """A clear CLI error: exit `status`, no traceback, one error line matching `pattern`
  (status 1 adds the line pointing to --verbose)."""
  def judge(outcome):
    kind, process = outcome
    if kind == "raised":
      return WRONG, f"{type(process).__name__}: {process}"
    lines = process.stderr.strip().splitlines()
    expected_lines = 2 if status == 1 else 1
    problems = []
    if process.returncode != status:
      problems.append(f"exit status {process.returncode}, not {status}")
    if "Traceback" in process.stderr:
      problems.append("a traceback")
    if len(lines) != expected_lines:
      problems.append(f"{len(lines)} lines on stderr, not {expected_lines}")
    elif not re.search(pattern, lines[0]):
      problems.append("an unexpected message")
    elif status == 1 and lines[1] != _VERBOSE_HINT:
      problems.append("no line pointing to --verbose")
    if problems:
      return WRONG, f"{', '.join(problems)}: {' | '.join(lines)[-300:]}"
    return CLEAR_ERROR, lines[0]
  return judge


def outcome_of(case: Case, workspace: "Workspace") -> Outcome:
  """Runs one case."""
  try:
    return "returned", case.run(workspace)
  except Exception as error:  # pylint: disable=broad-except
    return "raised", error


def start_cli_cases(pool: concurrent.futures.Executor, cases: Sequence[Case],
                    workspace: "Workspace"):
  """Starts the CLI cases on `pool`, to run beside the library cases; returns their outcomes'
  futures by case name."""
  return {case.name: pool.submit(outcome_of, case, workspace) for case in cases if case.cli}


def replay(cases: Sequence[Case], workspace: "Workspace", cli_processes: int = 2):
  """Runs every case (CLI cases concurrently, beside the library ones); returns the rows."""
  with concurrent.futures.ThreadPoolExecutor(cli_processes) as pool:
    started = start_cli_cases(pool, cases, workspace)
    outcomes = {case.name: outcome_of(case, workspace) for case in cases if not case.cli}
    outcomes.update({name: future.result() for name, future in started.items()})
  rows = []
  for number, case in enumerate(cases, start=1):
    verdict, detail = case.judge(outcomes[case.name])
    rows.append(dict(number=number, category=case.category, case=case.name,
                     kind="CLI" if case.cli else "library", verdict=verdict, detail=detail))
  return rows


def counts(rows):
  """Per class of mistake, and in all, how many of `rows` ended in each verdict."""
  by_category = collections.defaultdict(collections.Counter)
  for row in rows:
    by_category[row["category"]][row["verdict"]] += 1
  total = collections.Counter(row["verdict"] for row in rows)
  return dict(total=dict(total),
              by_category={name: dict(counter) for name, counter in by_category.items()})


def markdown_table(rows) -> str:
  lines = ["| # | class | bad input or fault | verdict | what happened |",
           "|---|---|---|---|---|"]
  for row in rows:
    detail = row["detail"].replace("|", "\\|")
    lines.append(f"| {row['number']} | {row['category']} | {row['case']} ({row['kind']}) | "
                 f"{row['verdict']} | {detail[:160]}{'...' if len(detail) > 160 else ''} |")
  counts = {verdict: sum(row["verdict"] == verdict for row in rows)
            for verdict in (CLEAR_ERROR, CORRECT_RESULT, WRONG)}
  lines += ["", f"{len(rows)} cases: {counts[CLEAR_ERROR]} clear errors, "
            f"{counts[CORRECT_RESULT]} correct results, {counts[WRONG]} wrong."]
  return "\n".join(lines) + "\n"


def _first_line(text: str) -> str:
  return text.strip().splitlines()[0] if text.strip() else ""


class Workspace:
  """Temporary files the cases share: tiny models on disk, data files, one finished run."""

  def __init__(self, root: str):
    self.root = root
    self.hub_handle = hub_testing.tiny_hub_handle()
    self.preprocess_handle = hub_testing.tiny_preprocess_handle(testing.SEQ_LENGTH)
    self.spec, self.splits = testing.colour_task()
    self.config = testing.run_config()
    self.reviews = testing.write_csv(self.path("reviews.csv"))
    self.topics = testing.write_csv(self.path("topics.csv"), seed=1,
                                    labels=("politics", "sport"))

  def path(self, *parts: str) -> str:
    return os.path.join(self.root, *parts)

  def new_dir(self, name: str) -> str:
    return tempfile.mkdtemp(prefix=f"{name}_", dir=self.root)

  @functools.cached_property
  def finished_run(self) -> str:
    """A finished tiny run (3 steps); cases copy it before changing anything."""
    model_dir = self.path("finished_run")
    classification.run_task(self.spec, self.splits, self.config, model_dir, progress_bar=False)
    return model_dir

  def copy_of_finished_run(self) -> str:
    copy = os.path.join(self.new_dir("rerun"), "run")
    shutil.copytree(self.finished_run, copy)
    return copy

  def rerun(self, model_dir, spec=None, splits=None, config=None, **kwargs):
    return classification.run_task(spec or self.spec, splits or self.splits,
                                config or self.config, model_dir, progress_bar=False, **kwargs)

  def model(self, num_classes=3):
    return classifier.build_classifier(
        adapted_bert.AdaptedBert(self.hub_handle, adapter_size=4), num_classes)

  def lora_model(self):
    """A LoRA task on BERT's pooler: what peft's sequence classifiers are."""
    return classifier.build_classifier(
        adapted_bert.AdaptedBert(self.hub_handle, adapter_config=LoRAConfig(r=2)), 3,
        pooling="cls")

  def cli(self, script: str, *args: str) -> subprocess.CompletedProcess:
    """Runs an experiments/ script as a user's shell does."""
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(warm_python.command(os.path.join("experiments", script), *args),
                          cwd=_REPO_ROOT, capture_output=True, text=True, check=False, env=env)

  def classify(self, model_dir: str, *args: str, data_path: Optional[str] = None,
               adapter_size: Optional[int] = 4):
    """run_classification.py on a CSV with the tiny model, everything written under root;
    `adapter_size=None` leaves out --adapter_size (for a method without adapters)."""
    data_path = data_path or self.reviews
    name = os.path.splitext(os.path.basename(data_path))[0]
    return self.cli(
        "run_classification.py", f"--data_path={data_path}", "--text_column=review",
        "--label_column=sentiment", f"--model_dir={model_dir}",
        f"--split_manifest={self.path(name + '_split.json')}",
        f"--hub_handle={self.hub_handle}", f"--preprocess_handle={self.preprocess_handle}",
        f"--max_seq_length={testing.SEQ_LENGTH}", "--epochs=1",
        *([f"--adapter_size={adapter_size}"] if adapter_size else []),
        "--batch_size=8", "--max_train_examples=0", *args)


def _not_trained():
  return mock.patch.object(trainer_lib.Trainer, "_train_loop",
                           side_effect=AssertionError("trained again"))


def _same_run_returned(ws):
  model_dir = ws.copy_of_finished_run()
  with _not_trained():
    return ws.rerun(model_dir) == ws.rerun(ws.finished_run)


def _later_export(ws):
  model_dir, export_dir = ws.copy_of_finished_run(), ws.path("later_export")
  with _not_trained():
    results = ws.rerun(model_dir, export_dir=export_dir)
  served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
      "serving_default"](text=tf.constant(["w1 w2"]))["probabilities"]
  return results["export_dir"] == export_dir and served.shape == (1, 3)


def _changed_training_data(ws):
  texts = list(ws.splits["train"].texts[0])
  texts[0] = "w0 w1"
  train = dataclasses.replace(ws.splits["train"], texts=(texts,))
  return ws.rerun(ws.copy_of_finished_run(), splits=dict(ws.splits, train=train))


def _interrupted_run_with_other_rate(ws):
  model_dir = ws.copy_of_finished_run()
  for name in (run_records.RESULTS_FILE, trainer_lib.COMPLETION_MARKER):
    os.remove(os.path.join(model_dir, name))
  return ws.rerun(model_dir, config=ws.config.replace(learning_rate=1e-3))


def _comparison_with_other_epochs(ws):
  runs = ws.new_dir("comparison")
  shutil.copytree(ws.finished_run, os.path.join(runs, "adapters-seed0"))
  def must_not_run(*args, **kwargs):
    raise AssertionError("a run started")
  with mock.patch.dict(method_comparison.METHODS,
                       adapters=dict(tuning="adapters", adapter_size=4, learning_rate=1e-2)):
    return method_comparison.compare_methods(
        ws.spec, ws.splits, ws.config.replace(epochs=3.0), ["adapters"], [0],
        runs, os.path.join(runs, "results"), num_layers=2, run_fn=must_not_run)


def _nan_label_run(ws):
  """Returns the checkpoints left after a NaN loss at step 4, and the error."""
  model_dir = ws.new_dir("nan_label")
  labels = testing.REGRESSION_LABELS.copy()
  labels[3 * 8] = np.nan
  try:
    testing.regression_trainer(model_dir, labels=labels).train()
  except trainer_lib.TrainingDivergedError as error:
    return _checkpoints(model_dir), str(error)
  return _checkpoints(model_dir), "no error"


def _checkpoints(model_dir):
  return sorted(os.path.basename(path)[:-len(".index")]
                for path in glob.glob(os.path.join(model_dir, "ckpt-*.index")))


def _one_class_training_split(ws):
  train = ws.splits["train"]
  return ws.rerun(ws.path("one_class_run"), splits=dict(ws.splits, train=dataclasses.replace(
      train, labels=np.zeros(len(train), np.int32))))


def _labels_outside_the_classes(ws):
  test = ws.splits["test"]
  return classification.check_splits(ws.spec, dict(ws.splits, test=dataclasses.replace(
      test, labels=np.full(len(test), 7, np.int32))))


def _nan_regression_score(ws):
  spec = examples_lib.TaskSpec("scores", ("text",), None, ("pearson",))
  train = examples_lib.TextExamples(ids=["a", "b"], texts=(["w1", "w2"],),
                                    labels=np.array([0.5, np.nan], np.float32))
  return classification.check_splits(spec, dict(train=train))


def _users_folder_for_adapters(ws):
  folder = ws.new_dir("users_folder")
  with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as f:
    f.write("mine")
  try:
    saving.save_adapters(ws.model(), folder)
  finally:
    if os.listdir(folder) != ["notes.txt"]:
      raise AssertionError(f"the user's folder now holds {os.listdir(folder)}")


def _files_of(folder):
  """Each file's bytes, by name."""
  result = {}
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as f:
      result[name] = f.read()
  return result


def _users_files(ws, name):
  """A folder holding a user's notes and results."""
  folder = ws.new_dir(name)
  for file_name in ("notes.txt", "results.csv"):
    with open(os.path.join(folder, file_name), "w", encoding="utf-8") as f:
      f.write("mine")
  return folder


def _peft_folder(ws):
  """A peft adapter, as peft's `save_pretrained` wrote it (the config is what is checked)."""
  folder = ws.new_dir("peft_adapter")
  with open(os.path.join(folder, peft.CONFIG_FILE), "w", encoding="utf-8") as f:
    json.dump({"peft_type": "LORA", "task_type": "SEQ_CLS", "r": 8}, f)
  return folder


def _kept(write, folder):
  """Runs `write(folder)`; raises if the folder's files changed, whatever it raised."""
  before = _files_of(folder)
  try:
    return write(folder)
  finally:
    if _files_of(folder) != before:
      raise AssertionError(f"the folder's files changed: now {sorted(_files_of(folder))}")


def _users_folder_for_peft(ws, overwrite=False):
  folder = _users_files(ws, "users_folder_peft")
  if not overwrite:
    return _kept(lambda path: peft.save_peft(ws.lora_model(), path,
                                             base_model_name_or_path="tiny"), folder)
  peft.save_peft(ws.lora_model(), folder, base_model_name_or_path="tiny", overwrite=True)
  return _files_of(folder)


def _users_folder_as_export(ws):
  export_dir = ws.new_dir("export_over_user")
  os.makedirs(os.path.join(export_dir, "saved_model"))
  with open(os.path.join(export_dir, "saved_model", "notes.txt"), "w", encoding="utf-8"):
    pass
  return ws.rerun(ws.path("export_over_user_run"), export_dir=export_dir)


def _csv(ws, name, content):
  return _data_file(ws, name, content.encode("utf-8"))


def _data_file(ws, name, data: bytes, **kwargs):
  """Reads `data` written as the file `name`, as a user's export of it."""
  path = ws.path(name)
  with open(path, "wb") as f:
    f.write(data)
  return text_classification.read_text_classification(path, **kwargs)


def _labels_and_texts(result):
  spec, examples = result
  return tuple(spec.label_names), list(examples.texts[0])


def _split_files_with_other_columns(ws):
  """run_classification.py on three files, the validation file's columns named otherwise."""
  folder = ws.new_dir("split_files")
  rows = "".join(f"w{i} w{i + 1},{('bad', 'good')[i % 2]}\n" for i in range(8))
  for name, header in (("train", "review,sentiment"), ("dev", "text,label"),
                       ("test", "review,sentiment")):
    with open(os.path.join(folder, f"{name}.csv"), "w", encoding="utf-8") as f:
      f.write(f"{header}\n{rows}")
  return ws.cli("run_classification.py", *(f"--{flag}={os.path.join(folder, name)}.csv"
                                            for flag, name in (("train_file", "train"),
                                                               ("validation_file", "dev"),
                                                               ("test_file", "test"))),
                "--text_column=review", "--label_column=sentiment",
                f"--model_dir={os.path.join(folder, 'run')}",
                f"--hub_handle={ws.hub_handle}", f"--preprocess_handle={ws.preprocess_handle}",
                f"--max_seq_length={testing.SEQ_LENGTH}")


def _squad_file(ws, name, text, version="1.1", **question):
  path = ws.path(name)
  context = "Super Bowl 50 was played at Levi's Stadium."
  qa = dict(id="q1", question="Where?", answers=[dict(text="Levi's Stadium", answer_start=28)],
            **question)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text + json.dumps({"version": version, "data": [
        {"title": "x", "paragraphs": [{"context": context, "qas": [qa]}]}]}))
  return squad.read_squad_file(path, training=False).question_ids


def _unwritable_model_cache(ws):
  del ws  # The cache is the variable's.
  with mock.patch.dict(os.environ, KERAS_ADAPTERS_CACHE="/sys/kernel/keras_adapters_cache"):
    return default_model.default_hub_handle()


def _vocab_beyond_the_encoder(ws):
  handle = hub_testing.tiny_preprocess_handle(vocab_size=100)
  return ws.rerun(ws.path("big_vocab_run"), config=ws.config.replace(preprocess_handle=handle))


def _unknown_words_on_an_encoder_without_vocab(ws):
  """Trains on texts the preprocessing model does not know, with an encoder read as one that
  records no vocab (as older exports do): only the [UNK] rate can tell they do not belong."""
  read = hub_encoder.read_hub_encoder
  without_vocab = lambda handle: dataclasses.replace(read(handle), tokenizer=None)
  train = dataclasses.replace(ws.splits["train"],
                              texts=[["words of another vocabulary"] * len(ws.splits["train"])])
  with mock.patch.object(hub_encoder, "read_hub_encoder", without_vocab):
    return ws.rerun(ws.path("unknown_words_run"), splits=dict(ws.splits, train=train))


def _truncated_latest_checkpoint(ws):
  """Returns the step the run resumed from after ckpt-3 of a 3-step run was cut short."""
  model_dir = ws.new_dir("truncated")
  testing.regression_trainer(model_dir, num_train_steps=3).train()
  os.remove(os.path.join(model_dir, trainer_lib.COMPLETION_MARKER))
  data_file, = glob.glob(os.path.join(model_dir, "ckpt-3.data-*"))
  with open(data_file, "r+b") as f:
    f.truncate(os.path.getsize(data_file) // 2)
  return testing.regression_trainer(model_dir, num_train_steps=3).train().start_step


def _recommended_options(ws, content, flag):
  """The data fails as it is; the flag its message recommends then reads it."""
  name = "recommended_" + flag.strip("-").split("=")[0]
  path = ws.path(name + ".csv")
  with open(path, "wb") as f:
    f.write(content)
  manifest = ws.path(name + "_split.json")
  common = ["--text_column=review", "--label_column=sentiment", f"--model_dir={ws.root}",
            f"--data_path={path}", f"--split_manifest={manifest}"]
  code = ("import sys; from absl import flags; from experiments import run_classification; "
          "flags.FLAGS(['x'] + sys.argv[1:]); from experiments import cli\n"
          "try:\n  spec, splits = run_classification.load_splits()\n"
          "  print('read', sum(len(s) for s in splits.values()))\n"
          "except ValueError as e:\n  print('error', cli.flag_message(str(e)))")
  outputs = []
  for extra in ([], [flag]):
    process = subprocess.run(warm_python.command("-c", code, *common, *extra), cwd=_REPO_ROOT,
                             capture_output=True, text=True, check=False)
    outputs.append(process.stdout.strip().splitlines()[-1] if process.stdout.strip() else
                   process.stderr[-300:])
  return outputs


def _leftovers_of_a_killed_write(ws):
  folder = ws.new_dir("leftovers")
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  os.makedirs(os.path.join(folder, f".export.partial-{dead.pid}-abcdefgh", "variables"))
  with open(os.path.join(folder, f".results.json.partial-{dead.pid}-a1b2c3d4"), "w"):
    pass
  atomic_io.write_json(os.path.join(folder, "results.json"), {})
  with atomic_io.atomic_directory(os.path.join(folder, "export")):
    pass
  return sorted(os.listdir(folder))


def _checkpoint_leftovers(ws):
  model_dir = ws.new_dir("ckpt_leftovers")
  os.makedirs(os.path.join(model_dir, "ckpt-3_temp", "part-00000-of-00001"))
  with open(os.path.join(model_dir, "ckpt-3.index.tempstate99"), "wb"):
    pass
  testing.regression_trainer(model_dir, num_train_steps=1).train()
  return sorted(name for name in os.listdir(model_dir) if "temp" in name)


def _config_file(ws, name, text):
  """The run's settings overridden by a YAML config file of `text`, or its error."""
  path = ws.path(name)
  if text is not None:
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  return config_definitions.override_dict(ws.config.as_dict(), path)


def _strategy_under_tf_config(value):
  with mock.patch.dict(os.environ, TF_CONFIG=value):
    return distribution.get_strategy("multi_worker_mirrored")


def _model_dir_without_network(ws):
  """A gs:// model_dir while Cloud Storage cannot be reached (its error without network)."""
  no_network = tf.errors.FailedPreconditionError(
      None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
      "hostname', error details: Could not resolve host: www.googleapis.com")
  exists = tf.io.gfile.exists

  def exists_offline(path):
    if str(path).startswith("gs://"):
      raise no_network
    return exists(path)

  with mock.patch.object(tf.io.gfile, "exists", side_effect=exists_offline), _not_trained():
    return ws.rerun("gs://a-bucket/runs/colours")


# AdapterHub's own adapter folder (adapters 1.3.0), as the interop tests read it.
_ADAPTERHUB_FIXTURE = os.path.join(_REPO_ROOT, "keras_adapters", "interop", "testdata",
                                   "adapterhub", "houlsby")


def _truncated_adapterhub_download(ws):
  folder = os.path.join(ws.new_dir("adapterhub"), "adapter")
  shutil.copytree(_ADAPTERHUB_FIXTURE, folder)
  path = os.path.join(folder, adapterhub.WEIGHTS_FILE)
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 3])
  return adapterhub.load_adapterhub(folder)


def _static_batch_larger_than_the_data(ws):
  model_dir = os.path.join(ws.new_dir("jit"), "run")
  try:
    return ws.rerun(model_dir, config=ws.config.replace(jit_compile=True, batch_size=1000))
  finally:
    if os.path.exists(model_dir):
      raise AssertionError(f"{model_dir} was written before the refusal")


# LoRA, (IA)^3, peft and AdapterHub files, and merging (round five): each refused with one
# line naming what to fix, or done right.


def _saved_peft(ws, edit_config=None, edit_tensors=None, config=None):
  """A peft adapter of a LoRA task that `save_peft` wrote, its config and tensors edited."""
  folder = os.path.join(ws.new_dir("peft"), "adapter")
  model = ws.lora_model() if config is None else classifier.build_classifier(
      adapted_bert.AdaptedBert(ws.hub_handle, adapter_config=config), 3, pooling="cls")
  peft.save_peft(model, folder, base_model_name_or_path="tiny")
  if edit_config:
    path = os.path.join(folder, peft.CONFIG_FILE)
    values = atomic_io.read_json(path)
    edit_config(values)
    atomic_io.write_json(path, values)
  if edit_tensors:
    path = os.path.join(folder, peft.WEIGHTS_FILE)
    tensors = safetensors_numpy.load_file(path)
    edit_tensors(tensors)
    safetensors_numpy.save_file(tensors, path, {"format": "pt"})
  return folder


def _load_saved_peft(ws, **edits):
  return peft.load_peft(_saved_peft(ws, **edits), base_handle=ws.hub_handle)


def _saved_adapterhub(ws, edit_config=None):
  folder = os.path.join(ws.new_dir("adapterhub_lora"), "adapter")
  adapterhub.save_adapterhub(ws.lora_model(), folder, model_name="tiny")
  if edit_config:
    path = os.path.join(folder, adapterhub.CONFIG_FILE)
    values = atomic_io.read_json(path)
    edit_config(values)
    atomic_io.write_json(path, values)
  return folder


def _merged_lora_model(ws):
  model = ws.lora_model()
  merging.merge(model)
  return model


def _merged_then_written(ws, write):
  folder = os.path.join(ws.new_dir("merged"), "out")
  try:
    return write(_merged_lora_model(ws), folder)
  finally:
    if os.path.exists(folder):
      raise AssertionError(f"{folder} was written")


def _merged_then_trained(ws):
  """The warnings `fit` logs for a merged model: one, saying only the head trains."""
  model = _merged_lora_model(ws)
  model.compile(optimizer=keras.optimizers.SGD(0.1),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  records = []
  handler = std_logging.Handler(std_logging.WARNING)
  handler.emit = records.append
  std_logging.getLogger("absl").addHandler(handler)
  try:
    # At absl's warning level whatever the process set (the replay logs errors only): the
    # case is whether a user at the default level is told.
    with quiet_logs.absl_warnings_only():
      model.fit(_tiny_inputs(), tf.constant([0, 2]), epochs=2, verbose=0)
  finally:
    std_logging.getLogger("absl").removeHandler(handler)
  return [r.getMessage() for r in records if "merged into its base" in r.getMessage()]


def _tiny_inputs():
  ids = tf.constant([[2, 5, 7, 9, 3, 0], [2, 11, 3, 0, 0, 0]])
  return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
              input_type_ids=tf.zeros_like(ids))


def _half_precision_peft(ws):
  """Logits of a bfloat16 peft file, against the float32 model's: close, as a cast gives."""
  model = ws.lora_model()
  folder = os.path.join(ws.new_dir("peft_bf16"), "adapter")
  peft.save_peft(model, folder, base_model_name_or_path="tiny")
  path = os.path.join(folder, peft.WEIGHTS_FILE)
  tensors = safetensors_numpy.load_file(path)
  safetensors_numpy.save_file({name: value.astype(tf.bfloat16.as_numpy_dtype)
                               for name, value in tensors.items()}, path, {"format": "pt"})
  loaded = peft.load_peft(folder, base_handle=ws.hub_handle)
  return float(np.abs(loaded(_tiny_inputs(), training=False)
                      - model(_tiny_inputs(), training=False)).max())


def _pooler_lora_through_peft(ws):
  """A LoRA on every dense layer and the pooler's, as peft's ["query", "key", "value",
  "dense"]: written, read back; the largest logit difference."""
  config = LoRAConfig(r=2, target_modules=("query", "key", "value", "attention_output",
                                           "intermediate", "output", "pooler"))
  model = classifier.build_classifier(
      adapted_bert.AdaptedBert(ws.hub_handle, adapter_config=config), 3, pooling="cls")
  for variable in model.trainable_variables:
    variable.assign(np.random.default_rng(0).normal(scale=0.3, size=variable.shape))
  folder = os.path.join(ws.new_dir("peft_pooler"), "adapter")
  peft.save_peft(model, folder, base_model_name_or_path="tiny")
  names = atomic_io.read_json(os.path.join(folder, peft.CONFIG_FILE))["target_modules"]
  loaded = peft.load_peft(folder, base_handle=ws.hub_handle)
  return sorted(names), float(np.abs(loaded(_tiny_inputs(), training=False)
                                     - model(_tiny_inputs(), training=False)).max())


def _peft_dict_as_adapter_config(ws):
  values = atomic_io.read_json(os.path.join(_saved_peft(ws), peft.CONFIG_FILE))
  return adapted_bert.AdaptedBert(ws.hub_handle, adapter_config=values)


def _classify_leaves_nothing(ws, name, *args):
  """run_classification.py with `args` and no --adapter_size; raises if it wrote anything."""
  model_dir = os.path.join(ws.new_dir(name), "run")
  result = ws.classify(model_dir, *args, adapter_size=None)
  if os.path.exists(model_dir):
    raise AssertionError(f"the refused run wrote {sorted(os.listdir(model_dir))}")
  return result


def _is(expected):
  return lambda value: None if value == expected else f"got {value!r}, not {expected!r}"


def cases() -> Sequence[Case]:
  """Every case, by class of mistake."""
  rerun, compare, base, diverge = ("1 reruns", "2 comparison", "3 base limits",
                                   "4 divergence")
  data, files, cli, message, writes = ("5 suspicious data", "6 user files", "7 CLI errors",
                                       "8 messages", "9 interrupted writes")
  methods = "10 LoRA, (IA)3, peft and merging"
  merged = (r"were merged into its base \(keras_adapters\.merge\), so it has no adapter set "
            r"left for ")
  lora_b = "base_model.model.bert.encoder.layer.1.attention.self.value.lora_B.weight"
  other_settings = r"holds a run with other settings: "
  return [
      Case(rerun, "rerun of a finished run into its folder, same settings",
           _same_run_returned, expect_result(_is(True), "the recorded results, not trained")),
      Case(rerun, "rerun into the folder of another task",
           lambda ws: ws.rerun(ws.copy_of_finished_run(),
                               spec=dataclasses.replace(ws.spec, name="topics")),
           expect_error(run_records.RunSettingsError, other_settings + "task 'colours' there")),
      Case(rerun, "rerun with other epochs and learning rate",
           lambda ws: ws.rerun(ws.copy_of_finished_run(),
                               config=ws.config.replace(epochs=3.0, learning_rate=1e-3)),
           expect_error(run_records.RunSettingsError, "learning_rate=0.01 there, "
                        "learning_rate=0.001 now; epochs=1.0 there, epochs=3.0 now")),
      Case(rerun, "rerun with one training text changed", _changed_training_data,
           expect_error(run_records.RunSettingsError, r"training data of 18 examples")),
      Case(rerun, "resuming an interrupted run with another learning rate",
           _interrupted_run_with_other_rate,
           expect_error(run_records.RunSettingsError, "learning_rate=0.01 there")),
      Case(rerun, "export asked for on a rerun of a finished run", _later_export,
           expect_result(_is(True), "exported from the final checkpoint, serves strings")),
      Case(rerun, "CLI rerun of another --data_path task into the same --model_dir",
           lambda ws: (ws.classify(ws.path("cli_run")),
                       ws.classify(ws.path("cli_run"), data_path=ws.topics))[1],
           expect_cli_error(2, r"run_classification\.py: error: .*cli_run holds a run with "
                            r"other settings: task 'reviews' there, 'topics' now; label names "
                            r"\['bad', 'good', 'meh'\] there, \['politics', 'sport'\] now; "
                            r"training data of 24 examples \(sha256:.*Use a new "
                            r"--model_dir=<folder> for the new settings, or the recorded ones to "
                            r"resume or reuse that run\.$"), cli=True),
      Case(compare, "comparison with --epochs=3 into the runs of --epochs=1",
           _comparison_with_other_epochs,
           expect_error(run_records.RunSettingsError, "adapters-seed0 " + other_settings +
                        r"epochs=1\.0 there, epochs=3\.0 now")),
      Case(base, "run_task with max_seq_length above the position embeddings",
           lambda ws: ws.rerun(ws.path("too_long"), config=ws.config.replace(max_seq_length=40)),
           expect_error(ValueError, "max_seq_length=40 is more than the base encoder's 32 "
                        "position embeddings: give max_seq_length=32 or less")),
      Case(base, "export_task(seq_length=512) on a 32-position encoder",
           lambda ws: task_export.export_task(ws.model(), hub_testing.tiny_preprocessor(),
                                              ws.path("long_export"), seq_length=512,
                                              label_names=["a", "b", "c"]),
           expect_error(ValueError, "seq_length=512 is more than the base encoder's 32")),
      Case(base, "CLI --max_seq_length=40 on a 32-position encoder",
           lambda ws: ws.classify(ws.path("cli_too_long"), "--max_seq_length=40"),
           expect_cli_error(2, r"error: --max_seq_length=40 is more than the base encoder's "
                            r"32 position embeddings: give --max_seq_length=32 or less\."),
           cli=True),
      Case(diverge, "Trainer with learning rate 1e6 (finite losses of 1e9 and more)",
           lambda ws: testing.regression_trainer(ws.new_dir("lr1e6"), 1e6).train(),
           expect_error(trainer_lib.TrainingDivergedError, r"diverged at step 1: the update "
                        r"left the trainable weights with global norm .* last good "
                        r"checkpoint is none.*new model_dir=<folder>")),
      Case(diverge, "run_task with learning_rate=1e6",
           lambda ws: ws.rerun(ws.path("lr1e6_run"), config=ws.config.replace(learning_rate=1e6)),
           expect_error(trainer_lib.TrainingDivergedError, r"Training diverged at step \d+")),
      Case(diverge, "NaN loss at step 4: the checkpoint that gave it goes, the earlier stay",
           _nan_label_run,
           expect_result(lambda value: None if value[0] == ["ckpt-1", "ckpt-2"] and
                         "last good checkpoint is" in value[1] and "ckpt-2" in value[1]
                         else f"checkpoints {value[0]}: {value[1][:200]}",
                         "ckpt-3 deleted, ckpt-1 and ckpt-2 kept and named")),
      Case(diverge, "CLI --learning_rate=1e6",
           lambda ws: ws.classify(ws.path("cli_lr1e6"), "--learning_rate=1e6"),
           expect_cli_error(1, r"error: Training diverged at step \d+: .*Lower the learning "
                            r"rate \(now --learning_rate=1e\+06\) and train again in a new "
                            r"--model_dir=<folder>"), cli=True),
      Case(data, "a label with a trailing space",
           lambda ws: _csv(ws, "spaces.csv", "text,label\nw1,good\nw2,good \nw3,bad\n")[0]
           .label_names, expect_result(_is(("bad", "good")), "one class 'good', a warning")),
      Case(data, "CLI --max_train_examples=-5",
           lambda ws: ws.cli("run_classification.py", "--max_train_examples=-5"),
           expect_cli_error(2, r"error: --max_train_examples=-5: -5 is not a non-negative "
                            "integer"), cli=True),
      Case(data, "a training split with one class", _one_class_training_split,
           expect_error(ValueError, "has examples of one class only, 'red' .*learns nothing")),
      Case(data, "a split made of data with one class",
           lambda ws: splits_lib.make_split_manifest(ws.spec, dataclasses.replace(
               ws.splits["train"], labels=np.zeros(18, np.int32))),
           expect_error(ValueError, "one class only")),
      Case(data, "build_classifier(encoder, 0)",
           lambda ws: classifier.build_classifier(
               adapted_bert.AdaptedBert(ws.hub_handle, adapter_size=4), 0),
           expect_error(ValueError, r"num_classes=0: give the number of classes")),
      Case(data, "export_task with three label names for two logits",
           lambda ws: task_export.export_task(ws.model(2), hub_testing.tiny_preprocessor(),
                                              ws.path("two_logits"), seq_length=16,
                                              label_names=["a", "b", "c"]),
           expect_error(ValueError, r"names 3 classes, but the model has 2 logits")),
      Case(data, "class ids outside the task's classes", _labels_outside_the_classes,
           expect_error(ValueError, r"has the label 7 .*outside the class ids 0\.\.\.2")),
      Case(data, "a regression score that is NaN", _nan_regression_score,
           expect_error(ValueError, "has a score that is not a finite number: example 'b'")),
      Case(data, "a semicolon-separated .csv",
           lambda ws: _labels_and_texts(_data_file(ws, "semicolons.csv",
                                                   b"text;label\nw1, w2;pos\nw3;neg\n")),
           expect_result(_is((("neg", "pos"), ["w1, w2", "w3"])), "read, delimiter found")),
      Case(data, "a tab-separated .csv",
           lambda ws: _labels_and_texts(_data_file(ws, "tabs.csv",
                                                   b"text\tlabel\nw1, w2\tpos\nw3\tneg\n")),
           expect_result(_is((("neg", "pos"), ["w1, w2", "w3"])), "read, delimiter found")),
      Case(data, "a pipe-separated .csv with --delimiter=pipe",
           lambda ws: _labels_and_texts(_data_file(ws, "pipes.csv",
                                                   b"text|label\nw1, w2|pos\nw3|neg\n",
                                                   delimiter="pipe")),
           expect_result(_is((("neg", "pos"), ["w1, w2", "w3"])), "read as told")),
      Case(data, "a CSV without a header",
           lambda ws: _data_file(ws, "headerless.csv", b"great flight,positive\nlate,negative\n"
                                 b"fine,positive\n"),
           expect_error(errors.DataError, "has no header row: its first line looks like data.*"
                        "Add a first line naming the columns, e.g. 'text,label'")),
      Case(data, "a UTF-16 spreadsheet export (byte-order mark)",
           lambda ws: _labels_and_texts(_data_file(
               ws, "utf16.csv", "text,label\nw1 caf\u00e9,pos\nw2,neg\n".encode("utf-16"))),
           expect_result(_is((("neg", "pos"), ["w1 caf\u00e9", "w2"])), "read as UTF-16")),
      Case(data, "UTF-16 without a byte-order mark",
           lambda ws: _data_file(ws, "utf16le.csv",
                                 "text,label\nw1,pos\nw2,neg\n".encode("utf-16-le")),
           expect_error(errors.DataError, r'as UTF-16 without a byte-order mark does: pass '
                        r'encoding="utf-16-le"')),
      Case(data, "text_column equal to label_column",
           lambda ws: _data_file(ws, "same.csv", b"text,label\nw1,pos\nw2,neg\n",
                                 text_column="label"),
           expect_error(errors.UsageError, "name the same column: a model would learn each "
                        "label from itself")),
      Case(data, "text and label columns swapped",
           lambda ws: _data_file(ws, "swapped.csv", b"label,text\nw1 w2,pos\nw3,neg\n"
                                 b"w4 w5,pos\nw6,neg\nw7,pos\n"),
           expect_error(errors.DataError, "they look swapped. Pass text_column='label' and "
                        "label_column='text'")),
      Case(data, "a trailing comma on every row",
           lambda ws: _labels_and_texts(_data_file(ws, "trailing.csv",
                                                   b"text,label\nw1,pos,\nw2,neg,\n")),
           expect_result(_is((("neg", "pos"), ["w1", "w2"])), "read without it")),
      Case(data, "labels Positive and positive",
           lambda ws: _data_file(ws, "case.csv", b"text,label\nw1,Positive\nw2,positive\n"
                                 b"w3,negative\n"),
           expect_error(errors.DataError, "differ only by case would be classes of their own: "
                        r"'Positive' \(1 example\), 'positive' \(1 example\).*"
                        "merge_label_case=True")),
      Case(data, "a literal nan label",
           lambda ws: _data_file(ws, "nan.csv", b"text,label\nw1,nan\nw2,pos\nw3,neg\n"),
           expect_error(errors.DataError, "labels 'nan' .* are how pandas, Python or SQL write "
                        "a missing value")),
      Case(data, "CLI validation file with other column names",
           _split_files_with_other_columns,
           expect_cli_error(2, r"error: --validation_file .*dev\.csv has the columns \['text', "
                            r"'label'\], not the column 'review' \(--text_column\) that "
                            "--train_file has"), cli=True),
      Case(files, "save_adapters into a folder holding a user's file",
           _users_folder_for_adapters,
           expect_error(adapter_artifact.AdapterArtifactError,
                        "holds other files, not an adapter artifact.*overwrite=True")),
      Case(files, "save_peft into a folder holding the user's notes.txt and results.csv",
           _users_folder_for_peft,
           expect_error(peft.PeftError, r"holds other files, not a peft adapter; writing "
                        r"there would replace its files.*overwrite=True")),
      Case(files, "save_peft(overwrite=True) into that folder: only peft's files written",
           lambda ws: _users_folder_for_peft(ws, overwrite=True),
           expect_result(lambda files: None if {"notes.txt", "results.csv", peft.CONFIG_FILE,
                                                peft.WEIGHTS_FILE} == set(files)
                         and files["notes.txt"] == b"mine" else f"the folder holds {sorted(files)}",
                         "the user's files stay beside the adapter")),
      Case(files, "save_adapterhub into a peft adapter's folder",
           lambda ws: _kept(lambda path: adapterhub.save_adapterhub(
               ws.lora_model(), path, model_name="tiny"), _peft_folder(ws)),
           expect_error(adapterhub.AdapterHubError, r"holds a peft adapter, not an AdapterHub "
                        r"adapter.*overwrite=True")),
      Case(files, "save_adapters into a peft adapter's folder (the --from_peft=F --to_artifact=F "
           "writer)",
           lambda ws: _kept(lambda path: saving.save_adapters(ws.lora_model(), path),
                            _peft_folder(ws)),
           expect_error(adapter_artifact.AdapterArtifactError, r"holds a peft adapter, not an "
                        r"adapter artifact of this library.*overwrite=True")),
      Case(files, "CLI --from_peft=F --to_artifact=F --overwrite: a conversion into its source",
           lambda ws: ws.cli("convert_adapterhub.py", f"--from_peft={ws.path('peft_source')}",
                             f"--to_artifact={ws.path('peft_source')}", "--overwrite"),
           expect_cli_error(2, r"convert_adapterhub\.py: error: --to_artifact=.*peft_source is "
                            r"the folder being converted: writing there would destroy the "
                            r"source\. Pick another folder\.$"), cli=True),
      Case(files, "run_task whose export_dir holds a user's saved_model/ folder",
           _users_folder_as_export,
           expect_error(ValueError, "holds a folder saved_model/ that is not an export")),
      Case(cli, "run_glue.py --epochs=inf",
           lambda ws: ws.cli("run_glue.py", "--task=cola", f"--data_dir={ws.root}",
                             "--epochs=inf"),
           expect_cli_error(2, r"^run_glue\.py: error: --epochs=inf: must be positive and "
                            r"finite\.$"),
           cli=True),
      Case(cli, "run_squad.py --learning_rate=nan",
           lambda ws: ws.cli("run_squad.py", "--learning_rate=nan"),
           expect_cli_error(2, r"^run_squad\.py: error: --learning_rate=nan: must be positive "
                            r"and finite\.$"),
           cli=True),
      Case(cli, "run_automl.py --max_train_examples=-5",
           lambda ws: ws.cli("run_automl.py", "--max_train_examples=-5"),
           expect_cli_error(2, r"^run_automl\.py: error: --max_train_examples=-5: -5 is not a "
                            r"non-negative integer$"), cli=True),
      Case(cli, "export_multitask.py with an artifact folder that does not exist",
           lambda ws: ws.cli("export_multitask.py", "--tasks=reviews=/nowhere"),
           expect_cli_error(2, r"^export_multitask\.py: error: No adapter artifact at "
                            r"'/nowhere': adapter_config\.json is missing\. Pass a folder "
                            r"written by save_adapters\(\)\.$"), cli=True),
      Case(cli, "export_multitask.py --tasks=",
           lambda ws: ws.cli("export_multitask.py", "--tasks="),
           expect_cli_error(2, r"^export_multitask\.py: error: --tasks is empty: give the "
                            r"tasks to serve as name=artifact_folder pairs, e\.g\. "
                            r"--tasks=airline=runs/airline/export/adapters\.$"), cli=True),
      Case(cli, "run_automl.py --embeddings=glove",
           lambda ws: ws.cli("run_automl.py", "--embeddings=glove"),
           expect_cli_error(2, r"^run_automl\.py: error: --embeddings=glove: unknown 'glove'\. "
                            r"Give built-in names \(glove-6b-50d, use-multilingual-v3\)"),
           cli=True),
      Case(cli, "run_classification.py --verbose shows the traceback",
           lambda ws: ws.cli("run_classification.py", "--epochs=nan", "--verbose"),
           expect_result(lambda process: None if process.returncode != 0 and (
               "Traceback (most recent call last)" in process.stderr) and (
                   "UsageError: epochs=nan: must be positive and finite." in process.stderr) else
                         f"exit status {process.returncode}, no traceback of the error",
                         "the traceback, for bug reports"), cli=True),
      Case(message, "an unclosed CSV quote on line 2 of 4",
           lambda ws: _csv(ws, "quote.csv", 'text,label\n"unclosed,a\ny,b\nz,a\n'),
           expect_error(ValueError, r"quote\.csv, line 2: a quoted field opens here and its "
                        "closing quote is missing")),
      Case(message, "a CSV text of 200,000 characters",
           lambda ws: len(_csv(ws, "long.csv", f'text,label\n"{"w " * 100_000}",a\nx,b\n')[1]
                          .texts[0][0]),
           expect_result(_is(200_000), "read whole")),
      Case(message, "epochs=nan", lambda ws: ws.config.replace(epochs=float("nan")),
           expect_error(ValueError, r"^epochs=nan: must be positive and finite\.$")),
      Case(message, "epochs=inf", lambda ws: ws.config.replace(epochs=float("inf")),
           expect_error(ValueError, r"^epochs=inf: must be positive and finite\.$")),
      Case(message, "learning_rate=nan",
           lambda ws: ws.config.replace(learning_rate=float("nan")),
           expect_error(ValueError, r"^learning_rate=nan: must be positive and finite\.$")),
      Case(message, "CLI --seeds=abc",
           lambda ws: ws.cli("run_classification.py", "--methods=adapters", "--seeds=abc"),
           expect_cli_error(2, r"error: --seeds=abc: give comma-separated whole numbers"),
           cli=True),
      # The encoder records its vocab: the larger one is refused as another vocabulary,
      # before its token ids beyond the encoder's embeddings are counted.
      Case(message, "token ids beyond the encoder's vocabulary", _vocab_beyond_the_encoder,
           expect_error(ValueError, "tokenizes with another vocabulary than the encoder's own "
                        "wordpiece vocabulary")),
      Case(message, "the encoder passed as the preprocessing model",
           lambda ws: compatibility.load_preprocessor(ws.hub_handle),
           expect_error(ValueError, "is not a TF Hub BERT preprocessing model")),
      Case(message, "an encoder that records no vocab, and texts its preprocessing model does "
           "not know", _unknown_words_on_an_encoder_without_vocab,
           expect_error(errors.UsageError, r"100% of the tokens of the first training texts "
                        r"are \[UNK\] with hub_handle=.* and preprocess_handle=")),
      Case(message, "a read-only model_dir",
           lambda ws: ws.rerun("/sys/kernel/keras_adapters_run"),
           expect_error(PermissionError, "model_dir='/sys/kernel/keras_adapters_run' cannot be "
                        "written to .*: pass a model_dir= folder you can write to")),
      Case(message, "a model_dir inside a file",
           lambda ws: ws.rerun(os.path.join(ws.reviews, "run")),
           expect_error(NotADirectoryError, "is a file, or inside one: pass a folder")),
      Case(message, "an unwritable model cache (KERAS_ADAPTERS_CACHE)",
           _unwritable_model_cache,
           expect_error(errors.UsageError, r"The model cache \(KERAS_ADAPTERS_CACHE=/sys/kernel/"
                        r"keras_adapters_cache\) cannot be created or written to.*Set "
                        "KERAS_ADAPTERS_CACHE to a folder you can write to")),
      Case(message, "a SQuAD 2.0 file",
           lambda ws: _squad_file(ws, "squad2.json", "", version="v2.0", is_impossible=False),
           expect_error(errors.DataError, r"is SQuAD v2\.0 \(version 'v2\.0'\): v2\.0 is "
                        r"not supported, only v1\.1")),
      Case(message, "a SQuAD JSON with a byte-order mark",
           lambda ws: _squad_file(ws, "squad_bom.json", "\ufeff"),
           expect_result(_is(["q1"]), "read, as CSVs with one are")),
      Case(message, "adapter_init_stddev=0 (exact identity adapters)",
           lambda ws: ws.config.replace(adapter_init_stddev=0.0).model.adapter.init_stddev,
           expect_result(_is(0.0), "accepted, as AdapterConfig and the README accept it")),
      Case(message, "a truncated latest checkpoint", _truncated_latest_checkpoint,
           expect_result(_is(2), "resumed from ckpt-2, with a warning")),
      Case(message, "an empty text; then the recommended --drop_empty",
           lambda ws: _recommended_options(ws, b"review,sentiment\nw1,good\n  ,bad\nw2,bad\n"
                                           b"w3,good\nw4,bad\n", "--drop_empty"),
           expect_result(lambda out: None if "pass --drop_empty" in out[0] and out[1] ==
                         "read 4" else str(out), "the message names --drop_empty, which works"),
           cli=True),
      Case(message, "latin-1 bytes; then the recommended --encoding=utf-8,latin-1",
           lambda ws: _recommended_options(ws, b"review,sentiment\nw1 caf\xe9,good\nw2,bad\n"
                                           b"w3,bad\nw4,good\n", "--encoding=utf-8,latin-1"),
           expect_result(lambda out: None if "--encoding=utf-8,latin-1" in out[0] and out[1] ==
                         "read 4" else str(out), "the message names the encodings, which work"),
           cli=True),
      # Config files, cluster and cloud settings, foreign files (issue 38): each a user's
      # mistake, refused before any work with one line naming the file, variable or flag.
      Case(message, "a config file that does not exist",
           lambda ws: _config_file(ws, "missing.yaml", None),
           expect_error(errors.UsageError, r"^The config file '.*missing\.yaml' does not exist "
                        r"\(nor is it `section\.setting=value` pairs or YAML\): check the path")),
      Case(message, "a config file indented with a tab",
           lambda ws: _config_file(ws, "tabbed.yaml", "trainer:\n\tlearning_rate: 0.1\n"),
           expect_error(errors.UsageError, r"^The config file '.*tabbed\.yaml' is not valid "
                        r"YAML: line 2, column 1: .*\(YAML indents with spaces, not tabs\)")),
      Case(message, "a config file whose top level is a list",
           lambda ws: _config_file(ws, "listed.yaml", "- trainer\n- model\n"),
           expect_error(errors.UsageError, r"holds a list at its top level: it must be a "
                        r"mapping of sections \(model:, data:, trainer:, runtime:\)")),
      Case(message, "TF_CONFIG that is not JSON, with multi_worker_mirrored",
           lambda ws: _strategy_under_tf_config('{"cluster": '),
           expect_error(errors.UsageError, r"^TF_CONFIG='\{\"cluster\": ', which "
                        r"strategy='multi_worker_mirrored' reads its cluster from, is not valid "
                        r"JSON")),
      Case(message, "TF_CONFIG without cluster, with multi_worker_mirrored",
           lambda ws: _strategy_under_tf_config('{"task": {"type": "worker", "index": 0}}'),
           expect_error(errors.UsageError, r"reads its cluster from, has no 'cluster': give "
                        r"'cluster' and 'task'")),
      Case(message, "a gs:// model_dir without network or credentials",
           _model_dir_without_network,
           expect_error(errors.UnreachableError, r"^model_dir='gs://a-bucket/runs/colours': "
                        r"Cloud Storage cannot be reached \(no network, or no credentials")),
      Case(message, "an https:// data file",
           lambda ws: text_classification.read_text_classification(
               "https://example.com/reviews.csv"),
           expect_error(errors.UsageError, r"TensorFlow has no file system for https:// URLs.*"
                        r"Download the file first and pass its local path")),
      Case(message, "a truncated AdapterHub adapter.safetensors",
           _truncated_adapterhub_download,
           expect_error(adapterhub.AdapterHubError, r"adapter\.safetensors' is incomplete or "
                        r"corrupt .*: a download or copy was cut short\?")),
      Case(message, "an AdapterHub folder given to load_task_model",
           lambda ws: saving.load_task_model(_ADAPTERHUB_FIXTURE),
           expect_error(adapter_artifact.AdapterArtifactError, r"is an AdapterHub adapter, not "
                        r"an adapter artifact of this library: convert it with `python "
                        r"experiments/convert_adapterhub\.py --from_adapterhub=")),
      Case(message, "a results_dir that is a file (the CLIs check every output folder first)",
           lambda ws: atomic_io.check_output_dir(ws.reviews, "results_dir"),
           expect_error(NotADirectoryError, r"^results_dir='.*reviews\.csv' is a file, or inside "
                        r"one: pass a folder\.$")),
      Case(message, "adapter_size and reduction_factor both given",
           lambda ws: ws.config.override("model.adapter.adapter_size=8,"
                                         "model.adapter.reduction_factor=4"),
           expect_error(errors.UsageError, r"^adapter_size=8 and reduction_factor=4 both size "
                        r"the adapters' bottleneck .*give one of them\.$")),
      Case(message, "jit_compile with a batch larger than the data",
           _static_batch_larger_than_the_data,
           expect_error(errors.UsageError, r"^batch_size=1000 is more than the \d+ training "
                        r"examples: with jit_compile=True every batch has one shape.*Give "
                        r"batch_size=\d+ or less, or jit_compile=False\.$")),
      Case(message, "a hub_handle starting with ~",
           lambda ws: config_definitions.ExperimentConfig.from_settings(
               hub_handle="~/models/bert", preprocess_handle=ws.preprocess_handle
           ).model.hub_handle,
           expect_result(_is(os.path.expanduser("~/models/bert")), "expanded, as a shell does")),
      Case(writes, "leftovers of a killed atomic write, then a write",
           _leftovers_of_a_killed_write,
           expect_result(_is(["export", "results.json"]), "staging of the dead process gone")),
      Case(writes, "ckpt-3_temp and a .tempstate file of a killed save, then a run",
           _checkpoint_leftovers, expect_result(_is([]), "gone after the next run")),
      Case(methods, "a peft adapter with init_lora_weights='pissa' (rewrites the base)",
           lambda ws: _load_saved_peft(
               ws, edit_config=lambda c: c.update(init_lora_weights="pissa")),
           expect_error(peft.PeftError, r"init_lora_weights='pissa' rewrites the base weights "
                        r".*Save it as a plain LoRA with peft's save_pretrained")),
      Case(methods, "merge, then save_peft",
           lambda ws: _merged_then_written(ws, peft.save_peft),
           expect_error(peft.PeftError, merged + "save_peft")),
      Case(methods, "merge, then save_adapterhub",
           lambda ws: _merged_then_written(ws, adapterhub.save_adapterhub),
           expect_error(adapterhub.AdapterHubError, merged + "save_adapterhub")),
      Case(methods, "merge, then load_adapters of another LoRA task",
           lambda ws: saving.load_adapters(_merged_lora_model(ws), saving.save_adapters(
               ws.lora_model(), os.path.join(ws.new_dir("lora_task"), "artifact"))),
           expect_error(adapter_artifact.AdapterArtifactError, merged + "load_adapters")),
      Case(methods, "merge, then fit",
           _merged_then_trained,
           expect_result(lambda warnings: None if len(warnings) == 1 and "the head still "
                         "does" in warnings[0] else f"warnings: {warnings}",
                         "one warning: the merged layers no longer train, the head does")),
      Case(methods, "CLI --method=adapters --lora_r=16",
           lambda ws: _classify_leaves_nothing(ws, "lora_r", "--method=adapters",
                                               "--adapter_size=4", "--lora_r=16"),
           expect_cli_error(2, r"--lora_r=16 is a setting of --method='lora', not of "
                            r"--method='adapters'"), cli=True),
      Case(methods, "CLI --method=lora --adapter_size=32",
           lambda ws: _classify_leaves_nothing(ws, "adapter_size", "--method=lora",
                                               "--adapter_size=32"),
           expect_cli_error(2, r"--adapter_size=32 is a setting of --method='adapters', not of "
                            r"--method='lora'"), cli=True),
      Case(methods, "CLI --method=lora --lora_leave_out=6 on a 2-layer base",
           lambda ws: _classify_leaves_nothing(ws, "lora_leave_out", "--method=lora",
                                               "--lora_leave_out=6"),
           expect_cli_error(2, r"--lora_leave_out=6 names layers \[6\] that the encoder does "
                            r"not have"), cli=True),
      Case(methods, "a peft config saying r=4 beside rank-2 tensors",
           lambda ws: _load_saved_peft(ws, edit_config=lambda c: c.update(r=4)),
           expect_error(peft.PeftError, r"rank 2, but its adapter_config\.json says r=4: the "
                        r"config and the weights disagree")),
      Case(methods, "a peft classifier of 3 weight rows and 2 bias entries",
           lambda ws: _load_saved_peft(ws, edit_tensors=lambda t: t.update({
               "base_model.model.classifier.bias": t["base_model.model.classifier.bias"][:2]})),
           expect_error(peft.PeftError, r"a classifier whose weight has shape \[3, \d+\] \(a "
                        r"row per class\) but whose bias has shape \[2\]: the two disagree")),
      Case(methods, "a peft file missing one lora_B tensor",
           lambda ws: _load_saved_peft(ws, edit_tensors=lambda t: t.pop(lora_b)),
           expect_error(peft.PeftError, rf"has no '{re.escape(lora_b)}', which its other "
                        r"tensors and config call for: the file is incomplete")),
      Case(methods, "a bfloat16 peft file",
           _half_precision_peft,
           expect_result(lambda d: None if d < 0.05 else f"logits {d} away",
                         "loaded as float32, logits as the cast weights give")),
      Case(methods, "load_peft of an AdapterHub folder",
           lambda ws: peft.load_peft(_saved_adapterhub(ws), base_handle=ws.hub_handle),
           expect_error(peft.PeftError, r"is an AdapterHub adapter, not a peft adapter: load "
                        r"it with keras_adapters\.load_adapterhub, or convert it")),
      Case(methods, "load_adapterhub of a peft folder",
           lambda ws: adapterhub.load_adapterhub(_saved_peft(ws), base_handle=ws.hub_handle),
           expect_error(adapterhub.AdapterHubError, r"is a peft adapter, not an AdapterHub "
                        r"adapter: load it with keras_adapters\.load_peft, or convert it")),
      Case(methods, "export_multitask of a peft folder",
           lambda ws: multitask_export.export_multitask(
               ws.hub_handle, {"x": _saved_peft(ws)}, os.path.join(ws.new_dir("mt"), "out")),
           expect_error(errors.UsageError, r"is a peft adapter, not an adapter artifact of "
                        r"this library: convert it with .*--from_peft=")),
      Case(methods, "an AdapterHub LoRA config with selfattn_lora false beside q/v tensors",
           lambda ws: adapterhub.load_adapterhub(_saved_adapterhub(
               ws, lambda c: c["config"].update(selfattn_lora=False)),
                                                 base_handle=ws.hub_handle),
           expect_error(adapterhub.AdapterHubError, r"puts LoRA on no module \(selfattn_lora="
                        r"False, .*\): set AdapterHub's options of the modules the adapter was "
                        r"trained on")),
      Case(methods, "LoRAConfig(r=np.int64(8))",
           lambda ws: LoRAConfig(r=np.int64(8)) == LoRAConfig(r=8),
           expect_result(_is(True), "taken as r=8")),
      Case(methods, "AdaptedBert(adapter_config=<a peft LoraConfig dict>)",
           _peft_dict_as_adapter_config,
           expect_error(ValueError, r"The adapter config is peft's \(peft_type='LORA'\), "
                        r"which this library does not take as is: pass LoRAConfig")),
      Case(methods, "a peft LoRA on ['query', 'key', 'value', 'dense'] (the pooler's too)",
           _pooler_lora_through_peft,
           expect_result(lambda r: None if r[0] == ["dense", "key", "query", "value"]
                         and r[1] < 1e-5 else f"got {r}",
                         "written with peft's names and read back to the same logits")),
  ]

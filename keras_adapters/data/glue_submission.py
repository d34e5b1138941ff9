"""Test-set predictions in the format of the GLUE evaluation server.

The server takes a zip of eleven TSV files, one per test set: `CoLA.tsv`, `SST-2.tsv`,
`MRPC.tsv`, `STS-B.tsv`, `QQP.tsv`, `MNLI-m.tsv`, `MNLI-mm.tsv`, `QNLI.tsv`, `RTE.tsv`,
`WNLI.tsv` and `AX.tsv` (the diagnostic set, predicted by the MNLI model). Each holds the header
`index<TAB>prediction` and one row per test example, in the order of the test file. A prediction
is written the way the task's own files write labels: 0 or 1 for CoLA, SST-2, MRPC, QQP and
WNLI; the label name for MNLI, AX, QNLI and RTE; a score in [0, 5] with 3 decimals for STS-B.
"""

import collections
import os
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_adapters.data import glue
from keras_adapters.data import metrics
from keras_adapters.utils import atomic_io

_HEADER = "index\tprediction"

# (task, split) to the file the server expects.
SUBMISSION_FILES: Mapping[Tuple[str, str], str] = {
    ("cola", "test"): "CoLA.tsv",
    ("sst2", "test"): "SST-2.tsv",
    ("mrpc", "test"): "MRPC.tsv",
    ("stsb", "test"): "STS-B.tsv",
    ("qqp", "test"): "QQP.tsv",
    ("mnli", "test_matched"): "MNLI-m.tsv",
    ("mnli", "test_mismatched"): "MNLI-mm.tsv",
    ("qnli", "test"): "QNLI.tsv",
    ("rte", "test"): "RTE.tsv",
    ("wnli", "test"): "WNLI.tsv",
    ("ax", "test"): "AX.tsv",
}

# Examples in each GLUE test set: the server rejects a file with another number of rows.
GLUE_TEST_SIZES: Mapping[str, int] = {
    "CoLA.tsv": 1063,
    "SST-2.tsv": 1821,
    "MRPC.tsv": 1725,
    "STS-B.tsv": 1379,
    "QQP.tsv": 390965,
    "MNLI-m.tsv": 9796,
    "MNLI-mm.tsv": 9847,
    "QNLI.tsv": 5463,
    "RTE.tsv": 3000,
    "WNLI.tsv": 146,
    "AX.tsv": 1104,
}


def submission_file_name(task: str, split: str = "test") -> str:
  """Returns the server's file name for a test split, e.g. "MNLI-mm.tsv".

  Args:
    task: A GLUE task name, "ax" included (see `glue.glue_layout`).
    split: A test split of the task; MNLI's "test" is "test_matched".

  Returns:
    The file name.

  Raises:
    ValueError: `split` is not a test split of `task`.
  """
  key = (glue.glue_task(task).name, glue.canonical_split(task, split))
  if key not in SUBMISSION_FILES:
    raise ValueError(
        f"{task!r} split {split!r} is not a GLUE test set; the server scores only "
        f"{', '.join(f'{task_name}/{test}' for task_name, test in SUBMISSION_FILES)}.")
  return SUBMISSION_FILES[key]


def format_predictions(task: str, predictions) -> List[str]:
  """Writes predictions the way the task's files write labels.

  Args:
    task: A GLUE task name.
    predictions: Class ids (not logits), or for STS-B scores (a `[n, 1]` regression output
      is accepted).

  Returns:
    One string per prediction: the file label of the class, or for STS-B the score clipped
    to [0, 5] (the scale of the gold scores) with 3 decimals.

  Raises:
    ValueError: Predictions that are not class ids of the task or finite scores.
  """
  spec = glue.glue_task(task)
  if spec.is_regression:
    scores = np.clip(metrics.as_scores(predictions), *glue.STSB_SCORE_RANGE)
    return [f"{score:.3f}" for score in scores]
  file_labels = glue.file_labels(task)
  return [file_labels[class_id]
          for class_id in metrics.as_class_ids(predictions, spec.num_classes)]


def write_glue_submission(output_dir: str, task: str, split: str, ids: Sequence[str],
                          predictions) -> str:
  """Writes one test set's predictions as the GLUE server expects them.

  Args:
    output_dir: The submission folder, created if missing; zip its files for the server.
    task: A GLUE task name, "ax" included.
    split: A test split of the task, e.g. "test" or MNLI's "test_mismatched".
    ids: The example ids in test-file order, as `glue.read_glue_split` returns them.
    predictions: One class id (or STS-B score) per id.

  Returns:
    The path of the file written (replacing any earlier one atomically).

  Raises:
    ValueError: `split` is not a test set, ids and predictions differ in number, an id
      repeats, or predictions do not fit the task.
  """
  path = os.path.join(output_dir, submission_file_name(task, split))
  rows = format_predictions(task, predictions)
  ids = [str(example_id) for example_id in ids]
  if len(ids) != len(rows):
    raise ValueError(
        f"Got {len(ids)} ids but {len(rows)} predictions for {os.path.basename(path)}; give "
        "one prediction per test example, in the order of the test file.")
  counts = collections.Counter(ids)
  if len(counts) != len(ids):
    repeated = next(example_id for example_id, count in counts.items() if count > 1)
    raise ValueError(f"Id {repeated!r} occurs more than once in the ids for "
                     f"{os.path.basename(path)}; pass the ids of the test split as read.")
  atomic_io.write_text(path, "".join(f"{line}\n" for line in [
      _HEADER, *(f"{example_id}\t{row}" for example_id, row in zip(ids, rows))]))
  return path


def check_glue_submission(output_dir: str,
                          test_sizes: Optional[Mapping[str, int]] = None) -> None:
  """Checks that a submission folder holds every file the server needs, with every row.

  Args:
    output_dir: The folder `write_glue_submission` wrote to.
    test_sizes: File name to expected number of predictions; `GLUE_TEST_SIZES` if `None`.

  Raises:
    ValueError: Files are missing, lack the header or hold the wrong number of rows; the
      message lists every problem.
  """
  problems = []
  for name, size in (GLUE_TEST_SIZES if test_sizes is None else test_sizes).items():
    path = os.path.join(output_dir, name)
    if not tf.io.gfile.exists(path):
      problems.append(f"{name} is missing")
      continue
    with tf.io.gfile.GFile(path, "rb") as f:
      lines = f.read().decode("utf-8").splitlines()
    if not lines or lines[0] != _HEADER:
      problems.append(f"{name} does not start with the header {_HEADER!r}")
    elif len(lines) - 1 != size:
      problems.append(f"{name} has {len(lines) - 1} predictions; its test set has {size}")
  if problems:
    raise ValueError(
        f"The GLUE server would reject the submission in {output_dir}: "
        f"{'; '.join(problems)}. Write each file with write_glue_submission from the whole "
        "test split.")

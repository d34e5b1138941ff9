"""The one in-memory form every task reader produces and every pipeline consumes."""

import dataclasses
import json
from typing import Any, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from keras_adapters.utils import errors


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """What a task is: its inputs, its labels and how it is scored.

  Attributes:
    name: Task name, e.g. `"sst2"` or `"airline"`.
    text_fields: Names of the text inputs; one for single sentences, two for pairs.
    label_names: Class names in label-id order; `None` for a regression task.
    metrics: Metric names reported for the task, the first one is the one to select on.
  """
  name: str
  text_fields: Sequence[str]
  label_names: Optional[Sequence[str]]
  metrics: Sequence[str] = ("accuracy",)

  @property
  def is_regression(self) -> bool:
    return self.label_names is None

  @property
  def num_classes(self) -> int:
    return 1 if self.is_regression else len(self.label_names)


@dataclasses.dataclass(frozen=True)
class TextExamples:
  """One split of a text task.

  Attributes:
    ids: One identifier per example (GLUE `index`, a row number, a file name).
    texts: One list of strings per text field of the task, each as long as `ids`.
    labels: int32 class ids, float32 scores for regression, or `None` when the split is
      unlabelled (a GLUE test split).
  """
  ids: Sequence[str]
  texts: Sequence[Sequence[str]]
  labels: Optional[np.ndarray] = None

  def __len__(self) -> int:
    return len(self.ids)

  def __post_init__(self):
    for field in self.texts:
      if len(field) != len(self.ids):
        raise errors.UsageError(
            f"Every text field needs one entry per example: got {len(field)} texts for "
            f"{len(self.ids)} ids.")
    if self.labels is not None and len(self.labels) != len(self.ids):
      raise errors.UsageError(
          f"Got {len(self.labels)} labels for {len(self.ids)} examples; give one label per "
          "example or none at all.")


def json_lines(lines: Iterable[str], path: str, fix: str) -> Iterator[Tuple[int, str, Any]]:
  """`(line number, where, record)` of each non-blank line of a JSON Lines file.

  Args:
    lines: The file's lines (an open file, or its text split at "\n" only: JSON escapes
      line breaks inside strings, while str.splitlines() would also split at U+2028 and
      other separators that JSON strings may hold raw).
    path: The file, for messages (`where` is `<path>, line <n>`).
    fix: What to do about a line that is not JSON, ending its `DataError`.
  """
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    where = f"{path}, line {line_number}"
    try:
      yield line_number, where, json.loads(line)
    except json.JSONDecodeError as e:
      raise errors.DataError(f"{where}, column {e.colno}: not valid JSON ({e.msg}); {fix}") from e

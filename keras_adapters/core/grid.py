"""A resumable grid of runs: run the points not yet recorded, record each as it finishes.

It knows nothing of tasks or models. A point is a key (which names its record) and the
settings its run needs; a run is a function that returns the point's record; the results
file is JSON. The analysis runners (`analysis.sweep`, `analysis.method_comparison`,
`analysis.studies`) are built of these pieces:

  previous = grid.read(path, identity)      # {} without a file; another identity refused
  done = {key: record for ... in previous if <the record may be reused>}
  records = grid.run(points, run_point, done=done,
                     write=lambda records: grid.write(path, make_summary(records)))

A results file records its identity: what its records share and must share to be reused
(the task and data, the budget, the settings the runs have in common). A file of another
identity is refused (`refuse`: its records would be replaced by or mixed with records of
something else) or dropped (`drop`: its points run again and the file is rewritten). Every
write is atomic and the file written after every point, so a stopped grid loses only the
point it was running; its rerun runs the points the file lacks.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence

from absl import logging
import numpy as np
from scipy import stats

from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

Record = Any
# Called with the file's path, the identity it records and the identity asked for when the
# two differ: raises to refuse the file, returns to drop its records.
OnOtherIdentity = Callable[[str, Mapping[str, Any], Mapping[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class Point:
  """One point of a grid.

  Attributes:
    key: Names the point's record (a trial's folder name, a method).
    settings: What its run needs (a run config, a trial).
  """
  key: Hashable
  settings: Any = None


class OtherIdentityError(errors.UsageError):
  """A results file holds records of another identity; the message names what differs."""


def differences(recorded: Mapping[str, Any], identity: Mapping[str, Any]) -> List[str]:
  """The keys of `identity` that `recorded` holds with another value. A key it does not hold
  is no difference: the file was written before that key was recorded."""
  return [key for key, value in identity.items() if key in recorded and recorded[key] != value]


def refuse(path: str, recorded: Mapping[str, Any], identity: Mapping[str, Any]) -> None:
  """`on_other_identity` that refuses the file: raises `OtherIdentityError`."""
  changed = "; ".join(f"{key}={recorded.get(key)!r} there, {identity[key]!r} now"
                      for key in differences(recorded, identity)) or "it records none"
  raise OtherIdentityError(f"{path} holds records of another identity ({changed}); they would "
                           "be replaced or mixed with these. Write to another file.")


def drop(path: str, recorded: Mapping[str, Any], identity: Mapping[str, Any]) -> None:
  """`on_other_identity` that drops the file's records: they are run again."""
  logging.info("%s holds records of another identity (%s): its points run again.", path,
               ", ".join(differences(recorded, identity)) or "it records none")


def read(path: str, identity: Mapping[str, Any], *,
         identity_of: Optional[Callable[[Mapping[str, Any]], Optional[Mapping[str, Any]]]] = None,
         on_other_identity: OnOtherIdentity = refuse) -> Dict[str, Any]:
  """The results file at `path` if its records are of `identity`, else `{}`.

  Args:
    path: The JSON file (a local path or a URL); it need not exist.
    identity: What the records must share to be reused.
    identity_of: What a file records of its identity; by default the file's own top-level
      keys. `None` where it records none: its records are of another identity.
    on_other_identity: Called where the recorded identity differs (see `differences`):
      `refuse` (the default) raises, `drop` lets the records be run again.

  Returns:
    The file's content; `{}` where there is none or its records were dropped.
  """
  previous = atomic_io.read_json(path) or {}
  if not previous:
    return {}
  # The file holds what `write` wrote: this machine's folders as handles, tuples as lists.
  identity = paths.portable(identity, os.getcwd())
  recorded = previous if identity_of is None else identity_of(previous)
  if recorded is not None and not differences(recorded, identity):
    return previous
  on_other_identity(path, recorded or {}, identity)
  return {}


def run(points: Sequence[Point], run_point: Callable[[Point], Record], *,
        done: Optional[Mapping[Hashable, Record]] = None,
        write: Optional[Callable[[Dict[Hashable, Record]], Any]] = None
        ) -> Dict[Hashable, Record]:
  """Runs, in order, every point without a record in `done`.

  Args:
    points: The grid; keys are distinct.
    run_point: Runs one point and returns its record. An exception stops the grid (the
      points before it are written).
    done: Key → record of the points already recorded (read from the results file); they
      are not run again. Records of keys that are not points are left out.
    write: Called after every point run with the records so far (key → record, in the order
      of `points`): writes the results file.

  Returns:
    Key → record of every point, in the order of `points`.

  Raises:
    ValueError: Two points have one key.
  """
  keys = [point.key for point in points]
  if len(set(keys)) != len(keys):
    raise ValueError(f"Points share a key: {sorted({k for k in keys if keys.count(k) > 1})}; "
                     "each point's record needs its own.")
  records = {key: record for key, record in (done or {}).items() if key in keys}
  for point in points:
    if point.key in records:
      continue
    records[point.key] = run_point(point)
    if write is not None:
      write({key: records[key] for key in keys if key in records})
  return {key: records[key] for key in keys if key in records}


def write(path: str, content: Mapping[str, Any]) -> Dict[str, Any]:
  """Writes `content` to `path` atomically as JSON, without this machine's folders
  (`paths.portable`) and with how it was made (`provenance.KEY`); returns it as written."""
  content = paths.portable(provenance.stamped(content), os.getcwd())
  atomic_io.write_json(path, content)
  return content


def aggregate(values: Sequence[float]) -> Dict[str, Optional[float]]:
  """`mean` and `sem` (standard error of the mean, scipy's: sample standard deviation over
  the square root of the count) of scores over seeds. Without values the mean is `None`;
  below two values the standard error, undefined, is 0."""
  return dict(mean=float(np.mean(values)) if len(values) else None,
              sem=float(stats.sem(values)) if len(values) > 1 else 0.0)

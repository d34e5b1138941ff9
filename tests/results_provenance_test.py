"""Every committed results and benchmark file records how it was made (`utils.provenance`).

A file records it at its top (`provenance`: the command, the code version, the packages, the
date; or a list of them, one per session of a resumed run), and so does each row of a table
that merges the rows of several commands (`rows`). A new writer that forgets its provenance
is caught here.
"""

import glob
import json
import os

from absl.testing import absltest
from absl.testing import parameterized

from keras_adapters.utils import provenance

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RECORDS = sorted(
    os.path.relpath(path, _REPO)
    for pattern in ("results/**/*.json", "bench/results/*.json")
    for path in glob.glob(os.path.join(_REPO, pattern), recursive=True))
_FIELDS = {"command", "code", "packages", "date_utc"}


def _is_provenance(value) -> bool:
  """A `provenance.record()`, or a non-empty list of them (one per session)."""
  records = value if isinstance(value, list) else [value]
  return bool(records) and all(isinstance(record, dict) and _FIELDS <= set(record) and
                               record["command"] and "commit" in record["code"]
                               for record in records)


def _missing(path: str) -> list:
  """Where `path` lacks provenance: "top", and the methods of rows or runs without their own."""
  with open(os.path.join(_REPO, path), encoding="utf-8") as f:
    content = json.load(f)
  if provenance.KEY not in content and content and all(
      isinstance(run, dict) for run in content.values()):
    # A table of runs by method (run_squad.py's): each run records its own sessions.
    return [method for method, run in content.items()
            if not _is_provenance(run.get(provenance.KEY))]
  missing = [] if _is_provenance(content.get(provenance.KEY)) else ["top"]
  return missing + [row.get("method", str(index)) for index, row in
                    enumerate(content.get("rows", []))
                    if not _is_provenance(row.get(provenance.KEY))]


class ResultsProvenanceTest(parameterized.TestCase):

  def test_the_records_are_found(self):
    self.assertGreater(len(_RECORDS), 20)

  @parameterized.named_parameters((path, path) for path in _RECORDS)
  def test_records_its_provenance(self, path):
    missing = _missing(path)
    self.assertEmpty(missing, f"{path} lacks provenance ({', '.join(missing)}): its writer "
                     "must store provenance.record().")


if __name__ == "__main__":
  absltest.main()

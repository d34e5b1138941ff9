"""Tests for grid: resuming after a stop, files of another identity, writing after every
point, and the aggregation over seeds."""

import json
import math
import os

from absl.testing import absltest

from keras_adapters.core import grid
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

_IDENTITY = dict(task="toy", epochs=2.0)


class _Stopped(BaseException):
  """Stands for the process being stopped: no `except Exception` catches it."""


def _points(*keys):
  return [grid.Point(key, dict(learning_rate=rate)) for key, rate in zip(keys, (1, 2, 3, 4))]


class _Runs:
  """A `run_point` that records the keys it ran and stops at `stop_at` (a key)."""

  def __init__(self, stop_at=None):
    self.ran = []
    self.stop_at = stop_at

  def __call__(self, point):
    if point.key == self.stop_at:
      raise _Stopped()
    self.ran.append(point.key)
    return dict(key=point.key, score=10.0 * point.settings["learning_rate"])


class _Grid:
  """A runner of the kind the analysis builds: its file records the identity at the top
  and the records under "records"."""

  def __init__(self, path, identity=None, on_other_identity=grid.refuse):
    self.path = path
    self.identity = dict(identity or _IDENTITY)
    self.on_other_identity = on_other_identity
    self.writes = []

  def write(self, records):
    self.writes.append(list(records))
    return grid.write(self.path, dict(self.identity, records=list(records.values())))

  def __call__(self, points, run_point):
    previous = grid.read(self.path, self.identity, on_other_identity=self.on_other_identity)
    done = {record["key"]: record for record in previous.get("records", [])}
    return self.write(grid.run(points, run_point, done=done, write=self.write))


class RunTest(absltest.TestCase):

  def test_runs_every_point_in_order_and_returns_the_records_in_order(self):
    runs = _Runs()
    records = grid.run(_points("a", "b", "c"), runs)
    self.assertEqual(runs.ran, ["a", "b", "c"])
    self.assertEqual(list(records), ["a", "b", "c"])
    self.assertEqual(records["b"], dict(key="b", score=20.0))

  def test_recorded_points_are_not_run_again(self):
    runs = _Runs()
    done = dict(b=dict(key="b", score=-1.0), gone=dict(key="gone"))
    records = grid.run(_points("a", "b", "c"), runs, done=done)
    self.assertEqual(runs.ran, ["a", "c"])
    # In the order of the points; a record of no point is left out.
    self.assertEqual(list(records), ["a", "b", "c"])
    self.assertEqual(records["b"]["score"], -1.0)

  def test_written_after_every_point_run(self):
    writes = []
    grid.run(_points("a", "b", "c"), _Runs(), done=dict(a=dict(key="a")),
             write=lambda records: writes.append(list(records)))
    self.assertEqual(writes, [["a", "b"], ["a", "b", "c"]])

  def test_points_of_one_key_are_refused(self):
    with self.assertRaisesRegex(ValueError, r"Points share a key: \['a'\]"):
      grid.run(_points("a", "b", "a"), _Runs())


class ResumeTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.path = os.path.join(self.create_tempdir().full_path, "results", "grid.json")

  def _read(self):
    with open(self.path, encoding="utf-8") as f:
      return json.load(f)

  def test_a_stopped_grid_resumes_from_its_file(self):
    """Stopped at its third point, the file holds the first two; the rerun runs only the
    points the file lacks and writes them all."""
    runner = _Grid(self.path)
    with self.assertRaises(_Stopped):
      runner(_points("a", "b", "c", "d"), _Runs(stop_at="c"))
    self.assertEqual([record["key"] for record in self._read()["records"]], ["a", "b"])
    runs = _Runs()
    written = _Grid(self.path)(_points("a", "b", "c", "d"), runs)
    self.assertEqual(runs.ran, ["c", "d"])
    self.assertEqual(self._read(), written)
    self.assertEqual([record["score"] for record in written["records"]],
                     [10.0, 20.0, 30.0, 40.0])

  def test_a_finished_grid_runs_nothing(self):
    _Grid(self.path)(_points("a", "b"), _Runs())
    runs, runner = _Runs(), _Grid(self.path)
    runner(_points("a", "b"), runs)
    self.assertEqual(runs.ran, [])
    self.assertEqual(runner.writes, [["a", "b"]])  # Only the final write.

  def test_another_identity_is_refused_and_the_file_kept(self):
    _Grid(self.path)(_points("a"), _Runs())
    before = self._read()
    runs = _Runs()
    with self.assertRaisesRegex(grid.OtherIdentityError,
                                rf"{self.path} holds records of another identity "
                                r"\(epochs=2.0 there, 3.0 now\)"):
      _Grid(self.path, dict(_IDENTITY, epochs=3.0))(_points("a"), runs)
    self.assertEqual(runs.ran, [])
    self.assertEqual(self._read(), before)

  def test_another_identity_is_dropped_and_run_again(self):
    _Grid(self.path, on_other_identity=grid.drop)(_points("a", "b"), _Runs())
    runs = _Runs()
    written = _Grid(self.path, dict(_IDENTITY, epochs=3.0), on_other_identity=grid.drop)(
        _points("a", "b"), runs)
    self.assertEqual(runs.ran, ["a", "b"])
    self.assertEqual(written["epochs"], 3.0)

  def test_a_key_the_file_does_not_record_is_no_difference(self):
    """A file written before a key of the identity was recorded keeps its records."""
    grid.write(self.path, dict(task="toy", records=[dict(key="a", score=5.0)]))
    runs = _Runs()
    written = _Grid(self.path)(_points("a", "b"), runs)
    self.assertEqual(runs.ran, ["b"])
    self.assertEqual(written["epochs"], 2.0)  # Recorded from now on.

  def test_identity_recorded_elsewhere_in_the_file(self):
    """`identity_of` finds it (here under "settings"); a file recording none is of another."""
    grid.write(self.path, dict(settings=dict(_IDENTITY), records=[]))
    identity_of = lambda summary: summary.get("settings")
    self.assertEqual(grid.read(self.path, _IDENTITY, identity_of=identity_of)["records"], [])
    grid.write(self.path, dict(records=[dict(key="a")]))
    self.assertEqual(grid.read(self.path, _IDENTITY, identity_of=identity_of,
                               on_other_identity=grid.drop), {})
    with self.assertRaisesRegex(grid.OtherIdentityError, "it records none"):
      grid.read(self.path, _IDENTITY, identity_of=identity_of)

  def test_no_file(self):
    self.assertEqual(grid.read(self.path, _IDENTITY), {})

  def test_an_identity_with_this_machines_folders_reads_its_portable_file(self):
    """The file holds the identity as written (folders as handles, tuples as lists); the same
    identity asked again with this machine's folders is no difference."""
    identity = dict(_IDENTITY, hub_handle=os.path.join(paths.cache_dir(), "hub", "encoder"),
                    model_dir=os.path.join(os.getcwd(), "runs"), sizes=(64, 256))
    _Grid(self.path, identity)(_points("a"), _Runs())
    self.assertEqual(self._read()["hub_handle"], os.path.join("<cache>", "hub", "encoder"))
    runs = _Runs()
    _Grid(self.path, identity)(_points("a", "b"), runs)
    self.assertEqual(runs.ran, ["b"])


class WriteTest(absltest.TestCase):

  def test_portable_with_provenance_and_atomic(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "grid.json")
    written = grid.write(path, dict(model_dir=os.path.join(os.getcwd(), "runs", "a"), n=1))
    self.assertEqual(written["model_dir"], os.path.join("runs", "a"))
    self.assertEqual(set(written[provenance.KEY]),
                     {"command", "code", "packages", "date_utc", "machine"})
    with open(path, encoding="utf-8") as f:
      self.assertEqual(json.load(f), written)
    self.assertEqual(os.listdir(folder), ["grid.json"])  # No temporary file left behind.


class AggregateTest(absltest.TestCase):

  def test_mean_and_standard_error(self):
    aggregated = grid.aggregate([80.0, 90.0, 70.0])
    self.assertAlmostEqual(aggregated["mean"], 80.0)
    # Deviations 0, 10, -10: sample variance 100, so s.e.m. 10 / sqrt(3).
    self.assertAlmostEqual(aggregated["sem"], 10.0 / math.sqrt(3))
    self.assertEqual(grid.aggregate([50.0, 70.0]), dict(mean=60.0, sem=10.0))

  def test_one_value_and_none(self):
    self.assertEqual(grid.aggregate([42.0]), dict(mean=42.0, sem=0.0))
    self.assertEqual(grid.aggregate([]), dict(mean=None, sem=0.0))


if __name__ == "__main__":
  absltest.main()

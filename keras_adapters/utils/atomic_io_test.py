"""Tests for all-or-nothing writes."""

import json
import os
import stat
import subprocess
import sys

import pytest

from keras_adapters.utils import atomic_io


def test_atomic_directory_replaces_only_on_success(tmp_path):
  target = tmp_path / "model"
  with atomic_io.atomic_directory(target) as staging:
    (open(os.path.join(staging, "a.txt"), "w")).close()
  assert os.listdir(target) == ["a.txt"]
  with pytest.raises(RuntimeError):
    with atomic_io.atomic_directory(target) as staging:
      open(os.path.join(staging, "b.txt"), "w").close()
      raise RuntimeError("interrupted")
  assert os.listdir(target) == ["a.txt"]
  assert os.listdir(tmp_path) == ["model"]  # no staging folder left behind
  with atomic_io.atomic_directory(target) as staging:
    open(os.path.join(staging, "c.txt"), "w").close()
  assert os.listdir(target) == ["c.txt"]
  assert os.listdir(tmp_path) == ["model"]
  assert stat.S_IMODE(os.stat(target).st_mode) == 0o777 & ~atomic_io._umask()  # pylint: disable=protected-access


def test_write_json_is_complete_or_absent(tmp_path, monkeypatch):
  path = tmp_path / "results.json"
  atomic_io.write_json(path, {"b": 1, "a": [1, 2]})
  assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1}
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~atomic_io._umask()  # pylint: disable=protected-access

  def fail(fd):
    raise OSError("disk full")

  monkeypatch.setattr(os, "fsync", fail)
  with pytest.raises(OSError, match="disk full"):
    atomic_io.write_json(path, {"new": True})
  monkeypatch.undo()
  assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1}
  assert os.listdir(tmp_path) == ["results.json"]


def _dead_pid():
  """The id of a process that has exited and been reaped."""
  process = subprocess.Popen([sys.executable, "-c", "pass"])
  process.wait()
  return process.pid


def test_leftovers_of_killed_writes_go_with_the_next_write(tmp_path):
  """What a killed process left (a staging folder, a retired folder, a temporary file) is
  removed by the next write of the same target or by remove_leftovers; a live process's
  staging, and other targets' leftovers on a targeted write, stay."""
  dead, alive = _dead_pid(), os.getppid()
  staging = tmp_path / f".export.partial-{dead}-abcd_123"
  retired = tmp_path / f".export.retired-{dead}-zz99zz99"
  in_progress = tmp_path / f".export.partial-{alive}-abcdefgh"
  other = tmp_path / f".results.json.partial-{dead}-abcdefgh"
  for folder in (staging, retired, in_progress):
    folder.mkdir()
    (folder / "half.pb").write_bytes(b"\0")
  other.write_text("{")
  (tmp_path / "user.export.partial-1-abcdefgh").write_text("not ours")

  with atomic_io.atomic_directory(tmp_path / "export") as new:
    open(os.path.join(new, "saved_model.pb"), "wb").close()
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["export", in_progress.name, other.name, "user.export.partial-1-abcdefgh"])

  assert atomic_io.remove_leftovers(tmp_path) == [str(other)]
  assert atomic_io.remove_leftovers(tmp_path / "missing") == []
  atomic_io.write_json(tmp_path / "results.json", {})
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["export", "results.json", in_progress.name, "user.export.partial-1-abcdefgh"])

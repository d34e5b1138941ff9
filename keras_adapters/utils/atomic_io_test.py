"""Tests for all-or-nothing writes."""

import json
import os
import stat

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

"""Tests for all-or-nothing writes."""

import json
import os
import stat
import subprocess
import sys
import uuid

import pytest
import tensorflow as tf

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
    open(os.path.join(staging, "a.txt"), "w").close()
    open(os.path.join(staging, "c.txt"), "w").close()
  assert sorted(os.listdir(target)) == ["a.txt", "c.txt"]
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


def _ram_folder():
  """A folder of TensorFlow's in-memory file system, new to this process."""
  return f"ram://atomic_io_test/{uuid.uuid4().hex}"


def _tree(folder):
  """Every file under `folder`, by its path inside it, with its bytes."""
  return {os.path.relpath(os.path.join(parent, name), folder):
          tf.io.gfile.GFile(os.path.join(parent, name), "rb").read()
          for parent, _, names in tf.io.gfile.walk(folder) for name in names}


def test_urls_are_written_through_gfile_never_to_local_disk(tmp_path, monkeypatch):
  """A URL is written on its file system: nothing lands in a local folder named after its
  scheme, and what is written reads back through `read_json`."""
  monkeypatch.chdir(tmp_path)
  folder = _ram_folder()
  atomic_io.make_writable_dir(folder, "model_dir")
  atomic_io.write_json(f"{folder}/results.json", {"b": 1, "a": [1, 2]})
  assert atomic_io.read_json(f"{folder}/results.json") == {"a": [1, 2], "b": 1}
  assert atomic_io.read_json(f"{folder}/missing.json") is None
  with atomic_io.atomic_directory(f"{folder}/export") as staging:
    tf.io.gfile.makedirs(f"{staging}/variables")
    for name in ("saved_model.pb", "variables/variables.index"):
      with tf.io.gfile.GFile(f"{staging}/{name}", "wb") as f:
        f.write(name.encode())
  assert _tree(folder) == {"results.json": b'{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n',
                           "export/saved_model.pb": b"saved_model.pb",
                           "export/variables/variables.index": b"variables/variables.index"}
  assert os.listdir(tmp_path) == []
  with pytest.raises(NotADirectoryError, match="results.json' is a file"):
    atomic_io.make_writable_dir(f"{folder}/results.json", "model_dir")


def test_a_url_folder_is_replaced_only_on_success(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  folder = _ram_folder()
  target = f"{folder}/export"
  with atomic_io.atomic_directory(target) as staging:
    with tf.io.gfile.GFile(f"{staging}/a.txt", "w") as f:
      f.write("a")
  with pytest.raises(RuntimeError):
    with atomic_io.atomic_directory(target) as staging:
      with tf.io.gfile.GFile(f"{staging}/b.txt", "w") as f:
        f.write("b")
      raise RuntimeError("interrupted")
  assert _tree(folder) == {"export/a.txt": b"a"}  # No staging folder left behind.
  with atomic_io.atomic_directory(target) as staging:
    with tf.io.gfile.GFile(f"{staging}/a.txt", "w") as f:
      f.write("new a")
    with tf.io.gfile.GFile(f"{staging}/c.txt", "w") as f:
      f.write("c")
  assert _tree(folder) == {"export/a.txt": b"new a", "export/c.txt": b"c"}
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["local", "ram"])
def test_a_folder_keeps_the_files_the_write_does_not_make(tmp_path, where, monkeypatch):
  """A user's file beside an artifact survives its rewriting; the written entries replace
  their namesakes, and the marker is taken away first and put back last."""
  folder = str(tmp_path) if where == "local" else _ram_folder()
  target = f"{folder}/artifact"
  with atomic_io.atomic_directory(target, marker="config.json") as staging:
    for name, text in (("config.json", "old"), ("weights", "old"), ("sub/x", "old")):
      tf.io.gfile.makedirs(os.path.dirname(f"{staging}/{name}"))
      with tf.io.gfile.GFile(f"{staging}/{name}", "w") as f:
        f.write(text)
  with tf.io.gfile.GFile(f"{target}/notes.txt", "w") as f:
    f.write("mine")
  weights_moved_in_with_marker = []
  for module, name in ((os, "replace"), (tf.io.gfile, "rename")):
    def move(source, destination, *args, _real=getattr(module, name), **kwargs):
      _real(source, destination, *args, **kwargs)
      if os.fspath(destination) == f"{target}/weights":
        weights_moved_in_with_marker.append(tf.io.gfile.exists(f"{target}/config.json"))
    monkeypatch.setattr(module, name, move)
  with atomic_io.atomic_directory(target, marker="config.json") as staging:
    for name in ("config.json", "weights", "sub/y"):
      tf.io.gfile.makedirs(os.path.dirname(f"{staging}/{name}"))
      with tf.io.gfile.GFile(f"{staging}/{name}", "w") as f:
        f.write("new")
  monkeypatch.undo()
  assert {name: tf.io.gfile.GFile(f"{target}/{name}").read()
          for name in ("config.json", "weights", "sub/y", "notes.txt")} == {
              "config.json": "new", "weights": "new", "sub/y": "new", "notes.txt": "mine"}
  assert not tf.io.gfile.exists(f"{target}/sub/x")  # A written folder is replaced whole.
  assert weights_moved_in_with_marker == [False]  # The marker was away meanwhile.


def test_a_failed_write_of_a_url_keeps_the_old_file(monkeypatch):
  folder = _ram_folder()
  atomic_io.write_json(f"{folder}/results.json", {"old": True})

  def fail(*args, **kwargs):
    raise tf.errors.UnavailableError(None, None, "connection reset")

  monkeypatch.setattr(tf.io.gfile, "rename", fail)
  with pytest.raises(tf.errors.UnavailableError):
    atomic_io.write_json(f"{folder}/results.json", {"new": True})
  monkeypatch.undo()
  assert _tree(folder) == {"results.json": b'{\n  "old": true\n}\n'}


@pytest.mark.parametrize("where", ["local", "ram"])
def test_an_exclusive_write_refuses_an_existing_file(tmp_path, where):
  folder = str(tmp_path) if where == "local" else _ram_folder()
  atomic_io.write_text(os.path.join(folder, "run.lock"), "first", exclusive=True)
  with pytest.raises(FileExistsError):
    atomic_io.write_text(os.path.join(folder, "run.lock"), "second", exclusive=True)
  assert tf.io.gfile.listdir(folder) == ["run.lock"]
  assert tf.io.gfile.GFile(os.path.join(folder, "run.lock")).read() == "first"


def test_leftovers_of_killed_writes_of_urls_go_with_the_next_write():
  folder = _ram_folder()
  dead = _dead_pid()
  tf.io.gfile.makedirs(f"{folder}/.export.partial-{dead}-0123abcd")
  for name in (f".export.partial-{dead}-0123abcd/saved_model.pb",
               f".results.json.partial-{dead}-89abcdef", f".results.json.partial-{os.getpid()}-"
               "89abcdef"):
    with tf.io.gfile.GFile(f"{folder}/{name}", "w") as f:
      f.write("{")
  atomic_io.write_json(f"{folder}/results.json", {})
  assert sorted(_tree(folder)) == [f".export.partial-{dead}-0123abcd/saved_model.pb",
                                   f".results.json.partial-{os.getpid()}-89abcdef",
                                   "results.json"]
  assert atomic_io.remove_leftovers(folder) == [f"{folder}/.export.partial-{dead}-0123abcd"]
  assert sorted(_tree(folder)) == [f".results.json.partial-{os.getpid()}-89abcdef",
                                   "results.json"]

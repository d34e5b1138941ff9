"""Interrupted writes leave nothing half-made behind once the next run succeeds: the staging
folders and temporary files of `atomic_io` and TensorFlow's `ckpt-<step>_temp` folders.

The leftovers are made as a process killed mid-write leaves them (named after a process that
no longer exists); the run is a tiny `run_task` with an export.
"""

import os
import subprocess
import sys

import tensorflow as tf

from keras_adapters.tasks import classification
from keras_adapters.tasks import testing


def _dead_pid():
  process = subprocess.Popen([sys.executable, "-c", "pass"])
  process.wait()
  return process.pid


class InterruptedWritesTest(tf.test.TestCase):

  def test_the_next_successful_run_removes_what_interrupted_writes_left(self):
    root = self.create_tempdir().full_path
    model_dir, export_dir = os.path.join(root, "run"), os.path.join(root, "export")
    pid = _dead_pid()
    folders = [  # Staging folders of a SavedModel, an artifact and a checkpoint.
        os.path.join(export_dir, f".saved_model.partial-{pid}-zz_00_zz"),
        os.path.join(export_dir, f".saved_model.retired-{pid}-qwertyui"),
        os.path.join(export_dir, f".adapters.partial-{pid}-abcdefgh"),
        os.path.join(model_dir, "ckpt-2_temp"),
    ]
    files = [  # Temporary files of results.json and of a checkpoint's index.
        os.path.join(model_dir, f".results.json.partial-{pid}-a1b2c3d4"),
        os.path.join(model_dir, "ckpt-2.index.tempstate1234"),
    ]
    for folder in folders:
      os.makedirs(os.path.join(folder, "variables"))
    for path in files:
      with open(path, "wb") as f:
        f.write(b"half")
    leftovers = folders + files
    spec, splits = testing.colour_task()
    results = classification.run_task(spec, splits, testing.run_config(), model_dir,
                                   export_dir=export_dir, progress_bar=False)
    self.assertEqual(results["export_dir"], export_dir)
    for path in leftovers:
      self.assertFalse(os.path.exists(path), path)
    self.assertEqual(sorted(os.listdir(export_dir)), ["adapters", "saved_model"])
    self.assertEqual(sorted(name for name in os.listdir(model_dir) if name.startswith(".")), [])


if __name__ == "__main__":
  tf.test.main()

"""Tests for paths.portable."""

import os
import tempfile
from unittest import mock

import tensorflow as tf

from keras_adapters.utils import paths


class PortableTest(tf.test.TestCase):

  def test_machine_folders_become_handles(self):
    with mock.patch.dict(os.environ, {"KERAS_ADAPTERS_CACHE": "/home/me/.cache/ka"}):
      record = {"handle": "/home/me/.cache/ka/hub/model/encoder",
                "runs": ["/repo/runs/a", ("/repo/bench/x.json", 3)],
                "message": f"{tempfile.gettempdir()}/run_1/x holds another run",
                "outside": "/elsewhere/data.csv", "count": 2}
      self.assertEqual(paths.portable(record, "/repo"), {
          "handle": "<cache>/hub/model/encoder",
          "runs": ["runs/a", ["bench/x.json", 3]],
          "message": "<tmp>/run_1/x holds another run",
          "outside": "/elsewhere/data.csv", "count": 2})


if __name__ == "__main__":
  tf.test.main()

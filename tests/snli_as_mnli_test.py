"""`experiments/snli_as_mnli.py` on tiny SNLI files in the cache layout of `scripts/setup.sh`.

The script runs in a subprocess, as a user runs it, with `KERAS_ADAPTERS_CACHE` pointing at the
tiny files. What it writes is what `run_glue.py --task=mnli --data_dir=...` reads:
`glue.read_glue_split`, which `run_glue_test.py` tests the script with.
"""

import os
import subprocess

import tensorflow as tf

from keras_adapters.data import glue
from keras_adapters.data import snli_testing
from keras_adapters.data import splits as splits_lib
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cache, *args):
  env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
  env.update(KERAS_ADAPTERS_CACHE=cache, CUDA_VISIBLE_DEVICES="")
  return subprocess.run(
      warm_python.command(os.path.join("experiments", "snli_as_mnli.py"), *args), cwd=_REPO_ROOT,
      env=env, capture_output=True, text=True, check=False)


class SnliAsMnliTest(tf.test.TestCase):

  def test_writes_the_recorded_split_as_mnli(self):
    cache = self.create_tempdir().full_path
    snli_testing.write_tiny_snli(cache, num_train_captions=10)
    glue_dir = os.path.join(self.create_tempdir().full_path, "glue")
    manifest = os.path.join(cache, "snli.json")
    process = _run(cache, f"--glue_dir={glue_dir}", f"--split_manifest={manifest}")
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])
    self.assertIn("train 26, validation 3, test 11 pairs", process.stdout)
    self.assertIn(f"run_glue.py --task=mnli --data_dir={glue_dir}", process.stdout)
    self.assertIn("fine-tuned on SNLI", process.stdout)
    recorded = splits_lib.load_split_manifest(manifest)
    for mnli_split, split in (("train", "train"), ("validation_matched", "validation"),
                              ("validation_mismatched", "test"), ("test_mismatched", "test")):
      self.assertLen(glue.read_glue_split(glue_dir, "mnli", mnli_split),
                     len(recorded.ids[split]))

  def test_missing_snli_is_one_line_naming_the_setup_command(self):
    cache = self.create_tempdir().full_path
    process = _run(cache, f"--glue_dir={os.path.join(cache, 'glue')}",
                   f"--split_manifest={os.path.join(cache, 'snli.json')}")
    self.assertEqual(process.returncode, 2)
    self.assertRegex(process.stderr.strip(), r"^snli_as_mnli.py: error: SNLI 1.0 is not "
                     r"installed: .* Run `bash scripts/setup.sh`[^\n]*$")
    self.assertFalse(os.path.exists(os.path.join(cache, "glue")))


if __name__ == "__main__":
  tf.test.main()

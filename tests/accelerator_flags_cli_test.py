"""`run_classification.py` with the TPU settings on this CPU: `--mixed_precision`,
`--jit_compile`, and every folder on TensorFlow's in-memory file system (`ram://`, standing for
Cloud TPU's `gs://`), with nothing written to local disk."""

import os
import uuid

import tensorflow as tf
import tf_keras as keras

from experiments import run_classification
from experiments import testing as cli_testing
from keras_adapters.hub import testing

_SEQ_LENGTH = 12


class AcceleratorFlagsCliTest(tf.test.TestCase):

  def _run(self, root, **extra):
    """Runs the CLI with every folder and file it writes under `root`; returns what it
    printed."""
    argv = ["run_classification"] + [f"--{k}={v}" for k, v in dict(
        data_path=cli_testing.write_two_class_csv(
            os.path.join(self.create_tempdir().full_path, "two.csv")),
        hub_handle=testing.tiny_hub_handle(),
        preprocess_handle=testing.tiny_preprocess_handle(_SEQ_LENGTH),
        split_manifest=os.path.join(root, "split.json"), model_dir=os.path.join(root, "run"),
        results_dir=os.path.join(root, "results"), max_train_examples="0", epochs="1",
        batch_size="8", max_seq_length=str(_SEQ_LENGTH), adapter_size="4", **extra).items()]
    return cli_testing.run_main(run_classification.main, argv)

  def _assert_serves_float32(self, export_dir):
    served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](text=tf.constant(["w1 w2 w3", "w25 w30"]))
    self.assertEqual(served["probabilities"].dtype, tf.float32)
    self.assertAllClose(tf.reduce_sum(served["probabilities"], axis=-1), [1.0, 1.0])

  def _assert_trained_with(self, printed, export_dir):
    """The run printed its test score and exports a SavedModel serving float32, and its
    precision policy was its alone."""
    self.assertRegex(printed, r"\ntest: accuracy \d+\.\d\d%")
    self._assert_serves_float32(export_dir)
    self.assertEqual(keras.mixed_precision.global_policy().name, "float32")

  def test_bfloat16_and_xla_train_score_and_export(self):
    root = self.create_tempdir().full_path
    printed = self._run(root, mixed_precision="bfloat16", jit_compile="true")
    self._assert_trained_with(printed, os.path.join(root, "run", "export"))

  def test_float16_and_xla_with_every_folder_on_ram_leave_nothing_local(self):
    """float16 (loss scaling) and XLA run on `ram://` too: one run checks both, as each
    costs a training and an export."""
    root = f"ram://accelerator_flags_cli_test/{uuid.uuid4().hex}"
    settings = dict(mixed_precision="float16", jit_compile="true")
    workdir = self.create_tempdir().full_path
    before = os.getcwd()
    os.chdir(workdir)
    try:
      printed = self._run(root, **settings)
      again = self._run(root, **settings)  # Finished: returned from ram://, not trained again.
    finally:
      os.chdir(before)
    self.assertEqual(os.listdir(workdir), [])
    self._assert_trained_with(printed, os.path.join(root, "run", "export"))
    self.assertIn(printed.split("\ntest: ")[1][:6], again)
    self.assertTrue(tf.io.gfile.exists(os.path.join(root, "run", "run.json")))


if __name__ == "__main__":
  tf.test.main()

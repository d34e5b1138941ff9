"""SIGTERM mid-training loses at most the step under way, and says how to resume.

What a scheduler (GKE, Cloud TPU, Slurm) sends before stopping a job. A child process trains
a tiny random encoder as the experiment scripts do (`interruption.call` around the run, as
`cli.run` calls it) and is sent SIGTERM after its first periodic checkpoint: it saves the
step it is on, prints one line naming that checkpoint and exits with status 143. Training
again in that model_dir resumes from that step. `_child_main` is what the child runs.
"""

import contextlib
import io
import json
import os
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras

from experiments import interruption
from keras_adapters.cli import interruption_testing
from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.training import trainer
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUM_STEPS = 120
_CHECKPOINT_EVERY_STEPS = 3
_SEQ_LENGTH = 8


def _dataset_fn(shuffle_seed):
  rng = np.random.default_rng(0)
  features = {"input_word_ids": rng.integers(4, testing.TINY_CONFIG["vocab_size"],
                                             (32, _SEQ_LENGTH)).astype(np.int32),
              "input_mask": np.ones((32, _SEQ_LENGTH), np.int32),
              "input_type_ids": np.zeros((32, _SEQ_LENGTH), np.int32)}
  labels = rng.integers(0, 3, 32).astype(np.int32)
  return (tf.data.Dataset.from_tensor_slices((features, labels))
          .shuffle(32, seed=shuffle_seed).batch(8))


def _make_trainer(handle, model_dir, eval_fn=None):
  def model_fn():
    return classifier.build_classifier(adapted_bert.AdaptedBert(handle, adapter_size=4), 3)
  return trainer.Trainer(
      model_fn, keras.losses.SparseCategoricalCrossentropy(
          from_logits=True, reduction=keras.losses.Reduction.NONE),
      _dataset_fn, num_train_steps=_NUM_STEPS, learning_rate=1e-3, model_dir=model_dir,
      checkpoint_every_steps=_CHECKPOINT_EVERY_STEPS, progress_bar=False,
      eval_fn=eval_fn, eval_every_steps=1 if eval_fn else None)


def _child_main(handle, model_dir):
  """Trains slowly enough (a pause after each step) for the signal to come mid-training,
  under `interruption.call` as a script's `main` runs."""
  def pause(model):
    del model
    time.sleep(0.05)
    return {}
  interruption.call(lambda argv: _make_trainer(handle, model_dir, pause).train(), [])


class PreemptionTest(tf.test.TestCase):

  def test_sigterm_saves_the_current_step_and_training_again_resumes_from_it(self):
    handle = testing.tiny_hub_handle()
    model_dir = self.create_tempdir().full_path
    code = ("import os, sys; os.environ['TF_USE_LEGACY_KERAS'] = '1'; "
            f"sys.path[:0] = [{_REPO_ROOT!r}, {os.path.dirname(os.path.abspath(__file__))!r}]; "
            "import preemption_test; preemption_test._child_main(sys.argv[1], sys.argv[2])")
    message = interruption_testing.stopped_by_sigterm(
        self, warm_python.command("-c", code, handle, model_dir),
        os.path.join(model_dir, f"ckpt-{_CHECKPOINT_EVERY_STEPS}.index"), timeout=120,
        cwd=_REPO_ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    step = int(os.path.basename(tf.train.latest_checkpoint(model_dir)).split("-")[1])
    self.assertBetween(step, _CHECKPOINT_EVERY_STEPS, _NUM_STEPS - 1)
    self.assertEqual(message, (
        f"-c: Stopped by SIGTERM at step {step} of {_NUM_STEPS}, saved in "
        f"{model_dir}/ckpt-{step}: rerun the same command to resume from it."))
    self.assertFalse(os.path.exists(os.path.join(model_dir, trainer.COMPLETION_MARKER)))

    result = _make_trainer(handle, model_dir).train()
    self.assertEqual((result.start_step, result.step), (step, _NUM_STEPS))
    with open(os.path.join(model_dir, trainer.COMPLETION_MARKER), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["start_step"], step)

  def test_ctrl_c_outside_training_is_one_line_and_status_130(self):
    """A Ctrl-C while data loads or a model exports: no traceback, one line, status 130."""
    def main(argv):
      del argv
      raise KeyboardInterrupt
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as stop:
      interruption.call(main, [])
    self.assertEqual(stop.exception.code, 130)
    self.assertRegex(stderr.getvalue(), r"^\S+: Stopped by Ctrl-C; what was saved is kept: "
                     r"rerun the same command to continue.\n$")


if __name__ == "__main__":
  tf.test.main()

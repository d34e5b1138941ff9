"""Divergence is caught before it is saved or reported: NaN, an exploding loss, exploding
weights. A checkpoint is kept only when known good, and the error says how to start again.

The Trainer tests use a tiny regression model (a frozen layer under a trained head) on 32
examples, a checkpoint after every step; the run_task test the tiny random encoder.
"""

import glob
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from keras_adapters.core import run_records
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.training import trainer

_trainer = testing.regression_trainer


def _checkpoints(model_dir):
  return sorted(os.path.basename(path)[:-len(".index")]
                for path in glob.glob(os.path.join(model_dir, "ckpt-*.index")))


class DivergenceTest(tf.test.TestCase):

  def test_exploding_weights_are_never_saved(self):
    """A learning rate of 1e6 gives finite losses; the first update blows the weights up, and
    the checkpoint due after it is not written."""
    model_dir = self.create_tempdir().full_path
    with self.assertRaisesRegex(
        trainer.TrainingDivergedError,
        r"Training diverged at step 1: the update left the trainable weights with global norm "
        r"\S+ \(they started at \S+\)\. Nothing was saved after it; the last good checkpoint "
        r"is none\. Lower the learning rate \(now learning_rate=1e\+06\) and train again in a "
        r"new model_dir=<folder> \(a rerun in this one resumes from the start\)\."):
      _trainer(model_dir, 1e6).train()
    self.assertEmpty(_checkpoints(model_dir))
    self.assertFalse(os.path.exists(os.path.join(model_dir, trainer.COMPLETION_MARKER)))

  def test_exploding_loss_is_divergence_and_its_checkpoint_is_deleted(self):
    """With the weight check out of the way, the exploded weights of step 1 are saved; the
    loss they give at step 2 proves them bad, and their checkpoint goes."""
    model_dir = self.create_tempdir().full_path
    with mock.patch.object(trainer, "WEIGHT_EXPLOSION_FACTOR", float("inf")):
      with self.assertRaisesRegex(
          trainer.TrainingDivergedError,
          r"diverged at step 2: loss \S+, over 100 times the \S+ of step 1\. The checkpoint of "
          r"step 1, whose weights gave that loss, was deleted\. .*last good checkpoint is "
          r"none\."):
        _trainer(model_dir, 1e6).train()
    self.assertEmpty(_checkpoints(model_dir))
    self.assertIsNone(tf.train.latest_checkpoint(model_dir))

  def test_checkpoints_before_the_bad_one_are_kept_and_resumed_from(self):
    """A NaN loss at step 4 (a NaN label in batch 3) deletes ckpt-3, whose weights gave it,
    and keeps ckpt-1 and ckpt-2, which the steps after them proved; a rerun on clean data
    resumes from ckpt-2."""
    model_dir = self.create_tempdir().full_path
    labels = testing.REGRESSION_LABELS.copy()
    labels[3 * 8] = np.nan
    with self.assertRaisesRegex(trainer.TrainingDivergedError,
                                r"diverged at step 4: loss nan\. The checkpoint of step 3, "
                                r"whose weights gave that loss, was deleted\. Nothing was "
                                r"saved after it; the last good checkpoint is \S+ckpt-2\."):
      _trainer(model_dir, 0.05, labels=labels).train()
    self.assertEqual(_checkpoints(model_dir), ["ckpt-1", "ckpt-2"])
    self.assertEqual(os.path.basename(tf.train.latest_checkpoint(model_dir)), "ckpt-2")
    result = _trainer(model_dir, 0.05).train()
    self.assertEqual((result.start_step, result.step), (2, 8))

  def test_a_diverged_run_task_is_no_success(self):
    """run_task with learning_rate=1e6 raises and records no results; the message advises a
    new model_dir with a lower learning rate."""
    spec, splits = testing.colour_task()
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with self.assertRaisesRegex(trainer.TrainingDivergedError,
                                r"Training diverged at step \d+: .* Lower the learning rate "
                                r"\(now learning_rate=1e\+06\) and train again in a new "
                                r"model_dir=<folder>"):
      classification.run_task(spec, splits, testing.run_config(learning_rate=1e6), model_dir,
                           progress_bar=False)
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_records.RESULTS_FILE)))
    self.assertFalse(os.path.exists(os.path.join(model_dir, trainer.COMPLETION_MARKER)))


if __name__ == "__main__":
  tf.test.main()

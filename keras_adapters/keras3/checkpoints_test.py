"""Tests of a Keras 3 run's checkpoint: what it saves and restores, its atomic write, the
checkpoint of another model refused, and the step callback that writes it."""

import os
import signal
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import checkpoints
from keras_adapters.keras3 import testing
from keras_adapters.utils import errors
from keras_adapters.utils import stop_requests


def _model(units=2, seed=0):
  """A compiled dense classifier with dropout (so a seed state among its variables)."""
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dropout(0.5, seed=seed),
                            keras.layers.Dense(units)])
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def _batches(steps, batch_size=2):
  rng = np.random.default_rng(0)
  count = steps * batch_size
  return tf.data.Dataset.from_tensor_slices(
      (rng.normal(size=(count, 3)).astype(np.float32), np.arange(count) % 2)).batch(batch_size)


def _values(model):
  return [keras.ops.convert_to_numpy(v) for v in checkpoints._variables(model)]


class SaveRestoreTest(tf.test.TestCase):

  def test_a_restored_model_and_optimizer_hold_the_saved_values_and_state(self):
    trained = _model()
    trained.fit(_batches(3), verbose=0)
    state = checkpoints.TrainingState(step=3, epoch_losses=[0.5], epoch_loss_sum=1.25)
    directory = self.get_temp_dir()
    checkpoints.save(trained, directory, state)

    fresh = _model(seed=1)  # Other weights, its optimizer not built yet.
    self.assertFalse(fresh.optimizer.built)
    self.assertEqual(checkpoints.restore(fresh, directory), state)
    self.assertEqual(int(fresh.optimizer.iterations), 3)
    saved, restored = _values(trained), _values(fresh)
    self.assertLen(restored, len(saved))
    for variable, before, after in zip(checkpoints._variables(fresh), saved, restored):
      self.assertAllEqual(after, before, msg=variable.path)
    # The dropout's seed state among them: it draws the same masks from there on.
    self.assertTrue(any("seed_generator_state" in v.path for v in checkpoints._variables(fresh)))

  def test_without_a_checkpoint_restore_returns_none(self):
    self.assertIsNone(checkpoints.restore(_model(), self.get_temp_dir()))

  def test_a_checkpoint_of_another_model_is_refused_and_assigns_nothing(self):
    directory = self.get_temp_dir()
    trained = _model(units=2)
    trained.fit(_batches(1), verbose=0)
    checkpoints.save(trained, directory, checkpoints.TrainingState())
    other = _model(units=3)
    other.fit(_batches(1), verbose=0)
    before = _values(other)
    path = os.path.join(directory, checkpoints.CHECKPOINT_FILE)
    with self.assertRaises(errors.UsageError) as caught:
      checkpoints.restore(other, directory)
    self.assertRegex(str(caught.exception),
                     rf"^{path} holds the variables of another model \(\d+ arrays, this model "
                     r"has \d+ of other shapes\): use a new model_dir, or remove that file\.$")
    for value, after in zip(before, _values(other)):
      self.assertAllEqual(after, value)

  def test_a_save_stopped_while_writing_keeps_the_previous_checkpoint(self):
    directory = self.get_temp_dir()
    model = _model()
    model.fit(_batches(1), verbose=0)
    checkpoints.save(model, directory, checkpoints.TrainingState(step=1))
    path = os.path.join(directory, checkpoints.CHECKPOINT_FILE)
    with open(path, "rb") as f:
      previous = f.read()
    model.fit(_batches(1), verbose=0)
    with mock.patch.object(os, "replace", side_effect=KeyboardInterrupt), \
        self.assertRaises(KeyboardInterrupt):
      checkpoints.save(model, directory, checkpoints.TrainingState(step=2))
    with open(path, "rb") as f:
      self.assertEqual(f.read(), previous)
    self.assertEqual(checkpoints.restore(_model(), directory).step, 1)


def _adapted_classifier(seed):
  """A tiny backbone, the same base whatever `seed`; adapters and head drawn from `seed`."""
  backbone = testing.tiny_backbone()
  keras.utils.set_random_seed(seed)
  model = kak.build_classifier(kak.adapt(backbone, kak.AdapterConfig(adapter_size=4)), 2)
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


class AdaptedBackboneTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.trained = _adapted_classifier(seed=0)
    inputs = testing.tiny_inputs(batch_size=2)
    self.trained.train_on_batch(inputs, np.array([0, 1]))
    self.directory = self.get_temp_dir()

  def assertSameVariables(self, model, expected):
    for variable, value in zip(model.variables, expected.variables):
      self.assertAllEqual(keras.ops.convert_to_numpy(variable),
                          keras.ops.convert_to_numpy(value), msg=value.path)

  def test_a_checkpoint_leaves_out_the_frozen_base_and_restores_from_it(self):
    checkpoints.save(self.trained, self.directory, checkpoints.TrainingState(step=1))
    saved = set(map(id, checkpoints._variables(self.trained)))
    left_out = [v for v in self.trained.variables if id(v) not in saved]
    # The base's kernels, biases and embeddings: not its LayerNorms, which the adapters train.
    self.assertTrue(left_out)
    self.assertFalse([v for v in left_out if v.trainable or "layer_norm" in v.path], left_out)
    self.assertEqual({v.path for v in self.trained.trainable_variables} - {
        v.path for v in checkpoints._variables(self.trained)}, set())
    restored = _adapted_classifier(seed=1)
    self.assertEqual(checkpoints.restore(restored, self.directory).step, 1)
    self.assertSameVariables(restored, self.trained)

  def test_a_checkpoint_of_every_variable_still_restores(self):
    """As versions before the frozen base was left out wrote it."""
    with mock.patch.object(checkpoints, "_variables", checkpoints._whole_model_variables):
      checkpoints.save(self.trained, self.directory, checkpoints.TrainingState(step=1))
    restored = _adapted_classifier(seed=1)
    self.assertEqual(checkpoints.restore(restored, self.directory).step, 1)
    self.assertSameVariables(restored, self.trained)


class StepCheckpointsTest(tf.test.TestCase):

  def _fit(self, tracker, steps, epochs=1, initial_epoch=0):
    model = _model()
    history = model.fit(_batches(steps).repeat(), steps_per_epoch=steps, epochs=epochs,
                        initial_epoch=initial_epoch, callbacks=[tracker], verbose=0)
    return model, history.history["loss"]

  def test_saves_every_few_steps_and_at_the_last_with_each_epoch_s_mean_loss(self):
    directory = self.get_temp_dir()
    tracker = checkpoints.StepCheckpoints(directory, every_steps=3, total_steps=4,
                                          steps_per_epoch=2, state=checkpoints.TrainingState())
    saved_at, save_checkpoint = [], checkpoints.save
    def save(model, directory, state):
      saved_at.append(state.step)
      save_checkpoint(model, directory, state)
    with mock.patch.object(checkpoints, "save", save):
      model, losses = self._fit(tracker, steps=2, epochs=2)
    self.assertEqual(saved_at, [3, 4])
    self.assertEqual(tracker.state.step, 4)
    self.assertAllClose(tracker.state.epoch_losses, losses)
    self.assertEqual(tracker.state.epoch_loss_sum, 0.0)
    restored = checkpoints.restore(_model(seed=1), directory)
    self.assertEqual(restored, tracker.state)
    self.assertEqual(int(model.optimizer.iterations), 4)

  def test_a_resumed_epoch_keeps_the_losses_of_its_steps_before_the_stop(self):
    """Resumed at step 1 of a 2-step epoch whose first step's loss was 0.5: the epoch's mean
    counts that step and the one trained now."""
    state = checkpoints.TrainingState(step=1, epoch_loss_sum=0.5)
    tracker = checkpoints.StepCheckpoints(None, every_steps=1, total_steps=2,
                                          steps_per_epoch=2, state=state)
    with mock.patch.object(checkpoints, "save") as save:
      _, losses = self._fit(tracker, steps=1)
    save.assert_not_called()  # No directory: nothing written.
    self.assertEqual(tracker.state.step, 2)
    self.assertAllClose(tracker.state.epoch_losses, [(0.5 + losses[0]) / 2])

  def test_a_stop_request_saves_the_step_under_way_and_ends_the_fit(self):
    """SIGTERM recorded during step 2 of 6 (checkpoints due every 4): step 2 is saved, and
    the fit ends there with the message naming it."""
    directory = self.get_temp_dir()
    stop = []
    tracker = checkpoints.StepCheckpoints(directory, every_steps=4, total_steps=6,
                                          steps_per_epoch=6, state=checkpoints.TrainingState(),
                                          stop=stop)
    class RequestAtStep2(keras.callbacks.Callback):
      def on_train_batch_begin(self, batch, logs=None):
        if batch == 1:
          stop.append(signal.SIGTERM)
    model = _model()
    with self.assertRaisesRegex(
        stop_requests.TrainingInterrupted,
        f"^Stopped by SIGTERM at step 2 of 6, saved in {directory}/checkpoint.npz: rerun"):
      model.fit(_batches(6), steps_per_epoch=6, callbacks=[RequestAtStep2(), tracker],
                verbose=0)
    self.assertEqual(checkpoints.restore(_model(seed=1), directory).step, 2)


if __name__ == "__main__":
  tf.test.main()

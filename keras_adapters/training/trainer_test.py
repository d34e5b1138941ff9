"""Tests for trainer.Trainer on a tiny regression model: a frozen Dense layer under a head.

`_child_main` is also run in a subprocess, which the kill-and-resume test SIGKILLs.
"""

import dataclasses
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.training import distribution
from keras_adapters.training import trainer
from keras_adapters.utils import warm_python
from keras_adapters.utils import precision
from keras_adapters.utils import testing

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NUM_STEPS = 8
_BATCH_SIZE = 8
_CHECKPOINT_EVERY_STEPS = 3
# 32 examples make 4 batches an epoch: the run has 2 epochs (each costs a new distributed
# iterator, slow under MirroredStrategy), and the checkpoint of step 6, where the kill test
# resumes, lies in the middle of epoch 1, so the epoch and the skip of consumed batches matter.
_FEATURES = np.random.RandomState(0).randn(32, 4).astype(np.float32)
_LABELS = _FEATURES @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)


def _model_fn():
  inputs = keras.Input((4,))
  hidden = keras.layers.Dense(8, activation="tanh", trainable=False, name="frozen")(inputs)
  outputs = keras.layers.Dense(1, name="head")(hidden)
  # Float32 outputs under a mixed policy, as Keras' mixed-precision guide has them.
  return keras.Model(inputs, keras.layers.Activation("linear", dtype="float32")(outputs))


def _loss_fn(labels, outputs):
  return tf.reduce_mean(tf.square(labels - outputs), axis=-1)


def _dataset_fn(shuffle_seed):
  return (tf.data.Dataset.from_tensor_slices((_FEATURES, _LABELS))
          .shuffle(len(_FEATURES), seed=shuffle_seed)
          .batch(_BATCH_SIZE, drop_remainder=True))


def _make_trainer(model_dir, **kwargs):
  args = dict(model_fn=_model_fn, loss_fn=_loss_fn, train_data=_dataset_fn,
              num_train_steps=_NUM_STEPS, learning_rate=0.05, model_dir=model_dir,
              checkpoint_every_steps=_CHECKPOINT_EVERY_STEPS, log_every_steps=2,
              progress_bar=False, seed=1)
  args.update(kwargs)
  return trainer.Trainer(**args)


def _child_main(model_dir):
  """Trains into `model_dir` and blocks at step 7, after the checkpoint of step 6."""
  def eval_fn(model):
    del model
    with open(os.path.join(model_dir, "blocked"), "w", encoding="utf-8"):
      pass
    time.sleep(600)  # Until the parent's SIGKILL.
  _make_trainer(model_dir, eval_fn=eval_fn, eval_every_steps=7, deterministic=True).train()


def _start_child(model_dir, log_path):
  # The child (a fork of the warm Python, else a fresh one) runs without conftest.py: Keras 2
  # is chosen before TensorFlow loads, and the repository root is the working directory so
  # that keras_adapters imports.
  code = ("import os, sys; os.environ['TF_USE_LEGACY_KERAS'] = '1'; "
          "from keras_adapters.training import trainer_test; "
          "trainer_test._child_main(sys.argv[1])")
  with open(log_path, "w", encoding="utf-8") as log:
    return subprocess.Popen(
        warm_python.command("-c", code, model_dir), cwd=_REPO_ROOT, stdout=log,
        stderr=subprocess.STDOUT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def _scalars(event_dir):
  """Reads the TensorBoard scalars of `event_dir` as {tag: {step: value}}."""
  scalars = {}
  for path in glob.glob(os.path.join(event_dir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        scalars.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
  return scalars


class TrainerTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._child_dir, child_log_dir, cls._reference_dir = [tempfile.mkdtemp() for _ in range(3)]
    for path in (cls._child_dir, child_log_dir, cls._reference_dir):
      cls.addClassCleanup(shutil.rmtree, path, ignore_errors=True)
    # The child of the kill test spends seconds importing TensorFlow: it starts first and
    # runs alongside the other tests. Class cleanups run even if setUpClass fails.
    cls._child_log = os.path.join(child_log_dir, "child.log")
    cls._child = _start_child(cls._child_dir, cls._child_log)
    cls.addClassCleanup(cls._child.wait)
    cls.addClassCleanup(cls._child.kill)
    # One uninterrupted run, the reference of several tests.
    cls._initial_weights = {}
    cls._eval_calls = []
    def model_fn():
      model = _model_fn()
      cls._initial_weights.update({v.name: v.numpy().tobytes() for v in model.variables})
      return model
    def eval_fn(model):
      cls._eval_calls.append(model)
      return {"mse": 0.5}
    cls._reference = _make_trainer(cls._reference_dir, model_fn=model_fn, eval_fn=eval_fn,
                                   eval_every_steps=4)
    cls._reference_result = cls._reference.train()

  def assertSameWeights(self, model, expected_model, atol):
    for weight, expected in zip(model.get_weights(), expected_model.get_weights()):
      self.assertAllClose(weight, expected, rtol=0, atol=atol)

  def test_trains_and_logs(self):
    result = self._reference_result
    self.assertEqual(result.step, _NUM_STEPS)
    self.assertEqual(result.start_step, 0)
    self.assertTrue(np.isfinite(result.loss))
    self.assertAllClose(result.examples_per_sec, result.steps_per_sec * _BATCH_SIZE)
    self.assertEqual(result.eval_metrics, {"mse": 0.5})
    self.assertEqual(self._eval_calls, [self._reference.model] * 2)  # Step 4 and the end.
    self.assertEqual(os.path.basename(result.checkpoint_path), f"ckpt-{_NUM_STEPS}")
    train_scalars = _scalars(os.path.join(self._reference_dir, "summaries", "train"))
    self.assertEqual(sorted(train_scalars["loss"]), [2, 4, 6, 8])
    # 10% of 8 steps is no warmup step: the rate used by step 8 is 0.05 * (8 - 7) / 8.
    self.assertAllClose(train_scalars["learning_rate"][8], 0.05 / 8)
    self.assertEqual(_scalars(os.path.join(self._reference_dir, "summaries", "eval"))["mse"],
                     {4: 0.5, 8: 0.5})

  def test_the_step_is_traced_once(self):
    """The optimizer's slots exist before the first step, so its trace is the only one."""
    self.assertEqual(self._reference._train_step.experimental_get_tracing_count(), 1)
    self.assertEqual(self._reference._loss_and_gradients.experimental_get_tracing_count(), 1)

  def test_batches_padded_to_other_lengths_share_one_trace(self):
    """Per-batch padding gives batches of several lengths: the step is traced once, for the
    data's spec (length open), not for the first batch's length and again relaxed."""
    def train_data(seed):
      del seed
      lengths = tf.data.Dataset.range(8).map(lambda i: tf.cast(i % 3 + 1, tf.int32))
      return lengths.map(lambda n: (tf.ones([n, 4]), tf.ones([1]))).padded_batch(
          2, padded_shapes=([None, 4], [1]))

    def model_fn():
      inputs = keras.Input((None, 4))
      return keras.Model(inputs, keras.layers.Dense(1)(
          keras.layers.GlobalAveragePooling1D()(inputs)))

    stepper = _make_trainer(self.create_tempdir().full_path, model_fn=model_fn,
                            train_data=train_data, num_train_steps=4)
    self.assertEqual(sorted({int(batch[0].shape[1]) for batch in train_data(0)}), [2, 3])
    stepper.train()
    self.assertEqual(stepper._train_step.experimental_get_tracing_count(), 1)

  def test_the_step_is_traced_without_autograph(self):
    """Autograph would convert the step's, the model's and the optimizer's source as the step
    is first traced; the step branches on Python values only."""
    with testing.autograph_conversions() as converted:
      _make_trainer(self.create_tempdir().full_path, num_train_steps=1).train()
    self.assertEmpty([name for name in converted if name.startswith("Trainer.")], converted)

  def test_same_seed_same_weights(self):
    same_seed = _make_trainer(self.create_tempdir().full_path)
    same_seed.train()
    self.assertSameWeights(same_seed.model, self._reference.model, atol=0)

  def test_frozen_variables_stay_bitwise_unchanged(self):
    model = self._reference.model
    self.assertNotEmpty(model.non_trainable_variables)
    for variable in model.non_trainable_variables:
      self.assertEqual(variable.numpy().tobytes(), self._initial_weights[variable.name],
                       variable.name)
    for variable in model.trainable_variables:
      self.assertNotEqual(variable.numpy().tobytes(), self._initial_weights[variable.name],
                          variable.name)

  def test_resumes_after_kill_with_the_weights_of_an_uninterrupted_run(self):
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(self._child_dir, "blocked")):
      if self._child.poll() is not None or time.time() > deadline:
        with open(self._child_log, encoding="utf-8") as log:
          self.fail(f"The child did not reach step 7:\n{log.read()[-3000:]}")
      time.sleep(0.1)
    os.kill(self._child.pid, signal.SIGKILL)
    self.assertEqual(self._child.wait(), -signal.SIGKILL)
    # Step 7 was trained, but only step 6 was saved; the run is not finished.
    self.assertEqual(os.path.basename(tf.train.latest_checkpoint(self._child_dir)), "ckpt-6")
    self.assertFalse(os.path.exists(os.path.join(self._child_dir, trainer.COMPLETION_MARKER)))

    resumed = _make_trainer(self._child_dir)
    result = resumed.train()

    self.assertEqual((result.start_step, result.step), (6, _NUM_STEPS))
    self.assertSameWeights(resumed.model, self._reference.model, atol=1e-6)

  def test_sigterm_or_ctrl_c_saves_the_current_step_and_resumes_from_it(self):
    """A signal during step 4 stops after it with ckpt-4 (between the periodic checkpoints of
    steps 3 and 6) and a message naming it; a rerun resumes at step 4 and ends with the
    weights of an uninterrupted run. The handlers before training are back afterwards."""
    for signal_number in (signal.SIGTERM, signal.SIGINT):
      with self.subTest(signal=signal_number.name):
        model_dir = self.create_tempdir().full_path
        def eval_fn(model, signal_number=signal_number):
          del model
          os.kill(os.getpid(), signal_number)
          return {}
        before = signal.getsignal(signal_number)
        with self.assertRaisesRegex(
            trainer.TrainingInterrupted,
            rf"^Stopped by {signal_number.name} at step 4 of {_NUM_STEPS}, saved in "
            rf"{model_dir}/ckpt-4: rerun the same command to resume from it.$") as stop:
          _make_trainer(model_dir, eval_fn=eval_fn, eval_every_steps=4).train()
        self.assertEqual(stop.exception.exit_status, 128 + signal_number)
        self.assertIs(signal.getsignal(signal_number), before)
        self.assertEqual(os.path.basename(tf.train.latest_checkpoint(model_dir)), "ckpt-4")
        seconds_to_step_4 = tf.train.load_variable(os.path.join(model_dir, "ckpt-4"),
                                                   "train_seconds/.ATTRIBUTES/VARIABLE_VALUE")
        self.assertGreater(seconds_to_step_4, 0)
        resumed = _make_trainer(model_dir)
        result = resumed.train()
        self.assertEqual(result.start_step, 4)
        # The run's time: the stopped call's up to its checkpoint, then the resumed call's.
        self.assertAllClose(result.train_seconds, seconds_to_step_4 + result.wall_time_s)
        self.assertSameWeights(resumed.model, self._reference.model, atol=1e-6)

  def test_a_checkpoint_saved_before_the_time_was_kept_resumes(self):
    """A checkpoint without `train_seconds` (saved by an earlier version) is resumed from; the
    time before it counts 0, and a marker without it reads as the call's time."""
    model_dir = self.create_tempdir().full_path
    earlier = _make_trainer(model_dir)
    earlier._build()
    earlier._step.assign(4)
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=earlier.model, optimizer=earlier._optimizer,
                            step=earlier._step, epoch=earlier._epoch,
                            batch_in_epoch=earlier._batch_in_epoch),
        model_dir, max_to_keep=3, checkpoint_name=trainer.CHECKPOINT_NAME).save(4)
    result = _make_trainer(model_dir).train()
    self.assertEqual(result.start_step, 4)
    self.assertEqual(result.train_seconds, result.wall_time_s)
    recorded = dataclasses.asdict(result)
    del recorded["train_seconds"]
    self.assertEqual(trainer.TrainResult(**recorded), result)

  def test_a_checkpoint_holds_the_trained_weights_not_the_frozen_ones(self):
    checkpoint = self._reference_result.checkpoint_path
    weights = {name: shape for name, shape in tf.train.list_variables(checkpoint)
               if name.startswith("trained/") and "OPTIMIZER_SLOT" not in name}
    # The head's kernel and bias; not the frozen layer's [4, 8] kernel and [8] bias.
    self.assertEqual(sorted(weights.values()), [[1], [8, 1]])
    self.assertFalse([name for name, _ in tf.train.list_variables(checkpoint)
                      if name.startswith("model/")])
    keras.utils.set_random_seed(1)  # The run's seed: model_fn builds the same frozen layer.
    restored = trainer.restore_trained_weights(_model_fn(), checkpoint)
    self.assertSameWeights(restored, self._reference.model, atol=0)

  def test_a_checkpoint_of_the_whole_model_restores_every_weight(self):
    """As versions before the trained weights alone were saved wrote it."""
    path = tf.train.Checkpoint(model=self._reference.model).write(
        os.path.join(self.create_tempdir().full_path, "ckpt"))
    keras.utils.set_random_seed(7)  # Another frozen layer: the checkpoint's replaces it.
    restored = trainer.restore_trained_weights(_model_fn(), path)
    self.assertSameWeights(restored, self._reference.model, atol=0)

  def test_trained_variables_leave_out_only_what_frozen_layers_hold(self):
    inputs = keras.Input((4,))
    frozen = keras.layers.Dense(3, trainable=False, name="frozen")
    norm = keras.layers.BatchNormalization(name="norm")
    model = keras.Model(inputs, norm(frozen(inputs)))
    # The moving statistics train without gradients: they are kept, the frozen kernel not.
    self.assertEqual([v.name for v in trainer.trained_variables(model)],
                     [v.name for v in norm.variables])

  def test_a_finished_run_is_not_trained_again(self):
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self._reference_dir, model_dir)
    marker = os.path.join(model_dir, trainer.COMPLETION_MARKER)
    with open(marker, encoding="utf-8") as f:
      self.assertEqual(json.load(f)["step"], _NUM_STEPS)

    def model_fn():
      raise AssertionError("A finished run must not build a model.")
    again = _make_trainer(model_dir, model_fn=model_fn)
    self.assertEqual(again.train(), dataclasses.replace(
        self._reference_result, checkpoint_path=os.path.join(model_dir, f"ckpt-{_NUM_STEPS}")))
    self.assertIsNone(again.model)

    # Killed between the final checkpoint and the marker: it restores, trains no step.
    os.remove(marker)
    rerun = _make_trainer(model_dir)
    result = rerun.train()
    self.assertEqual((result.start_step, result.step, result.loss),
                     (_NUM_STEPS, _NUM_STEPS, None))
    self.assertTrue(os.path.exists(marker))
    self.assertSameWeights(rerun.model, self._reference.model, atol=0)

  def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(self):
    model_dir = self.create_tempdir().full_path
    # Unshuffled; batch 3 (step 4, after the checkpoint of step 2, which step 3 confirmed)
    # has a NaN label.
    labels = _LABELS.copy()
    labels[3 * _BATCH_SIZE] = np.nan
    dataset = tf.data.Dataset.from_tensor_slices((_FEATURES, labels)).batch(_BATCH_SIZE)

    with self.assertRaisesRegex(
        trainer.TrainingDivergedError,
        r"diverged at step 4: loss nan\. Nothing was saved after it; the last good checkpoint "
        r"is .*ckpt-2\. Lower the learning rate \(now learning_rate=0\.05\) and train again "
        r"in a new model_dir=<folder> \(a rerun in this one resumes from ckpt-2\)"):
      _make_trainer(model_dir, train_data=dataset, checkpoint_every_steps=2).train()

    self.assertEqual(os.path.basename(tf.train.latest_checkpoint(model_dir)), "ckpt-2")
    self.assertEmpty(glob.glob(os.path.join(model_dir, "ckpt-[3-9]*")))
    self.assertFalse(os.path.exists(os.path.join(model_dir, trainer.COMPLETION_MARKER)))
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    for name in reader.get_variable_to_shape_map():
      if "model" in name and reader.get_variable_to_dtype_map()[name].is_floating:
        self.assertTrue(np.all(np.isfinite(reader.get_tensor(name))), name)

  def test_the_host_reads_the_steps_once_per_log_interval(self):
    """No checkpoint or evaluation due: the 8 steps' outputs are read from the device twice,
    4 at a time, and train exactly as when read every 2 or 3 steps."""
    reads = []
    read_steps = trainer.Trainer._read_steps

    def recording_read_steps(self, first_step, outputs):
      reads.append((first_step, len(outputs)))
      return read_steps(self, first_step, outputs)

    seldom = _make_trainer(self.create_tempdir().full_path, log_every_steps=4,
                           checkpoint_every_steps=100)
    with mock.patch.object(trainer.Trainer, "_read_steps", recording_read_steps):
      result = seldom.train()
    self.assertEqual(reads, [(1, 4), (5, 4)])
    self.assertEqual(result.loss, self._reference_result.loss)
    self.assertAllClose(result.examples_per_sec, result.steps_per_sec * _BATCH_SIZE)
    self.assertSameWeights(seldom.model, self._reference.model, atol=0)

  def test_divergence_read_later_is_reported_at_its_step(self):
    """A NaN loss at step 3, read at step 4 with the others of the interval: the error names
    step 3, and nothing was saved."""
    model_dir = self.create_tempdir().full_path
    labels = _LABELS.copy()
    labels[2 * _BATCH_SIZE] = np.nan
    dataset = tf.data.Dataset.from_tensor_slices((_FEATURES, labels)).batch(_BATCH_SIZE)
    with self.assertRaisesRegex(trainer.TrainingDivergedError,
                                r"diverged at step 3: loss nan\. Nothing was saved after it; "
                                r"the last good checkpoint is none\."):
      _make_trainer(model_dir, train_data=dataset, log_every_steps=4,
                    checkpoint_every_steps=100).train()
    self.assertIsNone(tf.train.latest_checkpoint(model_dir))

  def test_unreadable_latest_checkpoint_falls_back_to_the_one_before(self):
    """A latest checkpoint cut short is skipped with a warning and deleted; training resumes
    from the one before and ends with the uninterrupted run's weights."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self._reference_dir, model_dir)
    os.remove(os.path.join(model_dir, trainer.COMPLETION_MARKER))
    data_file, = glob.glob(os.path.join(model_dir, f"ckpt-{_NUM_STEPS}.data-*"))
    with open(data_file, "r+b") as f:
      f.truncate(os.path.getsize(data_file) // 2)

    resumed = _make_trainer(model_dir)
    with self.assertLogs("absl", "WARNING") as logs:
      result = resumed.train()

    self.assertIn(f"Cannot read the checkpoint {model_dir}/ckpt-{_NUM_STEPS}", logs.output[0])
    self.assertIn(f"Resuming from {model_dir}/ckpt-6 instead of the unreadable "
                  f"ckpt-{_NUM_STEPS}", logs.output[1])
    self.assertEqual((result.start_step, result.step), (6, _NUM_STEPS))
    self.assertSameWeights(resumed.model, self._reference.model, atol=1e-6)

    for path in glob.glob(os.path.join(model_dir, "ckpt-*.index")):
      with open(path, "r+b") as f:
        f.truncate(10)
    with self.assertRaisesRegex(ValueError,
                                "None of the checkpoints .* can be read.*new model_dir="):
      _make_trainer(model_dir, num_train_steps=_NUM_STEPS + 1).train()

  def test_save_leftovers_are_deleted(self):
    """What an interrupted save leaves (TensorFlow's staging folder and temporary files) is
    gone after the next run."""
    model_dir = self.create_tempdir().full_path
    leftovers = [os.path.join(model_dir, name) for name in (
        "ckpt-3_temp", "ckpt-3.data-00000-of-00001.tempstate123", "checkpoint.tmp4f2a")]
    os.makedirs(os.path.join(leftovers[0], "part-00000-of-00001"))
    for path in leftovers[1:]:
      with open(path, "wb") as f:
        f.write(b"\0")
    _make_trainer(model_dir, num_train_steps=1).train()
    for path in leftovers:
      self.assertFalse(os.path.exists(path), path)

  def test_two_replicas_match_one(self):
    strategy = distribution.get_strategy("mirrored")
    self.assertEqual(strategy.num_replicas_in_sync, 2)
    mirrored = _make_trainer(self.create_tempdir().full_path, strategy=strategy)
    result = mirrored.train()
    self.assertAllClose(result.examples_per_sec, result.steps_per_sec * _BATCH_SIZE)
    # Not 0: each replica sums its half of the batch and the halves are then added, a
    # different float32 summation order from one device's; Adam keeps the drift tiny.
    self.assertSameWeights(mirrored.model, self._reference.model, atol=1e-5)

  def test_step_function_is_the_training_step_and_leaves_model_dir_alone(self):
    trained = _make_trainer(self.create_tempdir().full_path, num_train_steps=1)
    trained.train()
    model_dir = os.path.join(self.create_tempdir().full_path, "never_written")
    stepper = _make_trainer(model_dir, num_train_steps=1)
    step = stepper.step_function()
    first_batch = next(iter(_dataset_fn(trainer._epoch_seed(1, 0))))
    self.assertTrue(np.isfinite(float(step(first_batch))))
    self.assertSameWeights(stepper.model, trained.model, atol=0)
    self.assertFalse(os.path.exists(model_dir))

  def test_xla_compiled_steps_train_like_uncompiled_ones(self):
    for strategy in ("default", "mirrored"):
      with self.subTest(strategy=strategy):
        compiled = _make_trainer(self.create_tempdir().full_path, jit_compile=True,
                                 strategy=distribution.get_strategy(strategy))
        result = compiled.train()
        # XLA fuses and reorders float32 arithmetic; over 8 Adam steps the drift stays tiny.
        self.assertAllClose(result.loss, self._reference_result.loss, rtol=1e-4)
        self.assertSameWeights(compiled.model, self._reference.model, atol=1e-4)

  def test_mixed_precision_trains_with_float32_variables(self):
    for policy, expect_loss_scaling in (("bfloat16", False), ("float16", True)):
      with self.subTest(policy=policy), precision.policy_scope(policy):
        mixed = _make_trainer(self.create_tempdir().full_path)
        result = mixed.train()
        self.assertEqual(mixed.model.compute_dtype, policy)
        self.assertEqual({v.dtype for v in mixed.model.variables}, {tf.float32})
        self.assertEqual(isinstance(mixed._optimizer, keras.mixed_precision.LossScaleOptimizer),
                         expect_loss_scaling)
        # bfloat16 keeps 8 bits of mantissa, float16 11: the same 8 steps end near the float32
        # run's loss, not at it.
        self.assertAllClose(result.loss, self._reference_result.loss, rtol=0.1)

  def test_float16_overflow_steps_are_skipped_not_divergence(self):
    def overflowing_loss(labels, outputs):
      # Scaled by the initial loss scale 2**15, the gradient of 1e3 * loss overflows float16
      # (65504) on its way back through the float16 layers; the scaler must skip those steps
      # and lower the scale until it fits.
      return 1e3 * _loss_fn(labels, outputs)
    with precision.policy_scope("float16"):
      mixed = _make_trainer(self.create_tempdir().full_path, loss_fn=overflowing_loss,
                            learning_rate=1e-3, num_train_steps=16)
      result = mixed.train()
    self.assertTrue(np.isfinite(result.loss))
    self.assertLess(float(mixed._optimizer.loss_scale), 2.0**15)
    self.assertGreaterEqual(float(mixed._optimizer.loss_scale), 1.0)
    self.assertTrue(all(np.isfinite(w).all() for w in mixed.model.get_weights()))

  def test_bad_input_raises_clear_errors(self):
    model_dir = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, "num_train_steps must be a positive integer"):
      _make_trainer(model_dir, num_train_steps=0)
    with self.assertRaisesRegex(ValueError, "eval_every_steps must be a positive integer"):
      _make_trainer(model_dir, eval_fn=lambda model: {}, eval_every_steps=0)
    with self.assertRaisesRegex(ValueError, "eval_every_steps is set but eval_fn is None"):
      _make_trainer(model_dir, eval_every_steps=5)
    with self.assertRaisesRegex(TypeError, "train_data must be a tf.data.Dataset"):
      _make_trainer(model_dir, train_data=[1, 2])
    with self.assertRaisesRegex(ValueError, "one loss per example.*Reduction.NONE"):
      _make_trainer(model_dir, loss_fn=lambda y, o: tf.reduce_mean(_loss_fn(y, o))).train()
    with self.assertRaisesRegex(ValueError, r"\(features, labels\) pairs"):
      _make_trainer(model_dir, train_data=tf.data.Dataset.from_tensor_slices(
          _FEATURES).batch(4)).train()
    with self.assertRaisesRegex(ValueError, "Epoch 0 of the training data has no batch"):
      _make_trainer(model_dir, train_data=lambda seed: _dataset_fn(seed).take(0)).train()

    _make_trainer(model_dir, num_train_steps=2).train()
    def other_model_fn():
      inputs = keras.Input((4,))
      return keras.Model(inputs, keras.layers.Dense(3, name="head")(inputs))
    with self.assertRaisesRegex(ValueError, "does not match this model.*new model_dir=<folder>"):
      _make_trainer(model_dir, model_fn=other_model_fn).train()
    with self.assertRaisesRegex(ValueError, "past num_train_steps=1"):
      _make_trainer(model_dir, num_train_steps=1, warmup_fraction=0.0).train()


if __name__ == "__main__":
  tf.test.main()

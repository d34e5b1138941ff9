"""Tests of the Keras 3 runner: a run on the tiny TF Hub base (TensorFlow, in this process),
data parallel JAX on two host devices against one (subprocesses), bfloat16, and refusals."""

import functools
import json
import os
import shutil
import subprocess
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.core import config_definitions
from keras_adapters.data import examples as examples_lib
from keras_adapters.keras3 import checkpoints
from keras_adapters.keras3 import testing
from keras_adapters.keras3 import training
from keras_adapters.keras3 import training_testing
from keras_adapters.tasks import testing as task_testing
from keras_adapters.training import optimization
from keras_adapters.utils import errors
from keras_adapters.utils import testing as utils_testing
from keras_adapters.utils import warm_python


@functools.lru_cache(maxsize=None)
def _tiny_preprocessor():
  """The tiny preprocessing model as a keras-hub preprocessor, restored from its SavedModel
  once for the tests that tokenize with it (`training.tokenize` only calls it)."""
  return kak.preprocessor_from_tf_hub(training_testing.tiny_handles()[1])


def _config(**settings):
  """A run config of the tiny base (handles that are never read unless a run starts)."""
  values = dict(hub_handle="unread/encoder", preprocess_handle="unread/preprocess",
                adapter_size=4, learning_rate=1e-2, epochs=2.0, batch_size=4,
                max_seq_length=training_testing.SEQ_LENGTH)
  return config_definitions.ExperimentConfig.from_settings(**{**values, **settings})


# One data parallel run's numbers, in a process of its own on JAX with as many host devices as
# `XLA_FLAGS` gives it: a tiny adapted classifier without dropout trained four steps of four
# examples.
_DATA_PARALLEL_RUN = """
import json, keras, numpy as np
from keras_adapters.keras3 import testing, training
from keras_adapters.keras3 import training_test
config = training_test._config()
distribution = training.data_parallel(config.trainer.batch_size)
inputs, labels = testing.tiny_inputs(batch_size=8), np.array([0, 1] * 4)
with training.scope(distribution):
  model = training.task_model(testing.tiny_backbone(), 2, config,
                              distributed=distribution is not None, dropout_rate=0.0)
  losses = training.fit(model, inputs, labels, config.trainer)
  logits = training.predict(model, inputs, distribution)
try:
  training.data_parallel(3)
  refusal = None
except Exception as error:
  refusal = str(error)
report = dict(devices=len(keras.distribution.list_devices()), losses=losses,
              logits=logits.tolist(), refusal=refusal)
"""

# Then, with two devices: a run stopped at step 7 of 8 and resumed from its checkpoint of
# step 6 (mid second epoch), and the same run not stopped: the tiny adapted classifier with
# dropout, eight examples in batches of two.
_RESUMED_RUN = """
import tempfile
config = training_test._config(checkpoint_every_steps=2, batch_size=2)
distribution = training.data_parallel(config.trainer.batch_size)
def run(model_dir, stop_at=None):
  with training.scope(distribution):
    model = training.task_model(testing.tiny_backbone(dropout=0.1), 2, config,
                                distributed=True)
    try:
      with training_test._stopping_at(stop_at):
        losses = training.fit(model, inputs, labels, config.trainer, checkpoint_dir=model_dir)
    except KeyboardInterrupt:
      return None
    return dict(losses=losses, logits=training.predict(model, inputs, distribution).tolist())
model_dir = tempfile.mkdtemp()
stopped = run(model_dir, stop_at=7)
recording, steps = training_test._steps_trained()
with recording:
  resumed = run(model_dir)
report["resume"] = dict(stopped=stopped, resumed=resumed, resumed_steps=steps,
                        not_stopped=run(tempfile.mkdtemp()))
"""


def _jax_run(devices, code):
  """A process of its own on JAX with `devices` host devices running `code`, which leaves its
  numbers in `report`: started; `_report` waits for them."""
  environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  environ.update(KERAS_BACKEND="jax",
                 XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
  return subprocess.Popen(warm_python.command("-c", code + "print(json.dumps(report))"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=environ)


def _report(child):
  stdout, stderr = child.communicate(timeout=900)
  if child.returncode:
    raise AssertionError(stderr[-3000:])
  return json.loads(stdout.strip().splitlines()[-1])


class JaxTest(tf.test.TestCase):
  """Data parallel training on two JAX host devices against one, and a stopped run resumed
  on two: one Python per device count, both at once, shared by the tests."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    children = (_jax_run(2, _DATA_PARALLEL_RUN + _RESUMED_RUN), _jax_run(1, _DATA_PARALLEL_RUN))
    cls.two, cls.one = [_report(child) for child in children]

  def test_two_jax_devices_train_as_one(self):
    """The same losses and outputs on two host devices (data parallel) as on one, and a
    batch the two cannot share refused in one line."""
    self.assertEqual((self.two["devices"], self.one["devices"]), (2, 1))
    self.assertLen(self.two["losses"], 2)
    self.assertAllClose(self.two["losses"], self.one["losses"], atol=1e-5)
    self.assertAllClose(self.two["logits"], self.one["logits"], atol=1e-5)
    self.assertEqual(
        self.two["refusal"], "batch_size=3 cannot be split evenly over the 2 JAX devices that "
        "train data parallel: give a multiple of 2, e.g. batch_size=2.")
    # One device: no distribution, and so no refusal.
    self.assertIsNone(self.one["refusal"])

  def test_a_stopped_jax_run_resumes_to_the_results_of_one_not_stopped(self):
    run = self.two["resume"]
    self.assertIsNone(run["stopped"])
    self.assertEqual(run["resumed_steps"], [7, 8])
    self.assertAllClose(run["resumed"]["losses"], run["not_stopped"]["losses"], atol=1e-5)
    self.assertAllClose(run["resumed"]["logits"], run["not_stopped"]["logits"], atol=1e-5)


class PrecisionTest(tf.test.TestCase):

  def test_mixed_bfloat16_trains_with_float32_weights_and_logits(self):
    base = testing.tiny_backbone()
    model = training.task_model(base, 3, _config(mixed_precision="bfloat16", lora_r=2,
                                                 method="lora"))
    backbone = model.get_layer(base.name)
    self.assertIsNot(backbone, base)  # The run's copy; the float32 base stays as it was.
    self.assertEqual(backbone.transformer_layers[0].compute_dtype, "bfloat16")
    self.assertAllEqual(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings),
                        keras.ops.convert_to_numpy(base.token_embedding.embeddings))
    inputs = testing.tiny_inputs()
    self.assertEqual(keras.ops.convert_to_numpy(model(inputs)).dtype, np.float32)
    trained = {w.path: keras.ops.convert_to_numpy(w) for w in model.trainable_weights}
    self.assertTrue(any("lora" in path for path in trained))
    self.assertEqual({str(w.dtype) for w in model.trainable_weights}, {"float32"})
    losses = training.fit(model, inputs, np.array([0, 1, 2]), _config().trainer)
    self.assertTrue(np.isfinite(losses).all())
    self.assertTrue(any(np.abs(keras.ops.convert_to_numpy(w) - trained[w.path]).max() > 0
                        for w in model.trainable_weights))


class OptimizerTest(tf.test.TestCase):

  def test_the_schedule_is_the_keras2_path_s(self):
    keras2 = optimization.create_optimizer(1e-3, 50, warmup_fraction=0.1)
    keras3 = training.create_optimizer(_config(learning_rate=1e-3).trainer, 50)
    for step in (0, 1, 4, 5, 6, 25, 49, 50, 60):
      keras3.iterations.assign(step)
      self.assertAllClose(float(keras3.learning_rate), float(keras2.learning_rate(step)),
                          atol=1e-9, msg=str(step))
    self.assertEqual(keras3.global_clipnorm, 1.0)

  def test_layer_norms_and_biases_are_not_decayed(self):
    optimizer = training.create_optimizer(_config(weight_decay=0.1).trainer, 50)
    variables = [keras.Variable(np.ones(2, np.float32), name=name)
                 for name in ("kernel", "bias", "gamma", "beta", "lora_a")]
    optimizer.build(variables)
    optimizer.iterations.assign(5)  # The end of warmup: the peak rate.
    optimizer.apply_gradients([(np.zeros(2, np.float32), v) for v in variables])
    decayed = {v.name: bool(keras.ops.convert_to_numpy(v)[0] < 1.0) for v in variables}
    self.assertEqual(decayed, dict(kernel=True, bias=False, gamma=False, beta=False,
                                   lora_a=True))


class RefusalTest(tf.test.TestCase):

  def test_settings_the_keras3_path_lacks_are_refused_before_any_work(self):
    """Each refused by `run_task` before the (unreadable) base is read."""
    spec, splits = task_testing.colour_task()
    cases = {
        "original_ln_after": dict(original_ln_after=False),
        "tuning": dict(method="full"),
        "strategy='mirrored'": dict(strategy="mirrored"),
        "recompute_attention='always'": dict(recompute_attention="always"),
    }
    for named, settings in cases.items():
      with self.assertRaises(errors.UsageError, msg=named) as caught:
        training.run_task(spec, splits, _config(**settings), self.get_temp_dir())
      message = str(caught.exception)
      self.assertIn(named, message)
      self.assertNotIn("\n", message)

  def test_a_precision_the_cpu_kernel_cap_would_crash_is_refused_on_tensorflow(self):
    """As on Keras 2 (`cpu_kernels.check_sixteen_bit`), on this process's backend; JAX
    computes with XLA's kernels, which the cap does not touch."""
    self.assertEqual(keras.backend.backend(), "tensorflow")
    spec, splits = task_testing.colour_task()
    with utils_testing.avx512_cpu_capped_at_avx2():
      with self.assertRaisesRegex(errors.UsageError, "Computing in bfloat16 with "
                                  "ONEDNN_MAX_CPU_ISA=AVX2 would crash TensorFlow"):
        training.run_task(spec, splits, _config(mixed_precision="bfloat16"), self.get_temp_dir())

  def test_a_keras2_run_folder_is_refused(self):
    model_dir = self.get_temp_dir()
    with open(os.path.join(model_dir, "run.json"), "w", encoding="utf-8") as f:
      f.write("{}")
    spec, splits = task_testing.colour_task()
    with self.assertRaisesRegex(errors.UsageError, "holds a Keras 2 run"):
      training.run_task(spec, splits, _config(), model_dir)


class TokenizeTest(tf.test.TestCase):

  def test_pairs_of_texts_are_packed_as_two_segments(self):
    pairs = examples_lib.TextExamples(ids=["a"], texts=(["w1 w2"], ["w3"]))
    features = training.tokenize(_tiny_preprocessor(), pairs)
    self.assertEqual(features["segment_ids"][0, :6].tolist(), [0, 0, 0, 0, 1, 1])
    self.assertEqual(features["padding_mask"][0].sum(), 6)

  def test_splits_packed_in_one_pass_are_each_packed_as_alone(self):
    splits = {"train": examples_lib.TextExamples(ids=["a", "b"], texts=(["w1 w2", "w3"],)),
              "empty": examples_lib.TextExamples(ids=[], texts=([],)),
              "test": examples_lib.TextExamples(ids=["c"], texts=(["w4 w5 w6"],))}
    preprocessor = _tiny_preprocessor()
    together = training.tokenize_splits(preprocessor, splits)
    # Above `EAGER_TEXTS`, through a tf.data pipeline: the same features.
    with mock.patch.object(training, "EAGER_TEXTS", 0):
      piped = training.tokenize_splits(preprocessor, splits)
    self.assertEqual(list(together), list(splits))
    for name in ("train", "test"):
      alone = training.tokenize(preprocessor, splits[name])
      for key, value in alone.items():
        self.assertAllEqual(together[name][key], value, msg=f"{name} {key}")
        self.assertAllEqual(piped[name][key], value, msg=f"{name} {key}")
        self.assertEqual(together["empty"][key].shape, (0, value.shape[1]))


def _stopping_at(step):
  """A `StepCheckpoints.on_train_batch_end` that stops training, as Ctrl-C or SIGTERM
  under `cli.run` do, once `step` steps are done."""
  on_train_batch_end = checkpoints.StepCheckpoints.on_train_batch_end
  def stop(callback, batch, logs=None):
    on_train_batch_end(callback, batch, logs)
    if callback.state.step == step:
      raise KeyboardInterrupt
  return mock.patch.object(checkpoints.StepCheckpoints, "on_train_batch_end", stop)


def _steps_trained():
  """Patches `StepCheckpoints.on_train_batch_end` to record each step it ends; returns the
  patch and the list."""
  steps = []
  on_train_batch_end = checkpoints.StepCheckpoints.on_train_batch_end
  def record(callback, batch, logs=None):
    on_train_batch_end(callback, batch, logs)
    steps.append(callback.state.step)
  return mock.patch.object(checkpoints.StepCheckpoints, "on_train_batch_end", record), steps


_NOT_TRAINED = mock.patch.object(keras.Model, "fit", side_effect=AssertionError("trained"))


class RunTaskTest(tf.test.TestCase):
  """One run of the colour task on the tiny base (18 examples in batches of 4: two epochs of
  5 steps, a checkpoint every 3) with unlabelled examples and an export, trained once on the
  TensorFlow backend; each test checks it, or stops or reruns into a copy."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "keras3_run_task_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    cls.hub_handle, cls.preprocess_handle = training_testing.tiny_handles()
    cls.spec, cls.splits = task_testing.colour_task()
    cls.splits["unlabelled"] = task_testing.examples(5, seed=3, labelled=False, prefix="u")
    cls.config = _config(hub_handle=cls.hub_handle, preprocess_handle=cls.preprocess_handle,
                         checkpoint_every_steps=3)
    cls.run_dir = os.path.join(cls.root, "run")
    cls.export_dir = os.path.join(cls.root, "export")
    cls.results = training.run_task(cls.spec, cls.splits, cls.config, cls.run_dir,
                                    export_dir=cls.export_dir)

  def _copy(self):
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self.run_dir, model_dir)
    return model_dir

  def test_a_run_scores_exports_and_its_artifact_serves_its_predictions(self):
    """The results, an artifact `kak.load_task_model` rebuilds to the run's predictions, and
    a SavedModel that serves them from raw text."""
    results = self.results
    self.assertEqual((results["keras"], results["backend"], results["devices"]),
                     (3, "tensorflow", 1))
    self.assertEqual(sorted(results["metrics"]), ["test", "validation"])
    self.assertBetween(results["metrics"]["test"]["accuracy"], 0.0, 1.0)
    self.assertLen(results["train_losses"], 2)
    with open(os.path.join(self.run_dir, training.RESULTS_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["metrics"], results["metrics"])
    predicted = results["predictions"]["unlabelled"]["values"]

    loaded = kak.load_task_model(os.path.join(self.export_dir, "adapters"),
                                 kak.from_tf_hub(self.hub_handle))
    self.assertEqual(loaded.head_config["label_names"], task_testing.LABEL_NAMES)
    features = training.tokenize(_tiny_preprocessor(), self.splits["unlabelled"])
    self.assertEqual(np.argmax(training.predict(loaded, features), -1).tolist(), predicted)
    served = tf.saved_model.load(os.path.join(self.export_dir, "saved_model")).signatures[
        "serving_default"](text=tf.constant(list(self.splits["unlabelled"].texts[0])))
    self.assertEqual(np.argmax(served["probabilities"], -1).tolist(), predicted)

  def test_a_stopped_run_resumes_from_its_last_checkpoint_to_the_same_results(self):
    """Stopped at step 7 of 10 (mid second epoch), the rerun trains steps 7 to 10 from the
    checkpoint of step 6 and ends as the run that was not stopped."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with _stopping_at(7), self.assertRaises(KeyboardInterrupt):
      training.run_task(self.spec, self.splits, self.config, model_dir)
    self.assertFalse(os.path.exists(os.path.join(model_dir, training.RESULTS_FILE)))
    recording, steps = _steps_trained()
    with recording:
      results = training.run_task(self.spec, self.splits, self.config, model_dir)
    self.assertEqual(steps, [7, 8, 9, 10])
    self.assertLen(results["train_losses"], 2)
    self.assertAllClose(results["train_losses"], self.results["train_losses"], atol=1e-5)
    for split in ("validation", "test"):
      self.assertAllClose(results["metrics"][split], self.results["metrics"][split])

  def test_a_rerun_of_a_finished_run_trains_nothing(self):
    """The same settings: the recorded results, then a new split scored and an export
    written from the final checkpoint, without training."""
    model_dir = self._copy()
    with _NOT_TRAINED:
      self.assertEqual(training.run_task(self.spec, self.splits, self.config, model_dir),
                       json.loads(json.dumps(self.results)))
      extra = task_testing.examples(4, seed=7, labelled=False, prefix="u")
      export_dir = os.path.join(model_dir, "export")
      results = training.run_task(self.spec, dict(self.splits, unlabelled=extra),
                                  self.config, model_dir, export_dir=export_dir)
    self.assertEqual(results["metrics"], self.results["metrics"])
    self.assertEqual(results["predictions"]["unlabelled"]["ids"], ["u0", "u1", "u2", "u3"])
    self.assertTrue(os.path.exists(os.path.join(export_dir, "saved_model", "saved_model.pb")))
    self.assertEqual(results["export_dir"], export_dir)

  def test_other_settings_are_refused_naming_them(self):
    model_dir = self._copy()
    with self.assertRaisesRegex(errors.UsageError,
                                f"^{model_dir} holds a run with other settings: "
                                r"epochs=2\.0 there, epochs=3\.0 now\. Use a new model_dir"):
      training.run_task(self.spec, self.splits, self.config.replace(epochs=3.0), model_dir)
    os.remove(os.path.join(model_dir, training.RESULTS_FILE))
    os.remove(os.path.join(model_dir, training.RUN_FILE))
    with self.assertRaisesRegex(errors.UsageError, "holds a checkpoint but no keras3_run.json"):
      training.run_task(self.spec, self.splits, self.config, model_dir)


if __name__ == "__main__":
  tf.test.main()

"""Tests for classification.run_task: train, score, predict, export and record one task.

The encoder is the tiny random TF Hub encoder of `keras_adapters.hub.testing` with a
preprocessing SavedModel built from its vocab, so every text is made of real tokens (`w0`,
`w1`, ...). One classification run (shared by several tests) is trained in `setUpClass`.
"""

import json
import os
import shutil
import socket
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.hub import hub_encoder
from keras_adapters.hub import read_cache
from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.data import examples as examples_lib
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing as training_testing
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import errors
from keras_adapters.utils import run_lock
from keras_adapters.utils import testing as utils_testing

_SEQ_LENGTH = training_testing.SEQ_LENGTH
_LABEL_NAMES = training_testing.LABEL_NAMES
_GROUPS = training_testing.WORD_GROUPS
_classification_examples = training_testing.examples


def _regression_examples(count, seed):
  """The score is the share of `blue` words in the text."""
  rng = np.random.default_rng(seed)
  texts, scores = [], []
  for _ in range(count):
    num_blue = int(rng.integers(0, 5))
    words = list(rng.choice(_GROUPS[2], num_blue)) + list(rng.choice(_GROUPS[0], 4 - num_blue))
    texts.append(" ".join(rng.permutation(words)))
    scores.append(num_blue / 4)
  return examples_lib.TextExamples(ids=[str(i) for i in range(count)], texts=(texts,),
                                   labels=np.array(scores, np.float32))


class _RecordingTrainer(trainer_lib.Trainer):
  """A real Trainer that remembers itself, so a test can reach the trained model."""
  instances = []

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    _RecordingTrainer.instances.append(self)


class _NoTrainer:
  """Fails the test if run_task builds a Trainer."""

  def __init__(self, *args, **kwargs):
    raise AssertionError("run_task trained although the run had finished.")


def _hold_by_another_process(model_dir):
  """Writes model_dir's lock as a live process of this host (the test's parent) holds it."""
  with open(os.path.join(model_dir, run_lock.LOCK_FILE), "w", encoding="utf-8") as f:
    json.dump(dict(host=socket.gethostname(), pid=os.getppid(), token="theirs"), f)


class TaskRunnerTest(parameterized.TestCase, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "classification_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    os.makedirs(cls.root)
    cls.hub_handle = testing.tiny_hub_handle()
    cls.preprocess_handle = testing.tiny_preprocess_handle(_SEQ_LENGTH)
    cls.spec = examples_lib.TaskSpec(name="colours", text_fields=("text",),
                                     label_names=_LABEL_NAMES)
    cls.splits = dict(train=_classification_examples(18, seed=0),
                      validation=_classification_examples(6, seed=1),
                      test=_classification_examples(6, seed=2),
                      unlabelled=_classification_examples(4, seed=3, labelled=False,
                                                          prefix="u"))
    cls.config = cls._config()
    cls.model_dir = os.path.join(cls.root, "run")
    cls.export_dir = os.path.join(cls.root, "export")
    _RecordingTrainer.instances.clear()
    with mock.patch.object(trainer_lib, "Trainer", _RecordingTrainer):
      cls.results = classification.run_task(cls.spec, cls.splits, cls.config, cls.model_dir,
                                         export_dir=cls.export_dir, progress_bar=False)
    (trainer,) = _RecordingTrainer.instances
    cls.trained_model = trainer.model
    # The library's own cached copy: loading the SavedModel again per test only costs time.
    cls.preprocessor = testing.tiny_preprocessor(_SEQ_LENGTH)
    cls._trained_logits = {}

  def test_a_precision_the_cpu_kernel_cap_would_crash_is_refused_writing_nothing(self):
    """A CPU with AVX-512 whose oneDNN kernels the user capped at AVX2: bfloat16 would crash
    TensorFlow (`cpu_kernels.check_sixteen_bit`), so the run stops before it reads or writes."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    self.enter_context(utils_testing.avx512_cpu_capped_at_avx2())
    with self.assertRaisesRegex(errors.UsageError, r"Computing in bfloat16 with "
                                r"ONEDNN_MAX_CPU_ISA=AVX2 would crash TensorFlow .*set it to "
                                r"AVX512_CORE or higher, or compute in float32\.$"):
      classification.run_task(self.spec, self.splits,
                              self.config.replace(mixed_precision="bfloat16"), model_dir,
                              export_dir=os.path.join(model_dir, "export"), progress_bar=False)
    self.assertFalse(os.path.exists(model_dir))

  def _trained_predict(self, split):
    """`predict` of the trained model on `split`, computed once per class (each call traces
    a new function; the model is never changed after setUpClass)."""
    if split not in self._trained_logits:
      self._trained_logits[split] = classification.predict(
          self.trained_model, self.splits[split], self.preprocessor, self.config)
    return self._trained_logits[split]

  @classmethod
  def _config(cls, **overrides):
    values = dict(hub_handle=cls.hub_handle, preprocess_handle=cls.preprocess_handle,
                  adapter_size=4, learning_rate=1e-2, epochs=1.0, batch_size=8,
                  max_seq_length=_SEQ_LENGTH, checkpoint_every_steps=100)
    values.update(overrides)
    return config_definitions.ExperimentConfig.from_settings(**values)

  def _fresh_model(self, num_classes=3, tuning="adapters", adapter_size=4):
    return classifier.build_classifier(
        adapted_bert.AdaptedBert(self.hub_handle, adapter_size=adapter_size, tuning=tuning),
        num_classes)

  def test_results_have_metrics_parameters_and_timings(self):
    """Labelled non-train splits get the spec's metrics; parameter counts and timings are
    recorded; results.json holds the returned dict."""
    results = self.results
    self.assertCountEqual(results["metrics"], ["validation", "test"])
    for split in ("validation", "test"):
      self.assertEqual(list(results["metrics"][split]), ["accuracy"])
      self.assertBetween(results["metrics"][split]["accuracy"], 0.0, 1.0)
    parameters = results["parameters"]
    self.assertGreater(parameters["trainable"], 0)
    self.assertLess(parameters["trainable"], parameters["total"])
    self.assertGreater(parameters["adapters"], 0)
    self.assertLess(parameters["adapters"], parameters["trainable"])
    self.assertAllClose(parameters["trainable_percent_of_base"],
                        100.0 * parameters["trainable"] / parameters["base"])
    self.assertGreater(results["seconds_per_epoch"], 0.0)
    self.assertGreater(results["train_seconds"], 0.0)
    self.assertGreater(results["total_seconds"], 0.0)
    # 18 examples in batches of 8 are 3 steps for 1 epoch.
    self.assertEqual((results["train_examples"], results["num_train_steps"]), (18, 3))
    self.assertEqual(results["task"], "colours")
    self.assertEqual(results["config"]["adapter_size"], 4)
    self.assertEqual(results["export_dir"], self.export_dir)
    with open(os.path.join(self.model_dir, run_records.RESULTS_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f), results)

  def test_metrics_score_the_trained_model(self):
    """The recorded accuracy is the trained model's accuracy on each split."""
    for split in ("validation", "test"):
      logits = self._trained_predict(split)
      self.assertEqual(logits.shape, (6, 3))
      self.assertAllClose(self.results["metrics"][split]["accuracy"],
                          np.mean(np.argmax(logits, -1) == self.splits[split].labels))

  def test_splits_are_scored_by_one_function_traced_at_most_twice(self):
    """Once for the first split's length, once more for any length; not once per split."""
    names = ("validation", "test", "unlabelled")
    splits = [self.splits[name] for name in names]
    model = self.trained_model
    # The model's Python code runs once per trace.
    with mock.patch.object(model, "call", wraps=model.call) as traced:
      outputs = classification.predict_each(model, splits, self.preprocessor, self.config)
    self.assertBetween(traced.call_count, 1, 2)
    for name, split_outputs in zip(names, outputs):
      self.assertAllClose(split_outputs, self._trained_predict(name), atol=1e-6)

  def test_unlabelled_split_gets_predictions(self):
    """A split without labels gets class-id predictions with its ids, not metrics."""
    self.assertNotIn("unlabelled", self.results["metrics"])
    self.assertCountEqual(self.results["predictions"], ["unlabelled"])
    predictions = self.results["predictions"]["unlabelled"]
    self.assertEqual(predictions["ids"], ["u0", "u1", "u2", "u3"])
    logits = self._trained_predict("unlabelled")
    self.assertEqual(predictions["values"], np.argmax(logits, -1).tolist())

  def test_exported_saved_model_serves_raw_strings(self):
    """The exported SavedModel maps raw strings to probabilities that sum to 1 and equal
    the softmax of `predict`'s logits."""
    texts = list(self.splits["test"].texts[0])
    served = tf.saved_model.load(os.path.join(self.export_dir, "saved_model")).signatures[
        "serving_default"](text=tf.constant(texts))["probabilities"].numpy()
    self.assertEqual(served.shape, (6, 3))
    self.assertAllClose(served.sum(axis=1), np.ones(6), atol=1e-6)
    logits = self._trained_predict("test")
    self.assertAllClose(served, tf.nn.softmax(logits).numpy(), atol=1e-5)

  def test_exported_adapters_reload_into_a_fresh_model(self):
    """`load_adapters` on a freshly built model reproduces the trained model's logits;
    the artifact's metadata names the task, fields, labels and sequence length."""
    model = self._fresh_model()
    examples = self.splits["test"]
    before = classification.predict(model, examples, self.preprocessor, self.config)
    expected = self._trained_predict("test")
    self.assertNotAllClose(before, expected)  # The test would be void otherwise.
    saving.load_adapters(model, os.path.join(self.export_dir, "adapters"))
    self.assertAllClose(classification.predict(model, examples, self.preprocessor, self.config),
                        expected, atol=1e-6, rtol=0)
    with open(os.path.join(self.export_dir, "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      metadata = json.load(f)["metadata"]
    self.assertEqual(metadata, dict(task="colours", text_fields=["text"],
                                    label_names=list(_LABEL_NAMES),
                                    max_seq_length=_SEQ_LENGTH))

  def test_finished_run_is_not_trained_again(self):
    """A second call with the same model_dir and settings returns the recorded results and
    trains nothing, also when it asks for fewer splits."""
    with mock.patch.object(trainer_lib.Trainer, "_build",
                           side_effect=AssertionError("built a model")):
      again = classification.run_task(self.spec, dict(train=self.splits["train"]),
                                   self.config, self.model_dir, progress_bar=False)
    self.assertEqual(again, json.loads(json.dumps(self.results)))

  def test_a_busy_model_dir_is_refused_naming_its_run(self):
    """While another run holds model_dir, a second one with the same settings is refused
    before it builds anything; the finished run left no lock."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self.model_dir, model_dir)
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE)))
    _hold_by_another_process(model_dir)
    with mock.patch.object(trainer_lib.Trainer, "_build",
                           side_effect=AssertionError("built a model")):
      with self.assertRaisesRegex(run_lock.ModelDirBusyError,
                                  rf"in use by another run \(process {os.getppid()} "):
        classification.run_task(self.spec, self.splits, self.config, model_dir,
                             progress_bar=False)

  def test_trained_run_without_results_restores_the_checkpoint(self):
    """If training finished but results.json was never written, run_task trains no step,
    restores the final checkpoint and scores exactly what the trained model scored."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self.model_dir, model_dir)
    os.remove(os.path.join(model_dir, run_records.RESULTS_FILE))
    with mock.patch.object(trainer_lib.Trainer, "_train_loop",
                           side_effect=AssertionError("trained again")):
      results = classification.run_task(self.spec, self.splits, self.config, model_dir,
                                     progress_bar=False)
    self.assertEqual(results["metrics"], self.results["metrics"])
    self.assertEqual(results["predictions"], self.results["predictions"])
    self.assertEqual(results["parameters"], self.results["parameters"])
    self.assertTrue(os.path.isfile(os.path.join(model_dir, run_records.RESULTS_FILE)))

  def test_regression_task(self):
    """A task with label_names=None trains one output on float labels, reports the spec's
    regression metrics, and exports a SavedModel serving one score per text."""
    spec = examples_lib.TaskSpec(name="blueness", text_fields=("text",), label_names=None,
                                 metrics=("pearson", "spearman"))
    splits = dict(train=_regression_examples(16, seed=0),
                  test=_regression_examples(8, seed=1))
    root = self.create_tempdir().full_path
    export_dir = os.path.join(root, "export")
    _RecordingTrainer.instances.clear()
    with mock.patch.object(trainer_lib, "Trainer", _RecordingTrainer):
      results = classification.run_task(spec, splits, self._config(), os.path.join(root, "run"),
                                     export_dir=export_dir, progress_bar=False)
    model = _RecordingTrainer.instances[-1].model
    self.assertEqual(model.output_shape, (None, 1))
    self.assertEqual(list(results["metrics"]), ["test"])
    self.assertEqual(list(results["metrics"]["test"]), ["pearson", "spearman"])
    for value in results["metrics"]["test"].values():
      self.assertBetween(value, -1.0, 1.0)
    self.assertGreater(results["parameters"]["adapters"], 0)
    texts = list(splits["test"].texts[0])
    scores = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](text=tf.constant(texts))["scores"].numpy()
    expected = classification.predict(model, splits["test"], self.preprocessor,
                                      self._config())[:, 0]
    self.assertAllClose(scores, expected, atol=1e-5)
    with open(os.path.join(export_dir, "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      self.assertIsNone(json.load(f)["metadata"]["label_names"])

  def test_layer_norm_tuning_trains_no_adapters(self):
    """tuning="layer_norm" drops the adapter size and trains LayerNorms and head only."""
    # One batch of all 18 examples: the train step is traced once, not again for a last
    # partial batch (this test checks parameters, not batching).
    config = self._config(tuning="layer_norm", batch_size=len(self.splits["train"]))
    self.assertIsNone(config.model.adapter.adapter_size)
    splits = dict(train=self.splits["train"], test=self.splits["test"])
    results = classification.run_task(self.spec, splits, config,
                                   os.path.join(self.create_tempdir().full_path, "run"),
                                   progress_bar=False)
    parameters = results["parameters"]
    self.assertEqual(parameters["adapters"], 0)
    self.assertGreater(parameters["trainable"], 0)
    self.assertLess(parameters["trainable"], self.results["parameters"]["trainable"])
    self.assertEqual(parameters["total"], parameters["base"] + 16 * 3 + 3)
    self.assertIn("accuracy", results["metrics"]["test"])
    self.assertIsNone(results["config"]["adapter_size"])

  def test_xla_run_trains_full_static_batches_and_scores_every_example(self):
    """Under jit_compile, training drops the last partial batch (18 examples in batches of 8
    are 2 steps), and scoring pads its last batch: every example is scored once, as the
    per-batch-padded prediction of the same model scores it."""
    config = self._config(jit_compile=True)
    _RecordingTrainer.instances.clear()
    with mock.patch.object(trainer_lib, "Trainer", _RecordingTrainer):
      results = classification.run_task(self.spec, self.splits, config,
                                     os.path.join(self.create_tempdir().full_path, "run"),
                                     progress_bar=False)
    (trainer,) = _RecordingTrainer.instances
    self.assertEqual(results["num_train_steps"], 2)
    self.assertEqual(results["config"]["jit_compile"], True)
    self.assertLen(results["predictions"]["unlabelled"]["ids"], 4)
    # 6 examples in one evaluation batch of 64, 58 of them padding rows.
    static = classification.predict(trainer.model, self.splits["test"], self.preprocessor,
                                    config)
    dynamic = classification.predict(trainer.model, self.splits["test"], self.preprocessor,
                                     self.config)
    self.assertEqual(static.shape, (6, len(_LABEL_NAMES)))
    self.assertAllClose(static, dynamic, atol=1e-5)
    self.assertEqual(results["metrics"]["test"]["accuracy"], float(np.mean(
        static.argmax(-1) == self.splits["test"].labels)))

  def test_runs_recorded_before_precision_settings_resume_as_float32(self):
    """A run.json written before mixed_precision and jit_compile existed holds a float32,
    uncompiled run: the same settings reuse it, another precision is refused."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    shutil.copytree(self.model_dir, model_dir)
    run_file = os.path.join(model_dir, run_records.RUN_FILE)
    with open(run_file, encoding="utf-8") as f:
      record = json.load(f)
    for name in ("mixed_precision", "jit_compile"):
      del record["config"][name]
    with open(run_file, "w", encoding="utf-8") as f:
      json.dump(record, f)
    # The refusal is the folder's, and nothing computes: a cap on the CPU kernels that the
    # suite may run under (ONEDNN_MAX_CPU_ISA=AVX2) would refuse bfloat16 first.
    self.enter_context(mock.patch.dict(os.environ))
    os.environ.pop(cpu_kernels.CAP_VARIABLE, None)
    with mock.patch.object(trainer_lib.Trainer, "_build",
                           side_effect=AssertionError("built a model")):
      classification.run_task(self.spec, self.splits, self.config, model_dir, progress_bar=False)
      with self.assertRaisesRegex(run_records.RunSettingsError,
                                  "mixed_precision='float32' there, "
                                  "mixed_precision='bfloat16' now"):
        classification.run_task(self.spec, self.splits,
                             self._config(mixed_precision="bfloat16"), model_dir,
                             progress_bar=False)

  def test_missing_train_split(self):
    """Splits without "train" are a ValueError naming the splits given; nothing is written."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with self.assertRaisesRegex(ValueError, r"'train' split.*\['test', 'validation'\]"):
      classification.run_task(self.spec, dict(validation=self.splits["validation"],
                                           test=self.splits["test"]), self.config, model_dir)
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_records.RESULTS_FILE)))


class BaseReadOnceTest(tf.test.TestCase):

  def test_a_large_base_is_read_once_and_not_held_after_the_model_is_built(self):
    """Every base counts as large (none kept by the small-base cache): the task's read is
    the one the model is built from, and its weights are let go once the model has them."""
    spec, splits = training_testing.colour_task()
    task = classification.ClassificationTask(spec, splits, training_testing.run_config())
    hub_encoder.clear_cache()
    reads = mock.Mock(wraps=hub_encoder._read_hub_encoder)  # pylint: disable=protected-access
    with mock.patch.object(read_cache, "SMALL_BASE_BYTES", 0), \
        mock.patch.object(hub_encoder, "_read_hub_encoder", reads):
      task.prepare()
      self.assertNotEmpty(task.read_base().weights)
      model = task.built_model()
    self.assertEqual(reads.call_count, 1)
    self.assertEmpty(task.read_base().weights)
    self.assertGreater(model.count_params(), 0)


if __name__ == "__main__":
  tf.test.main()

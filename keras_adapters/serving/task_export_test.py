"""Tests for per-task SavedModel export."""

import os
import shutil

from absl.testing import parameterized
import tensorflow as tf
import tensorflow_hub as hub
from tensorflow.core.protobuf import saved_model_pb2

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.methods import ia3
from keras_adapters.methods import lora
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.models import testing as models_testing
from keras_adapters.serving import task_export
from keras_adapters.utils import precision
from keras_adapters.utils import testing as utils_testing

_SEQ_LENGTH = 12


def _fake_export(directory, signature, output):
  """A `saved_model.pb` with one signature of one output: what `export_kind` reads."""
  saved_model = saved_model_pb2.SavedModel()
  saved_model.meta_graphs.add().signature_def[signature].outputs[output].name = "out:0"
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
    f.write(saved_model.SerializeToString())
  return directory


def _saved_variable_names(directory):
  """The names of the variables a SavedModel holds, read from its object graph."""
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(directory, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
  return [node.variable.name for node in saved_model.meta_graphs[0].object_graph_def.nodes
          if node.HasField("variable")]


class TaskExportTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = os.path.join(tf.compat.v1.test.get_temp_dir(), "task_export_test")
    os.makedirs(root, exist_ok=True)
    cls.handle = testing.tiny_hub_handle()
    # The one `export_task_from_artifact` loads for the artifacts of this length: loaded once.
    cls.preprocessor = compatibility.load_preprocessor(testing.tiny_preprocess_handle(_SEQ_LENGTH))

  def _expected(self, model, *texts):
    inputs = self.preprocessor.bert_pack_inputs(
        [self.preprocessor.tokenize(tf.constant(t)) for t in texts], _SEQ_LENGTH)
    return model(inputs, training=False)

  def test_the_serving_functions_are_traced_without_autograph(self):
    """Autograph would convert the model's source as each serving function is first traced;
    they branch on Python values only."""
    model = classifier.build_classifier(adapted_bert.AdaptedBert(self.handle, adapter_size=2), 2)
    with utils_testing.autograph_conversions() as converted:
      path = task_export.export_task(model, self.preprocessor, self.create_tempdir().full_path,
                                     seq_length=_SEQ_LENGTH, label_names=["a", "b"])
    # Only the wrapper that tf.saved_model.save puts around each signature, which calls the
    # graph already traced.
    self.assertEqual(set(converted), {"canonicalize_signatures.<locals>.signature_wrapper"})
    self.assertAllClose(tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant(["a b c"]))["probabilities"],
                        tf.nn.softmax(self._expected(model, ["a b c"])), atol=1e-5, rtol=0)

  @parameterized.named_parameters(
      ("lora", lora.LoRAConfig(r=2, target_modules=("query", "value", "output"),
                               init_weights="bert")),
      ("ia3", ia3.IA3Config()))
  def test_lora_and_ia3_are_merged_into_the_kernels(self, config):
    """The export has the base's own graph (no LoRA or (IA)³ variables) and the unmerged
    model's outputs; the model keeps its layers and weights after the export."""
    model = classifier.build_classifier(
        adapted_bert.AdaptedBert(self.handle, adapter_config=config), 3)
    for variable in model.trainable_variables:
      variable.assign(variable + tf.random.stateless_normal(variable.shape, [1, 2], stddev=0.2))
    before = self._expected(model, ["a b c", "d"])
    trained = [v.numpy() for v in model.trainable_variables]
    path = task_export.export_task(model, self.preprocessor, self.create_tempdir().full_path,
                                   seq_length=_SEQ_LENGTH, label_names=["a", "b", "c"])
    served = tf.saved_model.load(path)
    self.assertEmpty([n for n in _saved_variable_names(path) if f"/{config.method}/" in n])
    self.assertAllClose(served.signatures["serving_default"](text=tf.constant(
        ["a b c", "d"]))["probabilities"], tf.nn.softmax(before), atol=1e-5, rtol=0)
    self.assertAllEqual(self._expected(model, ["a b c", "d"]), before)
    for variable, value in zip(model.trainable_variables, trained):
      self.assertAllEqual(variable, value)
    unmerged = task_export.export_task(model, self.preprocessor,
                                       self.create_tempdir().full_path,
                                       seq_length=_SEQ_LENGTH, label_names=["a", "b", "c"],
                                       merge=False)
    self.assertNotEmpty([n for n in _saved_variable_names(unmerged)
                         if f"/{config.method}/" in n])

  def test_single_text_task_serves_probabilities(self):
    """Raw strings in, the Keras model's softmax out, through both serving entry points,
    after the vocab file the preprocessing came from and the preprocessing model are gone
    (the export is self-contained)."""
    root = self.create_tempdir().full_path
    # A copy of the session's tiny preprocessing (default length 16, not the export's 12) and
    # the vocab it was built from, to delete: building one costs ~7 CPU seconds.
    source = os.path.join(root, "source")
    shutil.copytree(os.path.dirname(testing.tiny_preprocess_handle()), source)
    preprocessor = tf.saved_model.load(os.path.join(source, "preprocess"))
    model = classifier.build_classifier(adapted_bert.AdaptedBert(self.handle, adapter_size=4), 3)
    path = task_export.export_task(model, preprocessor, root + "/task",
                                   seq_length=_SEQ_LENGTH, label_names=["neg", "neu", "pos"])
    self.assertTrue(os.path.exists(os.path.join(source, "vocab.txt")))
    shutil.rmtree(source)
    texts = ["w1 w2 w3", "w4 W5 unknownword"]
    expected = tf.nn.softmax(self._expected(model, texts))
    loaded = tf.saved_model.load(path)
    served = loaded.signatures["serving_default"](text=tf.constant(texts))["probabilities"]
    self.assertAllClose(expected, served, atol=1e-6)
    # The SavedModel loaded above, not loaded again from `path` (what hub.KerasLayer(path)
    # does): its `__call__` is the entry point checked here.
    self.assertAllClose(expected, hub.KerasLayer(loaded)(tf.constant(texts))["probabilities"],
                        atol=1e-6)
    self.assertAllEqual(loaded.label_names, [b"neg", b"neu", b"pos"])

  def test_pair_regression_task_serves_scores_and_replaces_only_its_own_kind(self):
    """Sentence pairs in, one score per pair out (STS-B style). The export goes into folders
    of other files and of another kind of export, which are refused (and kept) unless
    overwrite=True; a single-task export is replaced. One test: the export is its slow part."""
    model = classifier.build_classifier(adapted_bert.AdaptedBert(self.handle, adapter_size=4), 1)
    export = lambda path, **kwargs: task_export.export_task(
        model, self.preprocessor, path, text_fields=("sentence1", "sentence2"),
        seq_length=_SEQ_LENGTH, **kwargs)
    multitask = _fake_export(self.create_tempdir().full_path, "routed", "label")
    with self.assertRaisesRegex(ValueError, f"'{multitask}' holds a multi-task export, not a "
                                "single-task export.*overwrite=True"):
      export(multitask)
    mine = self.create_tempdir().full_path
    with open(os.path.join(mine, "notes.txt"), "w", encoding="utf-8") as f:
      f.write("mine")
    with self.assertRaisesRegex(ValueError, "holds other files, not a single-task export"):
      export(mine)
    self.assertEqual(os.listdir(mine), ["notes.txt"])
    path = export(mine, overwrite=True)
    self.assertEqual(task_export.export_kind(mine), task_export.TASK_EXPORT)
    self.assertIn("notes.txt", os.listdir(mine))  # Only the export's own files are written.
    task_export.check_export_dir(mine, task_export.TASK_EXPORT)  # Its own kind: replaceable.
    first, second = ["w1 w2", "w3"], ["w4", "w5 w6 w7"]
    expected = self._expected(model, first, second)[:, 0]
    served = tf.saved_model.load(path).signatures["serving_default"](
        sentence1=tf.constant(first), sentence2=tf.constant(second))["scores"]
    self.assertAllClose(expected, served, atol=1e-6)

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_model_serves_float32(self, name, epsilon):
    """A model built and exported under a mixed policy serves strings and returns float32
    probabilities, those of the model in process."""
    texts = ["w1 w2 w3", "w4 W5 unknownword"]
    with precision.policy_scope(name):
      model = classifier.build_classifier(
          adapted_bert.AdaptedBert(self.handle, adapter_size=4), 3)
      path = task_export.export_task(model, self.preprocessor,
                                     self.create_tempdir().full_path + "/task",
                                     seq_length=_SEQ_LENGTH, label_names=["a", "b", "c"])
    serving = tf.saved_model.load(path).signatures["serving_default"]
    self.assertEqual(serving.structured_input_signature[1]["text"].dtype, tf.string)
    self.assertEqual(serving.structured_outputs["probabilities"].dtype, tf.float32)
    served = serving(text=tf.constant(texts))["probabilities"]
    expected = tf.nn.softmax(self._expected(model, texts))
    # Grappler rewrites the SavedModel's graph, which rounds some bfloat16 arithmetic
    # otherwise than eager calls (without grappler they agree exactly): measured 0.01
    # epsilons here, 0.1 exported from an artifact (float16: none).
    self.assertLess(layers_testing.mixed_precision_gap(served, expected, epsilon), 1)

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_artifact_exports_and_serves_float32(self, name, epsilon):
    """A task trained under a mixed policy and saved, exported from its artifact under the
    policy, serves strings and returns float32 probabilities, those of the model in
    process."""
    with precision.policy_scope(name):
      model = classifier.build_classifier(
          adapted_bert.AdaptedBert(self.handle, adapter_size=4), 3, pooling="mean")
      for variable in model.trainable_variables:  # stands in for training: every value moves
        variable.assign_add(tf.random.normal(variable.shape, stddev=0.1, seed=3))
    root = self.create_tempdir().full_path
    path = saving.save_adapters(
        model, os.path.join(root, "adapters"), label_names=["neg", "neu", "pos"],
        preprocessing=adapter_artifact.PreprocessingConfig(
            testing.tiny_preprocess_handle(_SEQ_LENGTH), ("text",), _SEQ_LENGTH))
    texts = ["w1 w2 w3", "w4 W5 unknownword"]
    with precision.policy_scope(name):
      export_dir = task_export.export_task_from_artifact(path, os.path.join(root, "task"))
    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        text=tf.constant(texts))["probabilities"]
    self.assertEqual(served.dtype, tf.float32)
    expected = tf.nn.softmax(self._expected(model, texts))
    # As above: measured 0.1 epsilons (float16: none).
    self.assertLess(layers_testing.mixed_precision_gap(served, expected, epsilon), 1)

  def test_an_artifact_with_another_tasks_weights_file_is_refused(self):
    """Two artifacts of one layout with their weights files swapped: the export refuses,
    naming both files (as load_adapters and load_task_model do: `models/saving_test`)."""
    root = self.create_tempdir().full_path
    path, other = (models_testing.save_random_task_artifact(
        os.path.join(root, name), self.handle, testing.tiny_preprocess_handle(_SEQ_LENGTH),
        seq_length=_SEQ_LENGTH, seed=seed) for seed, name in enumerate(("task", "other")))
    weights = os.path.join(path, adapter_artifact.WEIGHTS_FILE)
    shutil.copyfile(os.path.join(other, adapter_artifact.WEIGHTS_FILE), weights)
    with self.assertRaisesRegex(
        adapter_artifact.AdapterArtifactError,
        f"{weights}.*is not the weights file "
        f"{os.path.join(path, adapter_artifact.CONFIG_FILE)} was saved with"):
      task_export.export_task_from_artifact(path, os.path.join(root, "saved_model"))

  def test_sentencepiece_base_serves_strings(self):
    """A Model Garden SentencePiece encoder and preprocessing model export and serve."""
    encoder, preprocess = testing.tiny_sentencepiece_handles(_SEQ_LENGTH)
    preprocessor = tf.saved_model.load(preprocess)
    model = classifier.build_classifier(adapted_bert.AdaptedBert(encoder, adapter_size=4), 2)
    path = task_export.export_task(model, preprocessor, self.create_tempdir().full_path + "/t",
                                   seq_length=_SEQ_LENGTH, label_names=["a", "b"])
    texts = tf.constant(["w1 w2 w3", "w4 w39"])
    inputs = preprocessor.bert_pack_inputs([preprocessor.tokenize(texts)], _SEQ_LENGTH)
    served = tf.saved_model.load(path).signatures["serving_default"](text=texts)
    self.assertAllClose(tf.nn.softmax(model(inputs, training=False)),
                        served["probabilities"], atol=1e-6)

  def test_a_preprocessor_of_another_casing_is_refused(self):
    """The encoder carries do_lower_case=True; a cased preprocessor is named, not exported."""
    root = self.create_tempdir().full_path
    cased = tf.saved_model.load(testing.tiny_preprocess_handle(lower_case=False))
    model = classifier.build_classifier(adapted_bert.AdaptedBert(self.handle, adapter_size=4), 2)
    with self.assertRaisesRegex(ValueError, r"keeps case \(cased\) but the encoder was "
                                            r"trained uncased"):
      task_export.export_task(model, cased, root + "/task", seq_length=_SEQ_LENGTH,
                              label_names=["a", "b"])

  def test_export_kind_reads_the_signatures(self):
    root = self.create_tempdir().full_path
    for name, signature, output, kind in (
        ("task", "serving_default", "probabilities", task_export.TASK_EXPORT),
        ("regression", "serving_default", "scores", task_export.TASK_EXPORT),
        ("multitask", "routed", "label", task_export.MULTITASK_EXPORT),
        ("qa", "serving_default", "answer", task_export.QA_EXPORT),
        ("encoder", "serving_default", "pooled_output", "another SavedModel")):
      self.assertEqual(task_export.export_kind(
          _fake_export(os.path.join(root, name), signature, output)), kind)
    self.assertIsNone(task_export.export_kind(root))

  def test_three_text_fields_are_refused(self):
    """A task has one or two text inputs."""
    with self.assertRaisesRegex(ValueError, "one or two text fields"):
      task_export.export_task(None, self.preprocessor, "/tmp/unused", text_fields=("a", "b", "c"))


if __name__ == "__main__":
  tf.test.main()

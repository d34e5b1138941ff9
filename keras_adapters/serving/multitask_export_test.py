"""Tests for the multi-task SavedModel: one base, a signature per task, a routed signature."""

import json
import os
import shutil

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from tensorflow.core.protobuf import saved_model_pb2

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import multitask_export
from keras_adapters.serving import task_export
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.methods import ia3
from keras_adapters.methods import lora
from keras_adapters.models import adapter_config
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing
from keras_adapters.utils import precision

_TEXTS = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15", "w3", "", "w20 w21 unknown"]
_PAIRS = ["w7", "w8 w9", "w1 w2 w3 w4 w5 w6 w7 w8 w9", "w2", "w30"]
# Three tasks that differ in every way a task can: head size and pooling, one or two texts,
# sequence length, adapter size, layers left out, adapters or none.
_TASKS = dict(
    sentiment=dict(num_classes=3, pooling="mean", seq_length=12, seed=1,
                   label_names=["neg", "neu", "pos"]),
    similarity=dict(num_classes=1, pooling="cls", text_fields=("sentence1", "sentence2"),
                    seq_length=10, seed=2,
                    adapter_config=adapter_config.AdapterConfig(adapter_size=2,
                                                                leave_out=(0,))),
    topic=dict(num_classes=2, pooling="cls", seq_length=16, seed=3, label_names=["a", "b"],
               adapter_config=adapter_config.AdapterConfig(adapter_size=None,
                                                           tuning="layer_norm")))


def _stored_floats(saved_model_dir):
  """Number of float32 values in a SavedModel's variables."""
  reader = tf.train.load_checkpoint(os.path.join(saved_model_dir, "variables", "variables"))
  dtypes = reader.get_variable_to_dtype_map()
  return sum(int(np.prod(shape)) for name, shape in reader.get_variable_to_shape_map().items()
             if dtypes[name] == tf.float32)


def _routed_function_calls(saved_model_dir):
  """How many functions the routed signature's graph calls."""
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
  library = saved_model.meta_graphs[0].graph_def.library
  routed, = [f for f in library.function if "predict_routed" in f.signature.name]
  return sum(node.op in ("PartitionedCall", "StatefulPartitionedCall")
             for node in routed.node_def)


class MultitaskExportTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "multitask_export_test")
    cls.handle = testing.tiny_hub_handle()
    preprocess = testing.tiny_preprocess_handle()
    cls.artifacts = {
        name: model_testing.save_random_task_artifact(
            os.path.join(cls.root, "artifacts", name), cls.handle, preprocess, **settings)
        for name, settings in _TASKS.items()}
    cls.single = {
        name: tf.saved_model.load(task_export.export_task_from_artifact(
            path, os.path.join(cls.root, "single", name)))
        for name, path in cls.artifacts.items()}
    cls.path = multitask_export.export_multitask(
        cls.handle, cls.artifacts, os.path.join(cls.root, "multitask"))
    cls.loaded = tf.saved_model.load(cls.path)

  def _single(self, name, texts, pairs):
    inputs = dict(sentence1=tf.constant(texts), sentence2=tf.constant(pairs)) if (
        name == "similarity") else dict(text=tf.constant(texts))
    return self.single[name].signatures["serving_default"](**inputs)

  def test_signatures_and_their_inputs(self):
    self.assertCountEqual(self.loaded.signatures,
                          list(_TASKS) + ["routed", "serving_default"])
    self.assertCountEqual(
        self.loaded.signatures["similarity"].structured_input_signature[1],
        ["sentence1", "sentence2"])
    self.assertCountEqual(self.loaded.signatures["routed"].structured_input_signature[1],
                          ["task", "text", "text_pair"])
    self.assertCountEqual(self.loaded.signatures["routed"].structured_outputs,
                          ["label", "probabilities", "scores"])
    self.assertAllEqual(self.loaded.task_names, [n.encode() for n in _TASKS])
    self.assertAllEqual(self.loaded.label_names[0], [b"neg", b"neu", b"pos"])

  def test_each_task_signature_equals_its_own_savedmodel(self):
    """Per-task signatures give what each single-task SavedModel gives, to 1e-5."""
    for name in _TASKS:
      with self.subTest(task=name):
        inputs = dict(sentence1=tf.constant(_TEXTS), sentence2=tf.constant(_PAIRS)) if (
            name == "similarity") else dict(text=tf.constant(_TEXTS))
        served = self.loaded.signatures[name](**inputs)
        expected = self._single(name, _TEXTS, _PAIRS)
        self.assertEqual(set(served), set(expected))
        for key in expected:
          self.assertAllClose(served[key], expected[key], atol=1e-5, rtol=0, msg=key)

  def test_routed_mixed_batch_answers_each_row_with_its_task(self):
    """A batch mixing the three tasks: every row equals its task's own SavedModel, to 1e-5."""
    tasks = ["topic", "sentiment", "similarity", "sentiment", "similarity", "topic",
             "sentiment", "similarity", "topic", "sentiment"]
    texts = [_TEXTS[i % len(_TEXTS)] for i in range(len(tasks))]
    pairs = [_PAIRS[(3 * i) % len(_PAIRS)] for i in range(len(tasks))]
    served = self.loaded.signatures["routed"](
        task=tf.constant(tasks), text=tf.constant(texts), text_pair=tf.constant(pairs))
    for name in _TASKS:
      rows = [i for i, task in enumerate(tasks) if task == name]
      expected = self._single(name, [texts[i] for i in rows], [pairs[i] for i in rows])
      labels = [t.encode() for t in _TASKS[name].get("label_names", [])]
      if name == "similarity":
        self.assertAllClose(tf.gather(served["scores"], rows), expected["scores"], atol=1e-5,
                            rtol=0)
        self.assertAllEqual(tf.gather(served["probabilities"], rows), tf.zeros([3, 3]))
        self.assertAllEqual(tf.gather(served["label"], rows), [b""] * 3)
        continue
      classes = expected["probabilities"].shape[1]
      probabilities = tf.gather(served["probabilities"], rows)
      self.assertAllClose(probabilities[:, :classes], expected["probabilities"], atol=1e-5,
                          rtol=0)
      self.assertAllEqual(probabilities[:, classes:], tf.zeros([len(rows), 3 - classes]))
      self.assertAllEqual(tf.gather(served["scores"], rows), tf.zeros([len(rows)]))
      self.assertAllEqual(tf.gather(served["label"], rows),
                          [labels[i] for i in np.argmax(expected["probabilities"], axis=1)])

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_written_under_a_mixed_policy_serves_float32(self, name, epsilon):
    """Written under a mixed policy (its encoder computes in it; the stacked adapters and
    heads in float32), the SavedModel serves strings and returns float32 near what the
    float32 one returns, routed and per task."""
    with precision.policy_scope(name):
      path = multitask_export.export_multitask(
          self.handle, self.artifacts, os.path.join(self.create_tempdir().full_path, "m"))
    loaded = tf.saved_model.load(path)
    routed = dict(task=tf.constant(["topic", "sentiment", "similarity", "sentiment", "topic"]),
                  text=tf.constant(_TEXTS), text_pair=tf.constant(_PAIRS))
    for signature, inputs, keys in (("routed", routed, ("probabilities", "scores")),
                                    ("sentiment", dict(text=tf.constant(_TEXTS)),
                                     ("probabilities",))):
      served = loaded.signatures[signature](**inputs)
      expected = self.loaded.signatures[signature](**inputs)
      for key in keys:
        self.assertEqual(served[key].dtype, tf.float32)
        # Measured up to 0.75 epsilons.
        self.assertLess(layers_testing.mixed_precision_gap(served[key], expected[key], epsilon),
                        3, msg=f"{signature}: {key}")

  def test_routed_batch_of_one_task_and_an_empty_batch(self):
    served = self.loaded.signatures["routed"](
        task=tf.constant(["sentiment"] * 2), text=tf.constant(_TEXTS[:2]),
        text_pair=tf.constant(["", ""]))
    self.assertAllClose(served["probabilities"],
                        self._single("sentiment", _TEXTS[:2], _PAIRS[:2])["probabilities"],
                        atol=1e-5)
    empty = tf.constant([], tf.string)
    self.assertEqual(self.loaded.signatures["routed"](
        task=empty, text=empty, text_pair=empty)["probabilities"].shape, (0, 3))

  def test_unknown_task_in_a_routed_batch_is_an_error_naming_the_tasks(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "Unknown task name.*sentiment"):
      self.loaded.signatures["routed"](task=tf.constant(["sentiment", "weather"]),
                                       text=tf.constant(["w1", "w2"]),
                                       text_pair=tf.constant(["", ""]))

  def test_routed_inputs_of_other_lengths_are_an_error_naming_them(self):
    """One task for three texts (once answered once, two texts dropped) and three tasks for
    one text (once a raw gather error) are refused, naming the inputs and their lengths."""
    routed = self.loaded.signatures["routed"]
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"`task` has\] \[1\] \[rows but `text` has\] \[3\]"):
      routed(task=tf.constant(["sentiment"]), text=tf.constant(_TEXTS[:3]),
             text_pair=tf.constant([""]))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"`task` has\] \[3\] \[rows but `text` has\] \[1\]"):
      routed(task=tf.constant(["sentiment"] * 3), text=tf.constant(_TEXTS[:1]),
             text_pair=tf.constant([""] * 3))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"`task` has\] \[2\] \[rows but `text_pair` has\] \[1\]"):
      routed(task=tf.constant(["similarity"] * 2), text=tf.constant(_TEXTS[:2]),
             text_pair=tf.constant(_PAIRS[:1]))

  def test_one_copy_of_the_base(self):
    """The SavedModel's float variables are the base once plus each task's stacked part."""
    base = sum(v.size for v in hub_encoder.read_hub_encoder(self.handle).weights.values())
    tasks = sum(int(np.prod(shape)) for path in self.artifacts.values()
                for shape in adapter_artifact.read_adapter_config(path)["tensors"].values())
    stored = _stored_floats(self.path)
    self.assertGreater(stored, base + tasks)  # zero padding to the largest bottleneck, head
    self.assertLess(stored, base + 2 * tasks)
    single = sum(_stored_floats(os.path.join(self.root, "single", name)) for name in _TASKS)
    self.assertGreater(single, 3 * base)

  def test_tasks_packed_alike_share_the_routed_graphs_packing(self):
    """The routed signature packs each group of tasks that pack alike once: six tasks in
    three packings call the preprocessing as often as three, where a packing per task
    would double the graph (at run time each call is inlined: memory per task).

    That export goes where a single-task SavedModel is, which is refused unless
    overwrite=True; a multi-task export there is replaced. (One test: the export is slow.)"""
    out = os.path.join(self.create_tempdir().full_path, "out")
    shutil.copytree(os.path.join(self.root, "single", "topic"), out)
    doubled = dict(self.artifacts, **{f"{name}_again": path
                                      for name, path in self.artifacts.items()})
    with self.assertRaisesRegex(multitask_export.MultitaskExportError,
                                "holds a single-task export, not a multi-task export.*"
                                "overwrite=True"):
      multitask_export.export_multitask(self.handle, doubled, out)
    self.assertNotIn("routed", tf.saved_model.load(out).signatures)
    multitask_export.export_multitask(self.handle, doubled, out, overwrite=True)
    self.assertEqual(task_export.export_kind(out), task_export.MULTITASK_EXPORT)
    task_export.check_export_dir(out, task_export.MULTITASK_EXPORT)  # Its own kind: replaced.
    three, six = _routed_function_calls(self.path), _routed_function_calls(out)
    self.assertEqual(three, 3 + 1 + 3)  # Tokenize each text (one task reads a pair), pack.
    self.assertEqual(six, three)

  def test_hub_keras_layer_serves_one_task(self):
    layer = hub.KerasLayer(self.path, signature="sentiment", output_key="probabilities")
    self.assertAllClose(layer({"text": tf.constant(_TEXTS)}),
                        self._single("sentiment", _TEXTS, _PAIRS)["probabilities"], atol=1e-5)

  def test_refusals(self):
    """Names that cannot be signatures, tasks that change the base or come from another, and
    a folder of other files are refused with a message saying why."""
    out = os.path.join(self.create_tempdir().full_path, "out")
    for name in ("routed", "serving_default", "2nd", "a-b"):
      with self.assertRaisesRegex(multitask_export.MultitaskExportError, "cannot name"):
        multitask_export.export_multitask(self.handle, {name: self.artifacts["topic"]}, out)
    with self.assertRaisesRegex(multitask_export.MultitaskExportError, "at least one task"):
      multitask_export.export_multitask(self.handle, {}, out)
    full = model_testing.save_random_task_artifact(
        os.path.join(self.create_tempdir().full_path, "full"), self.handle,
        testing.tiny_preprocess_handle(),
        adapter_config=adapter_config.AdapterConfig(adapter_size=None, tuning="full"))
    with self.assertRaisesRegex(multitask_export.MultitaskExportError,
                                "tuning='full'.*export_task"):
      multitask_export.export_multitask(self.handle, {"full": full}, out)
    # Seed 7: the other base `models/saving_test` uses, built once per test session.
    with self.assertRaisesRegex(multitask_export.MultitaskExportError, "another base"):
      multitask_export.export_multitask(testing.tiny_hub_handle(seed=7),
                                        {"topic": self.artifacts["topic"]}, out)
    os.makedirs(out)
    with open(os.path.join(out, "keep.txt"), "w", encoding="utf-8") as f:
      f.write("mine")
    with self.assertRaisesRegex(multitask_export.MultitaskExportError, "overwrite=True"):
      multitask_export.export_multitask(self.handle, {"topic": self.artifacts["topic"]}, out)
    self.assertEqual(os.listdir(out), ["keep.txt"])

  def test_a_swapped_weights_file_is_refused(self):
    """export_multitask reads artifacts through their checksum like every other reader."""
    root = self.create_tempdir().full_path
    # Copies of the class's artifacts rather than two more saved: another task's weights file
    # fails the checksum whatever its layout.
    first = shutil.copytree(self.artifacts["sentiment"], os.path.join(root, "first"))
    shutil.copyfile(os.path.join(self.artifacts["topic"], adapter_artifact.WEIGHTS_FILE),
                    os.path.join(first, adapter_artifact.WEIGHTS_FILE))
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "first/adapter_model.safetensors.*is not the weights file.*"
                                "first/adapter_config.json"):
      multitask_export.export_multitask(self.handle, {"first": first},
                                        os.path.join(root, "out"))

  def test_tasks_must_agree_on_the_adapters_activation(self):
    tanh = model_testing.save_random_task_artifact(
        os.path.join(self.create_tempdir().full_path, "tanh"), self.handle,
        testing.tiny_preprocess_handle(),
        adapter_config=adapter_config.AdapterConfig(adapter_size=4, activation="tanh"))
    with self.assertRaisesRegex(multitask_export.MultitaskExportError,
                                "adapter activation.*'tanh'.*'relu'"):
      multitask_export.export_multitask(
          self.handle, {"tanh": tanh, "sentiment": self.artifacts["sentiment"]},
          os.path.join(self.create_tempdir().full_path, "out"))

  def test_format_1_artifacts_are_refused_with_the_migration(self):
    path = shutil.copytree(self.artifacts["sentiment"],
                           os.path.join(self.create_tempdir().full_path, "v1"))
    config_path = os.path.join(path, adapter_artifact.CONFIG_FILE)
    with open(config_path, encoding="utf-8") as f:
      config = json.load(f)
    config["format_version"] = 1
    with open(config_path, "w", encoding="utf-8") as f:
      json.dump(config, f)
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "format_version 1.*export_multitask"):
      multitask_export.export_multitask(self.handle, {"old": path},
                                        os.path.join(self.create_tempdir().full_path, "o"))


class MixedMethodsTest(tf.test.TestCase):
  """LoRA, (IA)³ and adapter tasks served off one base by one SavedModel."""

  def test_each_task_alone_and_in_a_mixed_batch_is_its_own_model(self):
    """Each task's signature, and each row of a routed batch mixing the tasks, gives the
    task's own Keras model's probabilities: LoRA of two ranks and scalings, DoRA as peft and
    AdapterHub compute it, (IA)³ scaling outputs and inputs, adapters, in one graph by
    gather."""
    root = self.create_tempdir().full_path
    handle = testing.tiny_hub_handle()
    preprocess_handle = testing.tiny_preprocess_handle()
    configs = dict(
        lora=lora.LoRAConfig(r=2, target_modules=("query", "value", "output")),
        rslora=lora.LoRAConfig(r=4, alpha=3.0, use_rslora=True, leave_out=(0,),
                               target_modules=("key", "intermediate")),
        dora=lora.LoRAConfig(r=2, use_dora=True, target_modules=("query", "value", "output")),
        dora_adapterhub=lora.LoRAConfig(r=4, alpha=8.0, use_dora=True,
                                        dora_variant="adapterhub", leave_out=(0,),
                                        target_modules=("key", "intermediate")),
        ia3=ia3.IA3Config(),
        ia3_adapterhub=ia3.IA3Config(target_modules=("key", "value", "intermediate"),
                                     feedforward_modules=()),
        adapters=adapter_config.AdapterConfig(adapter_size=4))
    models, artifacts = {}, {}
    for seed, (name, config) in enumerate(configs.items()):
      artifacts[name] = model_testing.save_random_task_artifact(
          os.path.join(root, name), handle, preprocess_handle, adapter_config=config,
          pooling="cls", seq_length=16, seed=seed)
      models[name] = saving.load_task_model(artifacts[name])
    served = tf.saved_model.load(multitask_export.export_multitask(
        handle, artifacts, os.path.join(root, "multitask")))
    texts = tf.constant((_TEXTS * 2)[:len(configs)])  # A row per task.
    # The preprocessing model the export loaded, not a second copy of it.
    inputs = task_export.pack_texts(compatibility.load_preprocessor(preprocess_handle), [texts],
                                    16)
    routed = served.signatures["routed"](task=tf.constant(list(configs)),
                                         text=texts)["probabilities"]
    for row, (name, model) in enumerate(models.items()):
      expected = tf.nn.softmax(model(inputs, training=False))
      self.assertAllClose(served.signatures[name](text=texts)["probabilities"], expected,
                          atol=1e-5, rtol=0, msg=name)
      self.assertAllClose(routed[row], expected[row], atol=1e-5, rtol=0, msg=name)


if __name__ == "__main__":
  tf.test.main()
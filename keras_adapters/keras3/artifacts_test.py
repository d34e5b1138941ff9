"""Artifacts cross the stacks: a task saved on Keras 2 serves on Keras 3 to the same logits,
and back, on the tiny random TF Hub encoder whose weights a keras-hub backbone holds."""

import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

import keras

import keras_adapters as ka
from keras_adapters import keras3 as kak
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import testing as interop_testing
from keras_adapters.keras3 import base_weights
from keras_adapters.keras3 import cross_stack_testing
from keras_adapters.keras3 import layers
from keras_adapters.keras3 import testing

TOLERANCE = 1e-5
# One config of each method, with the placement and projection options in use.
_CONFIGS = {
    "houlsby": dict(config=ka.AdapterConfig(reduction_factor=4, activation="swish",
                                            leave_out=(1,)), pooling="first_token",
                    hidden_layers=1),
    "own_norms": dict(config=ka.AdapterConfig(adapter_size=4, ln_before=True, ln_after=True,
                                              mh_adapter=False, scaling=2.0),
                      pooling="mean", hidden_layers=0),
    "parallel": dict(config=ka.AdapterConfig(is_parallel=True, scaling=4.0, reduction_factor=4,
                                             activation="gelu"), pooling="cls", hidden_layers=0),
    "parallel_feedforward": dict(config=ka.AdapterConfig(
        is_parallel=True, mh_adapter=False, adapter_size=4, ln_before=True),
                                 pooling="mean", hidden_layers=0),
    "lora": dict(config=ka.LoRAConfig(r=2, alpha=4.0, target_modules=(
        "query", "key", "value", "attention_output", "intermediate", "output")),
                 pooling="cls", hidden_layers=0),
    "ia3": dict(config=ka.IA3Config(train_layer_norms=True), pooling="cls", hidden_layers=1),
    "lora_pooler": dict(config=ka.LoRAConfig(r=2, target_modules=("value", "pooler")),
                        pooling="cls", hidden_layers=0),
    "dora": dict(config=ka.LoRAConfig(r=2, alpha=4.0, use_dora=True, target_modules=(
        "query", "value", "intermediate")), pooling="cls", hidden_layers=0),
    "dora_adapterhub": dict(config=ka.LoRAConfig(
        r=2, use_dora=True, dora_variant="adapterhub", target_modules=(
            "key", "attention_output", "output")), pooling="mean", hidden_layers=0),
}


def keras3_inputs(inputs):
  """The TF Hub BERT input dict as a keras-hub backbone's inputs."""
  return {"token_ids": np.asarray(inputs["input_word_ids"]),
          "segment_ids": np.asarray(inputs["input_type_ids"]),
          "padding_mask": np.asarray(inputs["input_mask"])}


class CrossStackTest(parameterized.TestCase, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()
    cls.inputs = interop_testing.tiny_inputs()

  def _keras2_task(self, name):
    case = _CONFIGS[name]
    return interop_testing.random_method_model(
        self.handle, case["config"], pooling=case["pooling"],
        hidden_layers=case["hidden_layers"])

  @parameterized.named_parameters((name, name) for name in _CONFIGS)
  def test_a_keras2_task_serves_on_keras3_to_its_logits_and_back(self, name):
    keras2_model = self._keras2_task(name)
    expected = keras2_model(self.inputs).numpy()
    keras2_dir = self.create_tempdir().full_path
    ka.save_adapters(keras2_model, keras2_dir, label_names=["a", "b", "c"])

    keras3_model = kak.load_task_model(keras2_dir, cross_stack_testing.backbone_of_hub_encoder(self.handle))
    logits = keras.ops.convert_to_numpy(keras3_model(keras3_inputs(self.inputs)))
    self.assertAllClose(logits, expected, atol=TOLERANCE, rtol=0)
    self.assertEqual(keras3_model.head_config["label_names"], ("a", "b", "c"))

    # Saved again from Keras 3, the same files, keys and tensors; Keras 2 reads them back.
    keras3_dir = self.create_tempdir().full_path
    kak.save_adapters(keras3_model, keras3_dir, label_names=["a", "b", "c"],
                      base_handle=self.handle)
    saved = [json.load(open(os.path.join(d, adapter_artifact.CONFIG_FILE),
                            encoding="utf-8")) for d in (keras2_dir, keras3_dir)]
    self.assertEqual(saved[1]["tensors"], saved[0]["tensors"])
    self.assertEqual(saved[1]["base"]["fingerprint"], saved[0]["base"]["fingerprint"])
    self.assertEqual(saved[1]["adapter_config"], saved[0]["adapter_config"])
    self.assertEqual(saved[1]["head"], saved[0]["head"])
    back = ka.load_task_model(keras3_dir)
    self.assertAllClose(back(self.inputs).numpy(), expected, atol=TOLERANCE, rtol=0)

  def test_a_keras3_trained_task_serves_on_keras2(self):
    backbone = kak.adapt(cross_stack_testing.backbone_of_hub_encoder(self.handle),
                         kak.AdapterConfig(adapter_size=4))
    classifier = kak.build_classifier(backbone, 2)
    testing.randomize([layer for layer in backbone._flatten_layers()  # pylint: disable=protected-access
                       if isinstance(layer, layers.BottleneckAdapter)])
    testing.randomize([classifier.get_layer("logits")])
    expected = keras.ops.convert_to_numpy(classifier(keras3_inputs(self.inputs)))
    directory = self.create_tempdir().full_path
    kak.save_adapters(classifier, directory, base_handle=self.handle)
    keras2_model = ka.load_task_model(directory)
    self.assertAllClose(keras2_model(self.inputs).numpy(), expected, atol=TOLERANCE, rtol=0)

  def test_the_fingerprint_is_the_weights_on_either_stack(self):
    backbone = cross_stack_testing.backbone_of_hub_encoder(self.handle)
    self.assertEqual(base_weights.fingerprint(backbone),
                     hub_encoder.read_hub_encoder(self.handle).fingerprint)
    self.assertEqual(base_weights.activation_name(backbone), "gelu")

  def test_an_artifact_of_another_base_is_refused_before_any_work(self):
    directory = self.create_tempdir().full_path
    ka.save_adapters(self._keras2_task("lora"), directory)
    other = testing.tiny_backbone()
    with self.assertRaisesRegex(ka.UsageError, "trained on another base model"):
      kak.load_task_model(directory, other)
    self.assertIsNone(getattr(other, "adapter_config", None))

  def test_a_backbone_of_another_activation_is_refused(self):
    directory = self.create_tempdir().full_path
    ka.save_adapters(self._keras2_task("lora"), directory)
    backbone = cross_stack_testing.backbone_of_hub_encoder(self.handle, activation="gelu_approximate")
    with self.assertRaisesRegex(ka.UsageError, "kak.from_tf_hub"):
      kak.load_task_model(directory, backbone)


class KerasHubTaskTest(tf.test.TestCase):

  def test_a_bert_text_classifier_saves_and_loads_on_keras3(self):
    import keras_hub  # pylint: disable=g-import-not-at-top
    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig(r=2))
    classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=3,
                                                     preprocessor=None)
    testing.randomize([layer for layer in backbone._flatten_layers()  # pylint: disable=protected-access
                       if isinstance(layer, layers.MethodDelta)])
    testing.randomize([classifier.output_dense])
    inputs = testing.tiny_inputs()
    expected = keras.ops.convert_to_numpy(classifier(inputs))
    directory = self.create_tempdir().full_path
    kak.save_adapters(classifier, directory, label_names=["x", "y", "z"])
    loaded = kak.load_task_model(directory, testing.tiny_backbone())
    self.assertAllClose(keras.ops.convert_to_numpy(loaded(inputs)), expected, atol=TOLERANCE,
                        rtol=0)
    with self.assertRaisesRegex(ka.UsageError, "merged"):
      kak.merge(classifier)
      kak.save_adapters(classifier, self.create_tempdir().full_path)


if __name__ == "__main__":
  tf.test.main()

"""A Keras 3 task serves raw strings from its own SavedModel, and `export_multitask` serves a
task saved on Keras 3 beside one saved on Keras 2, each to the probabilities its own stack
gives."""

import os

import tensorflow as tf

import keras_adapters as ka
from keras_adapters import keras3 as kak
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import testing as interop_testing
from keras_adapters.keras3 import cross_stack_testing
from keras_adapters.keras3 import layers
from keras_adapters.keras3 import serving
from keras_adapters.keras3 import testing

TOLERANCE = 1e-5
_TEXTS = tf.constant(["w1 w2 w3", "w7", "w5 w9 w11 w2 w3 w4"])


class ServingTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()
    cls.preprocessing = ka.PreprocessingConfig(hub_testing.tiny_preprocess_handle(), ("text",),
                                               16)
    # A LoRA task saved on Keras 2, which no test changes.
    cls.keras2_artifact = os.path.join(tf.compat.v1.test.get_temp_dir(), "keras2_lora_task")
    ka.save_adapters(interop_testing.random_method_model(cls.handle, ka.LoRAConfig(r=2)),
                     cls.keras2_artifact, label_names=["a", "b", "c"],
                     preprocessing=cls.preprocessing)

  def _probabilities(self, export_dir, **signature_inputs):
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    return served(**signature_inputs)["probabilities"].numpy()

  def test_a_keras2_task_exported_from_keras3_serves_its_probabilities(self):
    keras2_export = self.create_tempdir().full_path
    ka.export_task_from_artifact(self.keras2_artifact, keras2_export)

    model = kak.load_task_model(self.keras2_artifact,
                                cross_stack_testing.backbone_of_hub_encoder(self.handle))
    keras3_export = self.create_tempdir().full_path
    serving.export_task(model, keras3_export)
    self.assertAllClose(self._probabilities(keras3_export, text=_TEXTS),
                        self._probabilities(keras2_export, text=_TEXTS), atol=TOLERANCE, rtol=0)
    label_names = tf.saved_model.load(keras3_export).label_names.numpy()
    self.assertEqual([name.decode() for name in label_names], ["a", "b", "c"])

  def test_export_multitask_serves_tasks_saved_on_either_stack(self):
    backbone = kak.adapt(cross_stack_testing.backbone_of_hub_encoder(self.handle),
                         kak.AdapterConfig(adapter_size=4))
    model = kak.build_classifier(backbone, 2)
    testing.randomize([layer for layer in backbone._flatten_layers()  # pylint: disable=protected-access
                       if isinstance(layer, layers.BottleneckAdapter)]
                      + [model.get_layer("logits")])
    keras3_artifact = self.create_tempdir().full_path
    kak.save_adapters(model, keras3_artifact, label_names=["no", "yes"],
                      preprocessing=self.preprocessing, base_handle=self.handle)
    keras3_export = self.create_tempdir().full_path
    serving.export_task(model, keras3_export, preprocessing=self.preprocessing,
                        label_names=["no", "yes"])

    multitask = self.create_tempdir().full_path
    ka.export_multitask(
        self.handle, {"keras2": self.keras2_artifact, "keras3": keras3_artifact}, multitask)
    signatures = tf.saved_model.load(multitask).signatures
    self.assertAllClose(signatures["keras3"](text=_TEXTS)["probabilities"].numpy(),
                        self._probabilities(keras3_export, text=_TEXTS), atol=TOLERANCE, rtol=0)
    self.assertEqual(signatures["keras2"](text=_TEXTS)["probabilities"].shape, [3, 3])

  def test_without_preprocessing_the_export_is_refused_before_writing(self):
    model = kak.build_classifier(kak.adapt(testing.tiny_backbone(), kak.LoRAConfig()), 2)
    export_dir = self.create_tempdir().full_path
    with self.assertRaisesRegex(ka.UsageError, "preprocessing=kak.PreprocessingConfig"):
      serving.export_task(model, export_dir, label_names=["a", "b"])
    self.assertEmpty(tf.io.gfile.listdir(export_dir))
    with self.assertRaisesRegex(ka.UsageError, "one name per logit"):
      serving.export_task(model, export_dir, preprocessing=self.preprocessing,
                          label_names=["a", "b", "c"])
    self.assertEmpty(tf.io.gfile.listdir(export_dir))


if __name__ == "__main__":
  tf.test.main()

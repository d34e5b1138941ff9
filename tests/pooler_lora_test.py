"""LoRA and (IA)³ on BERT's pooler projection (target "pooler", which peft's "dense" also
wraps): trained, merged, saved and reloaded, served beside other tasks, and refused where a
format cannot hold it (Keras 3 runs it too: keras3/artifacts_test.py serves a task of it
there, keras3/interop_test.py peft's own)."""

import os

import keras_adapters as ka

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import testing as interop_testing
from keras_adapters.models import merging
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing
from keras_adapters.serving import multitask_export
from keras_adapters.serving import task_export
from keras_adapters.utils import errors

_EVERY_DENSE = ("query", "key", "value", "attention_output", "intermediate", "output",
                "pooler")


class PoolerLoRATest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.inputs = interop_testing.tiny_inputs()

  def _model(self, config, seed=0):
    return interop_testing.random_method_model(self.handle, config, pooling="cls",
                                               hidden_layers=0, seed=seed)

  def test_the_pooler_change_trains_and_counts(self):
    model = self._model(ka.LoRAConfig(r=2, target_modules=("value", "pooler")))
    bert = saving.the_adapted_bert(model)
    pooler_weights = {key for key in bert.adapter_weights() if key.startswith("pooler_")}
    self.assertEqual(pooler_weights, {"pooler_transform/lora/lora_a",
                                      "pooler_transform/lora/lora_b"})
    trainable = {id(v) for v in model.trainable_variables}
    self.assertTrue(all(id(v) in trainable for v in bert.encoder.pooler_deltas[0].weights))
    self.assertNotIn(id(bert.encoder.pooler_transform.kernel), trainable)
    before = model(self.inputs, training=False).numpy()
    lora_b = bert.encoder.pooler_deltas[0].weights_by_key()["lora_b"]
    lora_b.assign(tf.zeros_like(lora_b))
    self.assertGreater(np.abs(model(self.inputs, training=False).numpy() - before).max(), 1e-3)

  def test_merge_folds_the_pooler_in(self):
    for config in (ka.LoRAConfig(r=2, target_modules=_EVERY_DENSE),
                   ka.LoRAConfig(r=2, target_modules=("query", "pooler"), use_dora=True),
                   ka.IA3Config(target_modules=("key", "output", "pooler"))):
      with self.subTest(config=type(config).__name__):
        model = self._model(config, seed=3)
        expected = model(self.inputs, training=False).numpy()
        pooler = saving.the_adapted_bert(model).encoder.pooler_transform
        base_kernel = pooler.kernel.numpy()
        with merging.merged(model):
          self.assertAllClose(model(self.inputs, training=False), expected, atol=2e-6, rtol=0)
        self.assertAllEqual(pooler.kernel.numpy(), base_kernel)
        self.assertAllClose(model(self.inputs, training=False), expected, atol=0, rtol=0)
        num_layers = saving.the_adapted_bert(model).encoder.num_layers
        self.assertEqual(ka.merge(model), (len(config.target_modules) - 1) * num_layers + 1)
        self.assertEqual(saving.the_adapted_bert(model).encoder.pooler_deltas, [])
        self.assertAllClose(model(self.inputs, training=False), expected, atol=2e-6, rtol=0)

  def test_artifacts_reload_and_serve_beside_other_tasks(self):
    """Each task's saved artifact reloads to its own model, and a multitask SavedModel
    serves it alone and in a routed batch beside tasks without a pooler change."""
    root = self.create_tempdir().full_path
    preprocess_handle = testing.tiny_preprocess_handle()
    configs = dict(
        lora_pooler=ka.LoRAConfig(r=2, target_modules=_EVERY_DENSE),
        ia3_pooler=ka.IA3Config(target_modules=("key", "output", "pooler")),
        lora=ka.LoRAConfig(r=2))
    models, artifacts = {}, {}
    for seed, (name, config) in enumerate(configs.items()):
      artifacts[name] = model_testing.save_random_task_artifact(
          os.path.join(root, name), self.handle, preprocess_handle, adapter_config=config,
          pooling="cls", seq_length=16, seed=seed)
      models[name] = saving.load_task_model(artifacts[name])
      self.assertEqual(saving.the_adapted_bert(models[name]).adapter_config, config)
    served = tf.saved_model.load(multitask_export.export_multitask(
        self.handle, artifacts, os.path.join(root, "multitask")))
    texts = tf.constant(["w1 w2 w3", "w4 w5 unknown", "w3 w9 w10"])
    inputs = task_export.pack_texts(testing.tiny_preprocessor(), [texts], 16)
    routed = served.signatures["routed"](task=tf.constant(list(configs)),
                                         text=texts)["probabilities"]
    for row, (name, model) in enumerate(models.items()):
      expected = tf.nn.softmax(model(inputs, training=False))
      self.assertAllClose(served.signatures[name](text=texts)["probabilities"], expected,
                          atol=1e-5, rtol=0, msg=name)
      self.assertAllClose(routed[row], expected[row], atol=1e-5, rtol=0, msg=name)

  def test_formats_without_the_pooler_refuse_it(self):
    model = self._model(ka.LoRAConfig(r=2, target_modules=("query", "pooler")))
    with self.assertRaisesRegex(errors.UsageError, r"\['pooler'\] have no AdapterHub "
                                "equivalent"):
      adapterhub.save_adapterhub(model, os.path.join(self.create_tempdir().full_path, "a"),
                                 model_name="tiny-bert")


if __name__ == "__main__":
  tf.test.main()

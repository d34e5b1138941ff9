"""Tests for folding LoRA and (IA)³ into the frozen kernels."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing
from keras_adapters.methods import projection_delta
from keras_adapters.methods.ia3 import config as ia3_config
from keras_adapters.methods.lora import config as lora_config
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import merging
from keras_adapters.models import saving

_ALL = projection_delta.PROJECTIONS
_NUM_LAYERS = testing.TINY_CONFIG["num_layers"]

# Name → the config of the task's set, and how far its layers move from their initial values
# (as training would; 0 keeps them).
CONFIGS = {
    "lora_all_projections": (lora_config.LoRAConfig(
        r=4, alpha=32.0, target_modules=_ALL, init_weights="bert"), 0.0),
    "rslora_all_projections_trained": (lora_config.LoRAConfig(
        r=4, alpha=8.0, use_rslora=True, target_modules=_ALL, leave_out=(0,)), 0.3),
    "lora_dora_peft": (lora_config.LoRAConfig(
        r=2, alpha=4.0, use_dora=True, target_modules=("query", "value", "output")), 0.3),
    "dora_adapterhub": (lora_config.LoRAConfig(
        r=4, alpha=8.0, use_dora=True, dora_variant="adapterhub", leave_out=(0,),
        target_modules=("query", "key", "intermediate")), 0.3),
    "ia3_paper": (ia3_config.IA3Config(), 0.5),
    "ia3_adapterhub": (ia3_config.IA3Config(
        target_modules=("key", "value", "intermediate"), feedforward_modules=()), 0.5),
    "ia3_all_inputs_and_outputs": (ia3_config.IA3Config(
        target_modules=_ALL, feedforward_modules=("query", "attention_output", "output")), 0.5),
}


def _inputs():
  ids = tf.constant([[2, 9, 10, 3, 5, 7], [2, 11, 3, 0, 0, 0], [2, 4, 8, 12, 3, 0]])
  return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
              input_type_ids=tf.constant([[0, 0, 0, 0, 1, 1]] * 3) * tf.cast(ids > 0, tf.int32))


def _projection_values(bert):
  """Every projection kernel and bias of the encoder, by block and target, as NumPy."""
  return {(index, target, kind): variable.numpy()
          for index, block in enumerate(bert.encoder.transformer_layers)
          for target in _ALL
          for kind, variable in zip(("kernel", "bias"), block.projection_variables(target))}


class MergingTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.inputs = _inputs()

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(5)

  def _model(self, name):
    """A classifier around a tiny AdaptedBert with the set `CONFIGS[name]`, its method
    layers moved as training would, and its logits."""
    config, stddev = CONFIGS[name]
    bert = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
    model = classifier.build_classifier(bert, 3)
    rng = np.random.default_rng(7)
    for layer in bert.encoder.projection_layers:
      for weight in layer.weights:
        weight.assign(weight + rng.normal(scale=stddev, size=weight.shape))
    logits = model(self.inputs, training=False)
    with bert.disable_adapter():
      plain = model(self.inputs, training=False)
    # The method changes the logits well beyond the tolerance the merge is held to.
    self.assertGreater(np.abs(logits - plain).max(), 1e-3)
    return model, bert, logits

  @parameterized.named_parameters(
      ("lora_all_projections", "lora_all_projections"),
      ("rslora_all_projections_trained", "rslora_all_projections_trained"),
      ("lora_dora_peft", "lora_dora_peft"),
      ("dora_adapterhub", "dora_adapterhub"),
      ("ia3_paper", "ia3_paper"),
      ("ia3_adapterhub", "ia3_adapterhub"))
  def test_merge_keeps_the_outputs_with_the_base_s_graph(self, name):
    """Merged logits equal the unmerged to 1e-5; the encoder has no method layers left, only
    the head trains, and the set can no longer be saved."""
    model, bert, logits = self._model(name)
    config = CONFIGS[name][0]
    expected_count = len(config.target_modules) * (_NUM_LAYERS - len(config.leave_out))
    self.assertLen(bert.encoder.projection_layers, expected_count)
    before = _projection_values(bert)

    self.assertEqual(merging.merge(model), expected_count)
    self.assertEqual(bert.encoder.projection_layers, [])
    self.assertTrue(bert.merged)
    self.assertAllClose(model(self.inputs, training=False), logits, atol=1e-5, rtol=0)
    # Only the head's kernel and bias are left to train.
    self.assertEqual([v.name for v in model.trainable_variables],
                     ["logits/kernel:0", "logits/bias:0"])
    changed = {key for key, value in _projection_values(bert).items()
               if not np.array_equal(value, before[key])}
    touched = {(index, target) for index in range(_NUM_LAYERS) if index not in config.leave_out
               for target in config.target_modules}
    # Every kernel of a changed projection moves; the bias only where an output is scaled
    # (by (IA)^3, or by AdapterHub's DoRA).
    self.assertEqual({(i, t) for i, t, kind in changed if kind == "kernel"}, touched)
    scaled_outputs = set() if name.startswith(("lora", "rslora")) else {
        key for key in touched if key[1] not in getattr(config, "feedforward_modules", ())}
    self.assertEqual({(i, t) for i, t, kind in changed if kind == "bias"}, scaled_outputs)

    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "merged into its base.*save the adapters before merging"):
      saving.save_adapters(model, os.path.join(self.create_tempdir().full_path, "adapters"))
    self.assertEqual(merging.merge(model), 0)  # Nothing left to merge.
    self.assertAllClose(model(self.inputs, training=False), logits, atol=1e-5, rtol=0)

  @parameterized.named_parameters(("lora", "rslora_all_projections_trained"),
                                  ("ia3", "ia3_all_inputs_and_outputs"))
  def test_merged_context_restores_kernels_and_layers_exactly(self, name):
    model, bert, logits = self._model(name)
    layers = bert.encoder.projection_layers
    trainable = [v.name for v in model.trainable_variables]
    before = _projection_values(bert)
    with merging.merged(model) as count:
      self.assertEqual(count, len(layers))
      self.assertEqual(bert.encoder.projection_layers, [])
      self.assertTrue(bert.merged)
      self.assertAllClose(model(self.inputs, training=False), logits, atol=1e-5, rtol=0)
    self.assertFalse(bert.merged)
    for key, value in _projection_values(bert).items():
      self.assertAllEqual(value, before[key], msg=str(key))
    self.assertLen(bert.encoder.projection_layers, len(layers))
    for restored, layer in zip(bert.encoder.projection_layers, layers):
      self.assertIs(restored, layer)
    self.assertAllEqual(model(self.inputs, training=False), logits)
    # The method's weights train again, and nothing else of the encoder does.
    self.assertEqual([v.name for v in model.trainable_variables], trainable)
    method_weights = [w for layer in layers for w in layer.trainable_weights]
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(model(self.inputs, training=True)))
    gradients = tape.gradient(loss, method_weights)
    self.assertEmpty([w.name for w, g in zip(method_weights, gradients)
                      if g is None or not np.any(g.numpy())])
    # The set saves as before.
    saving.save_adapters(model, os.path.join(self.create_tempdir().full_path, "adapters"))

  def test_merged_context_restores_after_an_error(self):
    """An error inside the context restores the model; `merge` takes the AdaptedBert too."""
    model, bert, logits = self._model("ia3_paper")
    with self.assertRaisesRegex(RuntimeError, "inside"):
      with merging.merged(model):
        raise RuntimeError("inside")
    self.assertFalse(bert.merged)
    self.assertLen(bert.encoder.projection_layers, 3 * _NUM_LAYERS)
    self.assertAllEqual(model(self.inputs, training=False), logits)
    self.assertEqual(merging.merge(bert), 3 * _NUM_LAYERS)
    self.assertAllClose(model(self.inputs, training=False), logits, atol=1e-5, rtol=0)

  def test_predict_traced_before_a_merge_is_retraced(self):
    """`predict` (and `evaluate`, `fit`) functions traced with the method layers are not
    reused on the merged kernels, nor those traced while merged on the restored ones."""
    model, _, logits = self._model("lora_all_projections")
    with merging.merged(model):
      self.assertAllClose(model.predict(self.inputs, verbose=0), logits, atol=1e-5, rtol=0)
    self.assertAllClose(model.predict(self.inputs, verbose=0), logits, atol=1e-5, rtol=0)
    merging.merge(model)
    self.assertAllClose(model.predict(self.inputs, verbose=0), logits, atol=1e-5, rtol=0)

  def test_bottleneck_adapters_merge_nothing(self):
    """A plain AdapterConfig model: merge returns 0 and changes nothing; its set still
    saves."""
    bert = adapted_bert.AdaptedBert(
        self.handle, adapter_config=adapter_config.AdapterConfig(adapter_size=4))
    model = classifier.build_classifier(bert, 3)
    logits = model(self.inputs, training=False)
    weights = [w.numpy() for w in model.weights]
    with merging.merged(model) as count:
      self.assertEqual(count, 0)
    self.assertEqual(merging.merge(model), 0)
    self.assertFalse(getattr(bert, "merged", False))
    for weight, value in zip(model.weights, weights):
      self.assertAllEqual(weight, value)
    self.assertAllEqual(model(self.inputs, training=False), logits)
    saving.save_adapters(model, os.path.join(self.create_tempdir().full_path, "adapters"))

  def test_a_model_without_one_adapted_bert_is_refused(self):
    inputs = keras.Input([4])
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "exactly one AdaptedBert; found 0"):
      merging.merge(keras.Model(inputs, keras.layers.Dense(2)(inputs)))


if __name__ == "__main__":
  tf.test.main()

"""Tests for `adapt` and `merge` on a tiny random keras-hub `BertBackbone` (TensorFlow
backend, in this process; `jax_test` runs the same report on JAX)."""

import functools
import json
import subprocess

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from keras_adapters.utils import warm_python
import keras_adapters as ka
from keras_adapters import keras3 as kak
from keras_adapters.hub import testing as hub_testing
from keras_adapters.keras3 import layers
from keras_adapters.keras3 import testing
from keras_adapters.utils import errors


@functools.lru_cache(maxsize=None)
def _keras2_trainable():
  """Config name → the parameters `AdaptedBert` trains on a TF Hub encoder of the tiny block
  shapes: Keras 2 counts, the same whichever backend's report they are held against, so
  built once for both report classes."""
  handle = hub_testing.tiny_hub_handle()
  return {name: sum(int(np.prod(w.shape))
                    for w in ka.AdaptedBert(handle, adapter_config=config).trainable_weights)
          for name, config in testing.report_configs().items()}


def _jax_report():
  """`testing.method_report()` in a process of its own on JAX (`testing.jax_environ`):
  the backend it ran on and the report."""
  code = ("import json, keras; from keras_adapters.keras3 import testing; "
          "print(json.dumps([keras.backend.backend(), testing.method_report()]))")
  result = subprocess.run(warm_python.command("-c", code), capture_output=True, text=True,
                          env=testing.jax_environ(), timeout=900, check=False)
  if result.returncode:
    raise AssertionError(result.stderr[-3000:])
  return json.loads(result.stdout.strip().splitlines()[-1])


class _ReportChecks:
  """The checks of a `testing.method_report()` (`self.report`), the same on every backend."""

  def test_trainable_parameters_equal_the_keras2_path_s(self):
    """The same config trains as many parameters on a keras-hub backbone as `AdaptedBert`
    on a TF Hub encoder of the same block shapes."""
    for name, trainable in _keras2_trainable().items():
      self.assertEqual(self.report[name]["trainable"], trainable, name)
    # Houlsby: two adapters per block (2·m·d + d + m each) and five LayerNorms (2·d each).
    d, m = 16, 4
    self.assertEqual(self.report["houlsby"]["trainable"], 2 * 2 * (2 * m * d + d + m) + 5 * 2 * d)

  def test_lora_and_ia3_start_as_the_base_and_adapters_near_it(self):
    for name in ("lora", "dora", "dora_adapterhub", "ia3", "lora_pooler"):
      self.assertLess(self.report[name]["start_change"], 1e-6, name)
    self.assertBetween(self.report["houlsby"]["start_change"], 1e-7, 1e-2)

  def test_merge_keeps_the_outputs(self):
    for name in ("lora", "dora", "dora_adapterhub", "ia3", "lora_pooler"):
      self.assertGreater(self.report[name]["adapted_change"], 1e-3, name)
      self.assertLess(self.report[name]["merge_change"], 1e-5, name)

  def test_a_task_step_trains_the_method_and_leaves_the_base(self):
    for name, entry in self.report.items():
      self.assertTrue(np.isfinite(entry["fit_loss"]), name)
      self.assertEqual(entry["base_changed"], 0.0, name)
      self.assertGreater(entry["trained_changed"], 0.0, name)


class TensorFlowReportTest(_ReportChecks, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.report = testing.method_report()


class JaxReportTest(_ReportChecks, tf.test.TestCase):
  """The same checks with `KERAS_BACKEND=jax`, in a subprocess. JAX comes with the `jax`
  extra that `scripts/setup.sh` installs; without it this fails, as it should."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    backend, cls.report = _jax_report()
    assert backend == "jax", backend


class AdaptTest(tf.test.TestCase):

  def test_layers_go_where_the_config_says(self):
    backbone = testing.tiny_backbone()
    self.assertIs(kak.adapt(backbone, kak.AdapterConfig(adapter_size=4, mh_adapter=False,
                                                        leave_out=(0,))), backbone)
    first, second = backbone.transformer_layers
    self.assertNotIsInstance(first._feedforward_dropout, layers.AdaptedSublayerOutput)
    self.assertNotIsInstance(second._self_attention_dropout, layers.AdaptedSublayerOutput)
    self.assertIsInstance(second._feedforward_dropout, layers.AdaptedSublayerOutput)

    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig())
    for block in backbone.transformer_layers:
      attention = block._self_attention_layer
      self.assertIsInstance(attention._query_dense, layers.AdaptedProjection)
      self.assertIsInstance(attention._value_dense, layers.AdaptedProjection)
      self.assertNotIsInstance(attention._key_dense, layers.AdaptedProjection)
      self.assertEqual(attention._value_dense.deltas[0].name, "value_lora")

  def test_the_pooler_projection_is_wrapped_in_the_backbones_graph(self):
    """LoRA on BERT's pooler wraps `pooled_dense` where the backbone's graph calls it, so a
    task on the backbone reads the changed pooled output; merging gives the Dense back."""
    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig(target_modules=("pooler",)))
    self.assertIsInstance(backbone.pooled_dense, layers.AdaptedProjection)
    self.assertIn(backbone.pooled_dense, backbone.layers)
    self.assertEqual(backbone.pooled_dense.deltas[0].name, "pooler_lora")
    testing.randomize(backbone.pooled_dense.deltas)
    classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=2,
                                                     preprocessor=None)
    inputs = testing.tiny_inputs()
    adapted = keras.ops.convert_to_numpy(classifier(inputs))
    self.assertEqual(kak.merge(classifier), 1)
    self.assertIsInstance(backbone.pooled_dense, keras.layers.Dense)
    self.assertIn(backbone.pooled_dense, backbone.layers)
    self.assertAllClose(keras.ops.convert_to_numpy(classifier(inputs)), adapted, atol=1e-5)

  def test_the_pooler_of_a_backbone_without_one_is_refused(self):
    backbone = testing.tiny_backbones(names=["RobertaBackbone"])["RobertaBackbone"]
    with self.assertRaisesRegex(errors.UsageError,
                                "the RobertaBackbone has no pooler; leave 'pooler' out"):
      kak.adapt(backbone, kak.LoRAConfig(target_modules=("query", "pooler")))
    self.assertTrue(all(w.trainable for w in backbone.weights))

  def test_freeze_below_adapters_trains_what_the_keras2_path_trains(self):
    """AdapterDrop's training: the adapters and LayerNorms of the adapted block train, each
    with a gradient; the embeddings' and the left-out block's LayerNorms stay frozen, out of
    the trainable weights a step takes gradients of; both stacks train as many parameters."""
    config = kak.AdapterConfig(adapter_size=4, leave_out=(0,), freeze_below_adapters=True)
    backbone = kak.adapt(testing.tiny_backbone(), config)
    first, second = backbone.transformer_layers
    frozen = [w for norm in (backbone.embeddings_layer_norm, first._self_attention_layer_norm,
                             first._feedforward_layer_norm) for w in norm.weights]
    trained_norms = [w for norm in (second._self_attention_layer_norm,
                                    second._feedforward_layer_norm) for w in norm.weights]
    trainable = {id(w) for w in backbone.trainable_weights}
    self.assertEqual(({id(w) for w in frozen} & trainable, len(frozen)), (set(), 6))
    self.assertContainsSubset({id(w) for w in trained_norms}, trainable)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(backbone(testing.tiny_inputs())["sequence_output"] ** 2)
    self.assertNotIn(None, tape.gradient(loss, [w.value for w in backbone.trainable_weights]))
    d, m = 16, 4  # Two adapters (2·m·d + d + m each) and two LayerNorms (2·d each).
    parameters = sum(int(np.prod(w.shape)) for w in backbone.trainable_weights)
    self.assertEqual(parameters, 2 * (2 * m * d + d + m) + 2 * 2 * d)
    bert = ka.AdaptedBert(hub_testing.tiny_hub_handle(), adapter_config=config)
    self.assertEqual(parameters, sum(int(np.prod(w.shape)) for w in bert.trainable_weights))

  def test_merge_gives_the_blocks_their_projections_back(self):
    backbone = kak.adapt(testing.tiny_backbone(), kak.IA3Config())
    self.assertEqual(kak.merge(backbone), 6)
    self.assertFalse([layer for layer in backbone._flatten_layers()
                      if isinstance(layer, (layers.AdaptedProjection, layers.MethodDelta))])
    self.assertEqual(kak.merge(backbone), 0)

  def test_drop_adapters_gives_blocks_the_base_s_computation(self):
    """AdapterDrop on every block: trained-like adapters (Pfeiffer's placement, parallel ones
    with their taps) or LoRA layers gone, the backbone computes as the base again."""
    inputs = testing.tiny_inputs()
    for config, count in ((kak.AdapterConfig(adapter_size=4, mh_adapter=False,
                                             original_ln_before=True), 2),
                          (kak.AdapterConfig(adapter_size=4, is_parallel=True), 4),
                          (kak.LoRAConfig(), 4)):
      backbone = testing.tiny_backbone()
      base = testing.sequence_output(backbone, inputs)
      kak.adapt(backbone, config)
      testing.randomize([layer for layer in backbone._flatten_layers() if isinstance(
          layer, (layers.MethodDelta, layers.BottleneckAdapter))])
      self.assertNotAllClose(testing.sequence_output(backbone, inputs), base, atol=1e-3)
      self.assertEqual(kak.drop_adapters(backbone, [1]), count // 2)
      self.assertEqual(kak.drop_adapters(backbone, [0, 1]), count // 2)
      self.assertAllClose(testing.sequence_output(backbone, inputs), base, atol=1e-6)
      self.assertFalse([layer for layer in backbone._flatten_layers()
                        if isinstance(layer, layers.SublayerInputTap)])

  def test_a_compiled_task_fits_and_predicts_with_the_adapters(self):
    """`BertTextClassifier` on an adapted backbone, compiled as a user compiles it: its
    traced `predict` computes what an eager call does, adapters included (parallel ones,
    which read their sub-layer's input, too), and `fit` trains the adapters and not the
    base."""
    for config in (kak.AdapterConfig(adapter_size=4),
                   kak.AdapterConfig(adapter_size=4, is_parallel=True)):
      backbone = kak.adapt(testing.tiny_backbone(), config)
      adapter = backbone.transformer_layers[1]._feedforward_dropout.adapter
      testing.randomize([adapter])
      inputs = testing.tiny_inputs()
      classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=2,
                                                       preprocessor=None)
      classifier.compile(optimizer="adam",
                         loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
      self.assertAllClose(classifier.predict(inputs, verbose=0),
                          keras.ops.convert_to_numpy(classifier(inputs)), atol=1e-5)
      kernel = backbone.transformer_layers[0]._self_attention_layer._key_dense.kernel
      before = [keras.ops.convert_to_numpy(w) for w in (kernel, adapter.up_project.kernel)]
      classifier.fit(inputs, np.array([0, 1, 0]), epochs=1, verbose=0)
      self.assertAllEqual(keras.ops.convert_to_numpy(kernel), before[0])
      self.assertNotAllClose(keras.ops.convert_to_numpy(adapter.up_project.kernel), before[1])

if __name__ == "__main__":
  tf.test.main()

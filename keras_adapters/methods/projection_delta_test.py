"""Tests for what the projection methods share: projections, their widths, chaining, the
registry."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from keras_adapters import methods  # pylint: disable=unused-import  (registers them)
from keras_adapters.methods import projection_delta
from keras_adapters.methods import registry
from keras_adapters.methods.ia3 import layer as ia3_layer
from keras_adapters.methods.lora import layer as lora_layer


class ProjectionsTest(tf.test.TestCase, parameterized.TestCase):

  def test_projections_are_a_bert_block_s(self):
    self.assertEqual(projection_delta.PROJECTIONS, (
        "query", "key", "value", "attention_output", "intermediate", "output"))

  @parameterized.named_parameters(
      ("query", "query", (16, 16)),
      ("key", "key", (16, 16)),
      ("value", "value", (16, 16)),
      ("attention_output", "attention_output", (16, 16)),
      ("intermediate", "intermediate", (16, 64)),
      ("output", "output", (64, 16)),
  )
  def test_projection_widths(self, target, widths):
    self.assertEqual(projection_delta.projection_widths(target, 16, 64), widths)

  def test_unknown_projection_raises_listing_the_known(self):
    with self.assertRaisesRegex(ValueError, r"'dense'.*\['query', 'key', 'value', "
                                r"'attention_output', 'intermediate', 'output', 'pooler'\]"):
      projection_delta.projection_widths("dense", 16, 64)
    with self.assertRaisesRegex(ValueError, "'dense'"):
      projection_delta.ProjectionDelta("dense", 4)

  def test_base_layer_leaves_its_methods_to_subclasses(self):
    layer = projection_delta.ProjectionDelta("key", 4)
    self.assertEqual((layer.target, layer.units), ("key", 4))
    self.assertEqual({k: layer.get_config()[k] for k in ("target", "units")},
                     dict(target="key", units=4))
    for method, arguments in (("merge", (None, None)), ("weights_by_key", ())):
      with self.assertRaises(NotImplementedError):
        getattr(layer, method)(*arguments)


class ApplyProjectionTest(tf.test.TestCase):

  def test_no_deltas_is_the_projection(self):
    self.assertEqual(projection_delta.apply_projection((), 3.0, lambda x: 2 * x), 6.0)

  def test_deltas_apply_in_order_the_first_wrapping_the_projection(self):
    """With plain functions: `project` is `x -> 2x`; the first delta adds 1 to the frozen
    projection's output, the second multiplies the first's output by 10."""
    calls = []

    def add_one(x, project, training):
      calls.append(("add_one", x, training))
      return project(x) + 1

    def times_ten(x, project, training):
      calls.append(("times_ten", x, training))
      return project(x) * 10

    self.assertEqual(projection_delta.apply_projection(
        [add_one, times_ten], 3.0, lambda x: 2 * x, training=True), (2 * 3.0 + 1) * 10)
    # The last delta is called first, on the projection's input, with `training`.
    self.assertEqual(calls, [("times_ten", 3.0, True), ("add_one", 3.0, True)])
    self.assertEqual(projection_delta.apply_projection(
        [times_ten, add_one], 3.0, lambda x: 2 * x), 2 * 3.0 * 10 + 1)

  def test_a_delta_may_change_the_projection_s_input(self):
    """A delta that scales the input (as (IA)³ on a feed-forward module) sees the input
    before any delta applied after it."""

    def scale_input(x, project, training):
      del training
      return project(x * 3)

    def add_input(x, project, training):
      del training
      return project(x) + x

    self.assertEqual(projection_delta.apply_projection(
        [scale_input, add_input], 1.0, lambda x: 2 * x), 2 * 3.0 + 1.0)


  def test_merging_a_chain_in_its_order_computes_the_chain(self):
    """LoRA, then (IA)³ on its input, then (IA)³ on its output, on one projection: folding
    each `merge` into the kernel in the chain's order (as `keras_adapters.merge` does) gives
    the projection the chain computes; another order does not."""
    rng = np.random.RandomState(0)
    kernel = tf.constant(rng.normal(size=(6, 5)), tf.float32)
    bias = tf.constant(rng.normal(size=(5,)), tf.float32)
    deltas = [lora_layer.LoRA("value", 5, rank=2, init_weights="bert"),
              ia3_layer.IA3("value", 5, scales_input=True), ia3_layer.IA3("value", 5)]
    for delta in deltas:
      delta.build((None, 6))
      for weight in delta.weights:
        weight.assign(rng.uniform(0.5, 1.5, size=weight.shape))
    x = tf.constant(rng.normal(size=(4, 6)), tf.float32)
    expected = projection_delta.apply_projection(deltas, x, lambda x: x @ kernel + bias)

    def merged(order):
      merged_kernel, merged_bias = kernel, bias
      for delta in order:
        merged_kernel, merged_bias = delta.merge(merged_kernel, merged_bias)
      return x @ merged_kernel + merged_bias

    self.assertAllClose(merged(deltas), expected, atol=1e-4, rtol=1e-5)
    self.assertNotAllClose(merged(deltas[::-1]), expected, atol=1e-2)


class RegistryTest(tf.test.TestCase):

  def test_both_methods_are_registered(self):
    self.assertContainsSubset(["lora", "ia3"], registry.names())
    lora = registry.get("lora")
    self.assertEqual((lora.name, lora.config_class.__name__, lora.layer_class.__name__),
                     ("lora", "LoRAConfig", "LoRA"))
    ia3 = registry.get("ia3")
    self.assertEqual((ia3.config_class.__name__, ia3.layer_class.__name__),
                     ("IA3Config", "IA3"))
    self.assertEqual(registry.config_classes(),
                     tuple(registry.get(name).config_class for name in registry.names()))
    for name in registry.names():
      self.assertEqual(registry.get(name).config_class.method, name)

  def test_unknown_name_raises_listing_the_known(self):
    with self.assertRaisesRegex(ValueError, r"Unknown method 'dora'; known: \[.*'ia3'.*"
                                r"'lora'.*\]"):
      registry.get("dora")

  def test_a_name_registers_once(self):
    lora = registry.get("lora")
    with self.assertRaisesRegex(ValueError, "'lora'.*already"):
      registry.register(lora.config_class, learning_rate=1e-3, layer=lora.layer_class)
    self.assertIs(registry.get("lora"), lora)


if __name__ == "__main__":
  tf.test.main()

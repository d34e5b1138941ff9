"""Tests for the Keras 3 layers: each computes what the Keras 2 layer of its method computes,
with the same weights, names and start (both use the method's one definition)."""

from absl.testing import parameterized
import keras
import numpy as np
import tensorflow as tf

from keras_adapters.keras3 import layers
from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.methods import projection_delta
from keras_adapters.methods import registry

_WIDTH_IN, _UNITS = 6, 5


def _projection(seed=0):
  rng = np.random.RandomState(seed)
  kernel = rng.normal(size=(_WIDTH_IN, _UNITS)).astype("float32")
  bias = rng.normal(size=(_UNITS,)).astype("float32")
  return kernel, bias


def _inputs(seed=1, shape=(4, _WIDTH_IN)):
  return np.random.RandomState(seed).normal(size=shape).astype("float32")


def _pair(method, options, target="value"):
  """The Keras 2 and Keras 3 layers of `method`, built, the Keras 3 one holding the Keras 2
  one's (randomized) weights."""
  keras2 = registry.get(method).layer_class(target=target, units=_UNITS, **options)
  keras2.build((None, _WIDTH_IN))
  rng = np.random.RandomState(3)
  for weight in keras2.weights:
    weight.assign(rng.uniform(0.5, 1.5, size=weight.shape))
  keras3 = layers.MethodDelta(method, target, _UNITS, options)
  keras3.build((None, _WIDTH_IN))
  for key, weight in keras3.weights_by_key().items():
    weight.assign(keras2.weights_by_key()[key].numpy())
  return keras2, keras3


_METHOD_CASES = (
    ("lora", "lora", dict(rank=2, alpha=4.0, use_rslora=False, dropout=0.0,
                          init_weights="lora")),
    ("rslora", "lora", dict(rank=3, alpha=6.0, use_rslora=True, dropout=0.0,
                            init_weights="bert")),
    ("dora_peft", "lora", dict(rank=2, alpha=4.0, use_rslora=False, dropout=0.0,
                               init_weights="lora", use_dora=True, dora_variant="peft")),
    ("dora_adapterhub", "lora", dict(rank=2, alpha=4.0, use_rslora=False, dropout=0.0,
                                     init_weights="lora", use_dora=True,
                                     dora_variant="adapterhub")),
    ("ia3_output", "ia3", dict(scales_input=False)),
    ("ia3_input", "ia3", dict(scales_input=True)),
)


class MethodDeltaTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*_METHOD_CASES)
  def test_same_weights_as_keras2(self, method, options):
    keras2, keras3 = _pair(method, options)
    self.assertEqual({k: tuple(v.shape) for k, v in keras3.weights_by_key().items()},
                     {k: tuple(v.shape) for k, v in keras2.weights_by_key().items()})
    self.assertEqual(sorted(w.name for w in keras3.weights), sorted(keras2.weights_by_key()))

  @parameterized.named_parameters(*_METHOD_CASES)
  def test_computes_and_merges_as_keras2(self, method, options):
    keras2, keras3 = _pair(method, options)
    kernel, bias = _projection()
    x = _inputs()
    # The frozen projection with its kernel and bias, which DoRA's norms read.
    expected = keras2(tf.constant(x), project=projection_delta.Projection(
        lambda v: tf.matmul(v, kernel) + bias, tf.constant(kernel), tf.constant(bias)))
    output = keras3(keras.ops.convert_to_tensor(x), project=layers.FrozenProjection(
        lambda v: keras.ops.matmul(v, kernel) + bias, kernel, bias))
    self.assertAllClose(keras.ops.convert_to_numpy(output), expected, atol=1e-6, rtol=1e-6)
    # The method changes the projection: the comparison is not of two unchanged outputs.
    self.assertNotAllClose(expected, x @ kernel + bias)
    merged_kernel, merged_bias = keras3.merge(kernel, bias)
    expected_kernel, expected_bias = keras2.merge(tf.constant(kernel), tf.constant(bias))
    self.assertAllClose(keras.ops.convert_to_numpy(merged_kernel), expected_kernel, atol=1e-6)
    self.assertAllClose(keras.ops.convert_to_numpy(merged_bias), expected_bias, atol=1e-6)

  def test_lora_starts_as_keras2_does(self):
    """The "lora" start: A uniform within ±1/sqrt(in), B zero, on both stacks."""
    width_in = 64
    layer = layers.MethodDelta("lora", "intermediate", 32, dict(
        rank=16, alpha=8.0, use_rslora=False, dropout=0.0, init_weights="lora"))
    layer.build((None, width_in))
    a = keras.ops.convert_to_numpy(layer.lora_a)
    self.assertAllEqual(keras.ops.convert_to_numpy(layer.lora_b), np.zeros([16, 32]))
    self.assertLessEqual(np.abs(a).max(), 1 / np.sqrt(width_in))
    self.assertGreater(np.abs(a).max(), 0.9 / np.sqrt(width_in))

  def test_dora_starts_from_the_norms_keras2_starts_from(self):
    """DoRA's magnitudes start as the Keras 2 layer's: from the norms of the base's kernel
    (AdapterHub's), or of it changed by LoRA's start (peft's; B random in the "bert" start)."""
    kernel, bias = _projection()
    for variant in ("peft", "adapterhub"):
      keras2, keras3 = _pair("lora", dict(rank=2, alpha=4.0, use_rslora=False, dropout=0.0,
                                          init_weights="bert", use_dora=True,
                                          dora_variant=variant))
      keras2.start_from(tf.constant(kernel), tf.constant(bias))
      keras3.start_from(kernel, bias)
      self.assertAllClose(keras.ops.convert_to_numpy(keras3.magnitude), keras2.magnitude,
                          atol=1e-6, msg=variant)
    self.assertAllClose(keras.ops.convert_to_numpy(keras3.magnitude),
                        np.linalg.norm(kernel, axis=0), atol=1e-6)

  def test_lora_dropout_only_when_training(self):
    layer = layers.MethodDelta("lora", "key", 4, dict(
        rank=4, alpha=4.0, use_rslora=False, dropout=0.5, init_weights="lora"))
    layer.build((None, 4))
    layer.lora_a.assign(np.eye(4, dtype="float32"))
    layer.lora_b.assign(np.eye(4, dtype="float32"))
    x = _inputs(shape=(64, 4))
    zero = lambda v: v * 0.0
    self.assertAllClose(keras.ops.convert_to_numpy(layer(x, project=zero)), x, atol=1e-6)
    dropped = keras.ops.convert_to_numpy(layer(x, project=zero, training=True))
    self.assertTrue(np.all(np.isclose(dropped, 0.0) | np.isclose(dropped, 2 * x, atol=1e-5)))
    self.assertBetween(np.isclose(dropped, 0.0).mean(), 0.3, 0.7)


class AdaptedProjectionTest(tf.test.TestCase):

  def test_attention_kernels_are_flattened_projections(self):
    """An `EinsumDense` into heads (`[hidden, heads, head_size]`) and one out of them
    (`[heads, head_size, hidden]`) with LoRA compute the flat `x · W + s · x · A · B`."""
    rng = np.random.RandomState(0)
    into = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 3),
                                    bias_axes="de")
    into.build((None, None, 6))
    out_of = keras.layers.EinsumDense("abcd,cde->abe", output_shape=(None, 6), bias_axes="e")
    out_of.build((None, None, 2, 3))
    options = dict(rank=2, alpha=2.0, use_rslora=False, dropout=0.0, init_weights="bert")
    for projection, x in ((into, rng.normal(size=(2, 5, 6))),
                          (out_of, rng.normal(size=(2, 5, 2, 3)))):
      for weight in projection.weights:
        weight.assign(rng.normal(size=weight.shape))
      adapted = layers.AdaptedProjection(
          projection, [layers.MethodDelta("lora", "query", 6, options)])
      x = x.astype("float32")
      output = keras.ops.convert_to_numpy(adapted(x))
      self.assertEqual(output.shape, tuple(keras.ops.convert_to_numpy(projection(x)).shape))
      delta = adapted.deltas[0]
      flat = x.reshape(10, 6)
      expected = (flat @ keras.ops.convert_to_numpy(projection.kernel).reshape(6, 6)
                  + keras.ops.convert_to_numpy(projection.bias).reshape(6)
                  + flat @ keras.ops.convert_to_numpy(delta.lora_a)
                  @ keras.ops.convert_to_numpy(delta.lora_b))
      self.assertAllClose(output.reshape(10, 6), expected, atol=1e-5, rtol=1e-5)
      # Merging folds the change into the projection's own kernel and bias.
      merged = adapted.merged_projection()
      self.assertAllClose(keras.ops.convert_to_numpy(merged(x)), output, atol=1e-5)

  def test_activation_comes_after_the_changes(self):
    dense = keras.layers.Dense(4, activation="relu")
    dense.build((None, 3))
    delta = layers.MethodDelta("ia3", "intermediate", 4, dict(scales_input=False))
    adapted = layers.AdaptedProjection(dense, [delta])
    delta.scale.assign(-np.ones([4], "float32"))
    x = _inputs(shape=(5, 3))[:, :3]
    pre_activation = x @ keras.ops.convert_to_numpy(dense.kernel)
    self.assertAllClose(keras.ops.convert_to_numpy(adapted(x)),
                        np.maximum(-pre_activation, 0.0), atol=1e-6)


class BottleneckAdapterTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("houlsby", dict()),
      ("scaled_own_norms", dict(scaling=2.0, ln_before=True, ln_after=True)),
      ("skip_before_own_norm", dict(ln_after=True, adapter_residual_before_ln=True)),
  )
  def test_computes_as_the_keras2_adapter_before_the_residual(self, options):
    """`LayerNorm(x + keras3(h))` is what the Keras 2 adapter computes for the sub-layer's
    output `h` and input `x` (the block's LayerNorm: here the identity, to see the sum)."""
    options = {name: options.get(name, value) for name, value in
               adapter_lib.ADAPTER_OPTIONS.items()
               if name not in ("mh_adapter", "output_adapter")}
    keras2 = adapter_lib.Adapter(4, activation="gelu", **options)
    keras2.build((None, None, 8))
    rng = np.random.RandomState(0)
    for weight in keras2.weights:
      weight.assign(rng.normal(scale=0.5, size=weight.shape))
    keras3 = layers.BottleneckAdapter(4, "gelu", 1e-2, options)
    keras3.build((None, None, 8))
    self.assertEqual(sorted(w.path.split("/", 1)[1] for w in keras3.weights),
                     sorted(keras2.weights_by_key()))
    for weight in keras3.weights:
      weight.assign(keras2.weights_by_key()[weight.path.split("/", 1)[1]].numpy())
    h, x = _inputs(shape=(2, 3, 8)), _inputs(seed=5, shape=(2, 3, 8))
    expected = keras2(tf.constant(h), sublayer_input=tf.constant(x),
                      layer_norm=lambda v: v)
    self.assertAllClose(keras.ops.convert_to_numpy(keras3(h)) + x, expected, atol=1e-5)

  @parameterized.named_parameters(
      ("pfeiffer", dict()),
      ("own_norms_scaled", dict(ln_before=True, ln_after=True, scaling=2.0)),
  )
  def test_in_the_layer_norm_s_place_computes_as_the_keras2_adapter(self, options):
    """With the base's add and LayerNorm before the adapter too (`original_ln_before`), the
    Keras 3 adapter in the block's LayerNorm's place, given `h + x`, computes what the Keras
    2 adapter computes from `h` and `x`."""
    options = {**{name: value for name, value in adapter_lib.ADAPTER_OPTIONS.items()
                  if name not in ("mh_adapter", "output_adapter")},
               "original_ln_before": True, **options}
    keras2 = adapter_lib.Adapter(4, activation="relu", **options)
    keras2.build((None, None, 8))
    rng = np.random.RandomState(0)
    for weight in keras2.weights:
      weight.assign(rng.normal(scale=0.5, size=weight.shape))
    keras3 = layers.BottleneckAdapter(4, "relu", 1e-2, options)
    keras3.build((None, None, 8))
    for weight in keras3.weights:
      weight.assign(keras2.weights_by_key()[weight.path.split("/", 1)[1]].numpy())
    layer_norm = keras.layers.LayerNormalization(epsilon=1e-12)
    layer_norm.build((None, None, 8))
    layer_norm.gamma.assign(rng.normal(size=8) + 1.0)
    layer_norm.beta.assign(rng.normal(size=8))
    h, x = _inputs(shape=(2, 3, 8)), _inputs(seed=5, shape=(2, 3, 8))
    norm = lambda v: tf.constant(keras.ops.convert_to_numpy(layer_norm(v)))
    expected = keras2(tf.constant(h), sublayer_input=tf.constant(x), layer_norm=norm)
    actual = layers.AdaptedLayerNorm(layer_norm, keras3)(h + x)
    self.assertAllClose(keras.ops.convert_to_numpy(actual), expected, atol=1e-5)

  def test_starts_near_the_identity_with_the_keras2_initialisers(self):
    keras3 = layers.BottleneckAdapter(4, "relu", 0.0, {})
    keras3.build((None, None, 8))
    h = _inputs(shape=(2, 3, 8))
    self.assertAllEqual(keras.ops.convert_to_numpy(keras3(h)), h)
    keras2 = adapter_lib.Adapter(4)
    keras2.build((None, None, 8))
    self.assertEqual(keras3.count_params(), keras2.count_params())

  def test_sublayer_output_is_dropout_then_adapter(self):
    adapter = layers.BottleneckAdapter(2, "relu", 0.5, {})
    adapter.build((None, None, 4))
    wrapped = layers.AdaptedSublayerOutput(keras.layers.Dropout(0.0), adapter)
    h = _inputs(shape=(2, 3, 4))
    self.assertAllClose(keras.ops.convert_to_numpy(wrapped(h)),
                        keras.ops.convert_to_numpy(adapter(h)))
    self.assertNotAllClose(keras.ops.convert_to_numpy(wrapped(h)), h)


if __name__ == "__main__":
  tf.test.main()

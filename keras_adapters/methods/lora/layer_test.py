"""Tests for the LoRA layer."""

import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods.lora import layer as lora_layer
from keras_adapters.methods import testing


_inputs = testing.random_inputs
_projection = testing.random_projection


def _randomize(layer, seed=2):
  rng = np.random.RandomState(seed)
  for weight in layer.weights:
    weight.assign(rng.normal(scale=0.5, size=weight.shape))


class LoRATest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(1234)

  @parameterized.named_parameters(
      ("alpha_over_r", False, 2, 16.0, 8.0),
      ("rslora_alpha_over_sqrt_r", True, 4, 6.0, 3.0),
      ("rank_1", False, 1, 2.0, 2.0),
  )
  def test_output_is_projection_plus_scaled_low_rank_update(self, use_rslora, rank, alpha,
                                                            scaling):
    """`project(x) + s · x · A · B`, s = alpha / r (alpha / sqrt(r) with rsLoRA), in NumPy."""
    project, kernel, bias = _projection(6, 5)
    layer = lora_layer.LoRA("query", 5, rank=rank, alpha=alpha, use_rslora=use_rslora)
    layer.build((None, 6))
    _randomize(layer)
    self.assertAllClose(layer.scaling, scaling)
    x = _inputs()
    a, b = layer.lora_a.numpy(), layer.lora_b.numpy()
    expected = x.numpy() @ kernel + bias + scaling * (x.numpy() @ a @ b)
    self.assertAllClose(layer(x, project=project), expected, atol=1e-5, rtol=1e-5)
    # The update matters: without it the output would be the projection's.
    self.assertNotAllClose(layer(x, project=project), project(x))

  def test_default_init_starts_as_the_projection(self):
    """"lora" init: B is zero, so the output is the projection's; A is uniform within
    ±1/sqrt(in), as PyTorch's `nn.Linear` (peft's Kaiming-uniform with a=sqrt(5))."""
    width_in = 64
    project, _, _ = _projection(width_in, 32)
    layer = lora_layer.LoRA("intermediate", 32, rank=16)
    x = _inputs((3, width_in))
    self.assertAllEqual(layer(x, project=project), project(x))
    self.assertAllEqual(layer.lora_b, tf.zeros([16, 32]))
    self.assertEqual(layer.weights_by_key(), {"lora_a": layer.lora_a, "lora_b": layer.lora_b})
    self.assertEqual(tuple(layer.lora_a.shape), (width_in, 16))
    a = layer.lora_a.numpy()
    bound = 1 / math.sqrt(width_in)
    self.assertLessEqual(np.abs(a).max(), bound)
    # Spread over the interval, not bunched at zero: uniform's std is bound / sqrt(3).
    self.assertGreater(np.abs(a).max(), 0.9 * bound)
    self.assertAllClose(a.std(), bound / math.sqrt(3), rtol=0.15)

  @parameterized.named_parameters(
      ("gaussian", "gaussian", 1 / 8, 0.0),
      ("bert", "bert", 0.02, 0.02),
  )
  def test_other_initialisations(self, init_weights, a_std, b_std):
    """"gaussian": A normal with std 1/r, B zero (peft); "bert": both normal with std 0.02
    (AdapterHub)."""
    layer = lora_layer.LoRA("output", 256, rank=8, init_weights=init_weights)
    layer.build((None, 256))
    a, b = layer.lora_a.numpy(), layer.lora_b.numpy()
    self.assertAllClose(a.std(), a_std, rtol=0.1)
    self.assertAllClose(a.mean(), 0.0, atol=0.1 * a_std)
    # Normal, not truncated: values beyond 2 std exist (4.6% of 2048 draws).
    self.assertGreater(np.abs(a).max(), 2.5 * a_std)
    if b_std:
      self.assertAllClose(b.std(), b_std, rtol=0.1)
    else:
      self.assertAllEqual(b, np.zeros_like(b))

  def test_dropout_only_when_training(self):
    """Dropout acts on the update's input, in a training call only; the projection gets the
    whole input. With A = B = I and s = 1 the update is the dropped input itself: each entry
    0 or x / (1 - p)."""
    project, kernel, bias = _projection(4, 4)
    seen = []
    layer = lora_layer.LoRA("key", 4, rank=4, alpha=4.0, dropout=0.5)
    layer.build((None, 4))
    layer.lora_a.assign(tf.eye(4))
    layer.lora_b.assign(tf.eye(4))
    x = _inputs((64, 4))
    base = x.numpy() @ kernel + bias

    def recording_project(inputs):
      seen.append(inputs)
      return project(inputs)

    for training in (None, False):
      self.assertAllClose(layer(x, project=project, training=training), base + x.numpy(),
                          atol=1e-5, rtol=1e-5)
    update = layer(x, project=recording_project, training=True).numpy() - base
    self.assertAllEqual(seen[-1], x)
    dropped = np.isclose(update, 0.0, atol=1e-5)
    kept = np.isclose(update, 2.0 * x.numpy(), atol=1e-5)
    self.assertTrue(np.all(dropped | kept))
    self.assertBetween(dropped.mean(), 0.3, 0.7)

  def test_merged_kernel_computes_the_call(self):
    """`merge(W, b)` gives `W + s · A · B` and `b`, whose projection equals the call."""
    project, kernel, bias = _projection(6, 5)
    layer = lora_layer.LoRA("attention_output", 5, rank=3, alpha=5.0, use_rslora=True)
    layer.build((None, 6))
    _randomize(layer)
    merged_kernel, merged_bias = layer.merge(tf.constant(kernel), tf.constant(bias))
    self.assertAllEqual(merged_bias, bias)
    x = _inputs()
    self.assertAllClose(tf.matmul(x, merged_kernel) + merged_bias, layer(x, project=project),
                        atol=1e-5, rtol=1e-5)

  def test_three_dimensional_inputs(self):
    """Inputs `[batch, seq, in]` give `[batch, seq, units]`, token by token as in 2-D."""
    project, kernel, bias = _projection(6, 5)
    layer = lora_layer.LoRA("query", 5, rank=2, alpha=4.0)
    x = _inputs((2, 3, 6))
    layer(x, project=project)
    _randomize(layer)
    output = layer(x, project=project)
    self.assertEqual(output.shape, tf.TensorShape([2, 3, 5]))
    a, b = layer.lora_a.numpy(), layer.lora_b.numpy()
    expected = x.numpy() @ kernel + bias + 2.0 * (x.numpy() @ a @ b)
    self.assertAllClose(output, expected, atol=1e-5, rtol=1e-5)
    flat = layer(tf.reshape(x, [6, 6]), project=project)
    self.assertAllClose(tf.reshape(output, [6, 5]), flat, atol=1e-6)

  def test_unknown_init_weights_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, "'kaiming'.*lora.*gaussian.*bert"):
      lora_layer.LoRA("query", 5, init_weights="kaiming")

  def test_unknown_target_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, "'dense'"):
      lora_layer.LoRA("dense", 5)


if __name__ == "__main__":
  tf.test.main()

"""Tests for DoRA, `LoRA(use_dora=True)`, in peft's and AdapterHub's variants (the encoder's
merge, artifacts and serving with DoRA: `models/merging_test.py`, `models/adapted_bert_test.py`,
`serving/multitask_export_test.py`)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.methods import projection_delta
from keras_adapters.methods import testing
from keras_adapters.methods.lora import layer as lora_layer

_RANK, _ALPHA = 2, 6.0
_SCALING = _ALPHA / _RANK


def _projection(width_in=6, width_out=5):
  """A frozen projection as the block passes it: the function with its kernel and bias."""
  project, kernel, bias = testing.random_projection(width_in, width_out)
  return projection_delta.Projection(project, tf.constant(kernel), tf.constant(bias)), kernel, bias


def _dora(variant, width_in=6, width_out=5, dropout=0.0, seed=2):
  """A DoRA layer with random A, B and magnitudes (B far from zero, m near the norms)."""
  layer = lora_layer.LoRA("value", width_out, rank=_RANK, alpha=_ALPHA, dropout=dropout,
                          use_dora=True, dora_variant=variant)
  layer.build((None, width_in))
  rng = np.random.RandomState(seed)
  layer.lora_a.assign(rng.normal(scale=0.5, size=layer.lora_a.shape))
  layer.lora_b.assign(rng.normal(scale=0.5, size=layer.lora_b.shape))
  layer.magnitude.assign(rng.uniform(1.0, 3.0, size=layer.magnitude.shape))
  return layer


def _expected(variant, layer, x, kernel, bias):
  """peft's and AdapterHub's DoRA formulas in NumPy, on our `[in, out]` layout."""
  a, b, m = layer.lora_a.numpy(), layer.lora_b.numpy(), layer.magnitude.numpy()
  update = _SCALING * x @ a @ b
  if variant == "peft":
    factor = m / np.linalg.norm(kernel + _SCALING * a @ b, axis=0)
    return factor * (x @ kernel + update) + bias
  factor = m / np.linalg.norm(kernel + a @ b, axis=0)
  return factor * (x @ kernel + bias + update)


class DoRALayerTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(1234)

  @parameterized.named_parameters(("peft", "peft"), ("adapterhub", "adapterhub"))
  def test_output_is_each_library_s_formula(self, variant):
    """peft: `c ⊙ (x·W + s·x·A·B) + b`, `c = m / ‖W + s·A·B‖`; AdapterHub:
    `c ⊙ (x·W + b + s·x·A·B)`, `c = m / ‖W + A·B‖`; norms per output feature."""
    project, kernel, bias = _projection()
    layer = _dora(variant)
    x = testing.random_inputs()
    expected = _expected(variant, layer, x.numpy(), kernel, bias)
    self.assertAllClose(layer(x, project=project), expected, atol=1e-5, rtol=1e-5)
    # Three-dimensional inputs, token by token.
    self.assertAllClose(layer(tf.reshape(x, [2, 2, 6]), project=project),
                        expected.reshape([2, 2, 5]), atol=1e-5, rtol=1e-5)
    other = "adapterhub" if variant == "peft" else "peft"
    self.assertNotAllClose(expected, _expected(other, layer, x.numpy(), kernel, bias))

  @parameterized.named_parameters(("peft", "peft"), ("adapterhub", "adapterhub"))
  def test_starts_as_lora_from_the_base_s_norms(self, variant):
    """`start_from` sets m to peft's `‖W + s·A·B‖` or AdapterHub's `‖W‖`; with B zero
    (the default start) either is `‖W‖` and the layer computes the projection."""
    project, kernel, bias = _projection()
    layer = lora_layer.LoRA("value", 5, rank=_RANK, alpha=_ALPHA, use_dora=True,
                            dora_variant=variant)
    layer.build((None, 6))
    self.assertAllEqual(layer.magnitude, np.ones(5))
    layer.start_from(tf.constant(kernel), tf.constant(bias))
    self.assertAllClose(layer.magnitude, np.linalg.norm(kernel, axis=0), rtol=1e-6)
    x = testing.random_inputs()
    self.assertAllClose(layer(x, project=project), project(x), atol=1e-5, rtol=1e-5)
    layer.lora_b.assign(np.random.RandomState(0).normal(size=layer.lora_b.shape))
    layer.start_from(tf.constant(kernel), tf.constant(bias))
    a, b = layer.lora_a.numpy(), layer.lora_b.numpy()
    start = kernel + (_SCALING * a @ b if variant == "peft" else 0)
    self.assertAllClose(layer.magnitude, np.linalg.norm(start, axis=0), rtol=1e-6)

  def test_trainable_weights_add_one_magnitude_per_output_feature(self):
    layer = _dora("peft", width_in=6, width_out=5)
    self.assertEqual(layer.weights_by_key(), {"lora_a": layer.lora_a, "lora_b": layer.lora_b,
                                              "magnitude": layer.magnitude})
    self.assertEqual(sum(int(np.prod(w.shape)) for w in layer.trainable_weights),
                     6 * _RANK + _RANK * 5 + 5)
    self.assertEqual(layer.get_config()["use_dora"], True)
    plain = lora_layer.LoRA("value", 5, rank=_RANK)
    plain.build((None, 6))
    self.assertEqual(set(plain.weights_by_key()), {"lora_a", "lora_b"})

  @parameterized.named_parameters(("peft", "peft"), ("adapterhub", "adapterhub"))
  def test_gradient_treats_the_norm_as_peft_or_adapterhub_do(self, variant):
    """peft detaches the norm (the paper's section 4.3): A's gradient is that of the output
    with the factor held constant. AdapterHub lets the gradient flow through the norm."""
    project, kernel, _ = _projection()
    layer = _dora(variant)
    x = testing.random_inputs()
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(layer(x, project=project) ** 2)
    gradient = tape.gradient(loss, layer.lora_a)
    a, b = layer.lora_a.numpy(), layer.lora_b.numpy()
    in_norm = _SCALING * a @ b if variant == "peft" else a @ b
    constant = tf.constant(layer.magnitude.numpy() / np.linalg.norm(kernel + in_norm, axis=0))
    with tf.GradientTape() as tape:
      output = project(x)
      update = _SCALING * tf.matmul(tf.matmul(x, layer.lora_a), layer.lora_b)
      if variant == "peft":
        held = constant * (output - project.bias + update) + project.bias
      else:
        held = constant * (output + update)
      held_loss = tf.reduce_sum(held ** 2)
    held_gradient = tape.gradient(held_loss, layer.lora_a)
    if variant == "peft":
      self.assertAllClose(gradient, held_gradient, atol=1e-4, rtol=1e-5)
    else:
      self.assertNotAllClose(gradient, held_gradient, atol=1e-3)

  def test_peft_dropout_drops_the_base_share_too(self):
    """With dropout on while training, peft computes `x·W + b + (c - 1)·drop(x)·W +
    c·s·drop(x)·A·B`. With B zero, W the identity and c = 2 that is `x + b` plus, per
    entry, 0 or `2x` (x / (1 - p) with p = 0.5); without training, `2x + b`."""
    kernel, bias = np.eye(4, dtype=np.float32), np.arange(4, dtype=np.float32)
    project = projection_delta.Projection(lambda x: x @ kernel + bias, tf.constant(kernel),
                                          tf.constant(bias))
    layer = lora_layer.LoRA("key", 4, rank=2, dropout=0.5, use_dora=True)
    layer.build((None, 4))
    layer.magnitude.assign(2 * np.ones(4))
    x = testing.random_inputs((64, 4))
    self.assertAllClose(layer(x, project=project, training=False), 2 * x.numpy() + bias,
                        atol=1e-5)
    change = layer(x, project=project, training=True).numpy() - (x.numpy() + bias)
    dropped = np.isclose(change, 0.0, atol=1e-5)
    kept = np.isclose(change, 2.0 * x.numpy(), atol=1e-5)
    self.assertTrue(np.all(dropped | kept))
    self.assertBetween(dropped.mean(), 0.3, 0.7)

  @parameterized.named_parameters(("peft", "peft"), ("adapterhub", "adapterhub"))
  def test_merged_kernel_computes_the_call(self, variant):
    """`merge` gives `c ⊙ (W + s·A·B)` and the bias (rescaled by c for AdapterHub)."""
    project, kernel, bias = _projection()
    layer = _dora(variant)
    merged_kernel, merged_bias = layer.merge(tf.constant(kernel), tf.constant(bias))
    x = testing.random_inputs()
    self.assertAllClose(tf.matmul(x, merged_kernel) + merged_bias, layer(x, project=project),
                        atol=1e-5, rtol=1e-5)
    if variant == "peft":
      self.assertAllEqual(merged_bias, bias)
    else:
      self.assertNotAllClose(merged_bias, bias)

  def test_stacked_tasks_compute_their_own_layers(self):
    """Stacked with plain LoRA and a task without LoRA, each task's rows (one task, or each
    example its own) get what its own layer computes."""
    project, _, _ = _projection()
    layers = [_dora("peft", seed=3), _dora("adapterhub", seed=4),
              lora_layer.LoRA("value", 5, rank=3, alpha=2.0, init_weights="bert")]
    layers[2].build((None, 6))
    entries = [({k: v.numpy() for k, v in layer.weights_by_key().items()},
                {k: layer.get_config()[k] for k in ("rank", "alpha", "use_rslora", "use_dora",
                                                     "dora_variant")})
               for layer in layers] + [None]
    stacked, = lora_layer.LoRA.stacked(entries, name="stacked")
    x = testing.random_inputs((4, 3, 6))
    expected = [layer(x, project=project) for layer in layers] + [project(x)]
    for task in range(4):
      self.assertAllClose(stacked.for_tasks(task)(tf.reshape(x, [12, 6]), project),
                          tf.reshape(expected[task], [12, 5]), atol=1e-5, rtol=1e-5)
    task_ids = tf.constant([2, 0, 3, 1])
    mixed = stacked.for_tasks(task_ids)(x, project)
    for row, task in enumerate(task_ids.numpy()):
      self.assertAllClose(mixed[row], expected[task][row], atol=1e-5, rtol=1e-5)

  def test_unknown_variant_raises_naming_them(self):
    with self.assertRaisesRegex(ValueError, "'torch'.*peft.*adapterhub"):
      lora_layer.LoRA("query", 5, use_dora=True, dora_variant="torch")


if __name__ == "__main__":
  tf.test.main()

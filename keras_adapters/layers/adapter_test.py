"""Tests for the Houlsby bottleneck adapter."""

import inspect

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import testing
from keras_adapters.utils import precision


def _inputs(shape=(2, 5, 16), seed=0):
  return tf.constant(np.random.RandomState(seed).normal(size=shape), tf.float32)


class AdapterTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(1234)

  @parameterized.named_parameters(
      ("rank3", (2, 5, 16)),
      ("rank2", (3, 8)),
  )
  def test_output_shape_equals_input_shape(self, shape):
    """The adapter maps [..., d] to [..., d] whatever the leading dimensions."""
    adapter = adapter_lib.Adapter(adapter_size=4)
    outputs = adapter(_inputs(shape))
    self.assertEqual(outputs.shape, tf.TensorShape(shape))

  @parameterized.named_parameters(
      ("d16_m4", 16, 4, 148),
      ("d768_m64", 768, 64, 99_136),
      ("d8_m1", 8, 1, 25),
  )
  def test_build_creates_2md_plus_d_plus_m_parameters(self, d, m, expected):
    """After build((None, None, d)), before any call, the adapter holds 2md + d + m
    parameters in four variables named like a Hub export's."""
    adapter = adapter_lib.Adapter(adapter_size=m, name="attention_adapter")
    adapter.build((None, None, d))
    self.assertEqual(2 * m * d + d + m, expected)
    self.assertEqual(adapter.count_params(), expected)
    self.assertLen(adapter.weights, 4)
    self.assertLen(adapter.trainable_weights, 4)
    self.assertEqual(sorted(adapter.weights_by_key()),
                     ["down_project/bias", "down_project/kernel", "up_project/bias",
                      "up_project/kernel"])
    self.assertEqual(adapter.down_project.kernel.name, "down_project/kernel:0")

  def test_zero_init_stddev_is_exact_identity(self):
    """With init_stddev=0 every weight is zero and the output is exactly the input."""
    adapter = adapter_lib.Adapter(adapter_size=4, init_stddev=0.0)
    x = _inputs()
    outputs = adapter(x)
    for weight in adapter.weights:
      self.assertAllEqual(weight, tf.zeros_like(weight))
    self.assertAllEqual(outputs, x)

  def test_default_init_is_truncated_normal_with_zero_biases(self):
    """Kernels are N(0, 1e-2) truncated at 2 sigma; both biases start at zero."""
    adapter = adapter_lib.Adapter(adapter_size=64)
    adapter(tf.zeros([1, 1, 256]))
    for dense in (adapter.down_project, adapter.up_project):
      kernel = dense.kernel.numpy()
      self.assertLessEqual(np.abs(kernel).max(), 0.02 + 1e-7)
      self.assertGreater(np.abs(kernel).max(), 0.0)
      # A normal truncated at +-2 sigma has std ~0.88 sigma.
      self.assertAllClose(kernel.std(), 0.0088, atol=0.0015)
      self.assertAllClose(kernel.mean(), 0.0, atol=1e-3)
      self.assertAllEqual(dense.bias, tf.zeros_like(dense.bias))

  def test_projections_get_different_draws(self):
    """Down and up projections are initialised independently, not with one shared draw."""
    adapter = adapter_lib.Adapter(adapter_size=16)
    adapter(tf.zeros([1, 1, 16]))
    down = adapter.down_project.kernel.numpy()
    up = adapter.up_project.kernel.numpy()
    self.assertFalse(np.allclose(down, up.T))
    self.assertFalse(np.allclose(down, up))

  def test_default_init_is_near_identity(self):
    """A freshly initialised adapter changes unit-scale inputs only by a tiny amount."""
    adapter = adapter_lib.Adapter(adapter_size=8)
    x = _inputs((4, 6, 32))
    delta = np.abs(adapter(x).numpy() - x.numpy())
    self.assertLess(delta.max(), 0.05)
    self.assertGreater(delta.max(), 0.0)

  def test_computes_skip_plus_bottleneck(self):
    """The output is h + W_up f(W_down h + b_down) + b_up, computed here by hand."""
    adapter = adapter_lib.Adapter(adapter_size=3, activation="relu", init_stddev=0.5)
    x = _inputs((2, 4, 6))
    adapter(x)
    rng = np.random.RandomState(3)
    adapter.down_project.bias.assign(rng.normal(size=[3]))
    adapter.up_project.bias.assign(rng.normal(size=[6]))
    w_down, b_down, w_up, b_up = (v.numpy() for v in (
        adapter.down_project.kernel, adapter.down_project.bias,
        adapter.up_project.kernel, adapter.up_project.bias))
    expected = x.numpy() + np.maximum(x.numpy() @ w_down + b_down, 0.0) @ w_up + b_up
    self.assertAllClose(adapter(x), expected, atol=1e-5)

  @parameterized.named_parameters(
      ("alone", {}, False, 4),
      # Its own LayerNorms act where it joins a sub-layer, not when it is called alone.
      ("placed_with_own_layer_norms", testing.PLACEMENT_VARIANTS["own_layer_norms_post_add"],
       True, 8),
  )
  def test_layer_contract(self, options, placed, num_weights):
    """Weights made by build, config round trip, registered serialization, output shape and
    gradients for every weight."""
    base_layer_norm = keras.layers.LayerNormalization()

    def place(adapter, h, training):
      del training  # An adapter has no dropout.
      return adapter(h, sublayer_input=2.0 * h, layer_norm=base_layer_norm)

    adapter = testing.run_layer_test(
        self, adapter_lib.Adapter,
        dict(adapter_size=7, activation="tanh", init_stddev=0.03, name="my_adapter", **options),
        _inputs(), call=place if placed else None, expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=num_weights, expected_num_non_trainable_weights=0)
    self.assertEqual(keras.layers.serialize(adapter)["registered_name"],
                     "keras_adapters>Adapter")

  def test_arguments_are_size_activation_init_and_adapterhubs_options(self):
    """The bottleneck's settings, then AdapterHub's options in `ADAPTER_OPTIONS`' order."""
    arguments = [name for name, p in inspect.signature(
        adapter_lib.Adapter.__init__).parameters.items()
                 if name != "self" and p.kind is not p.VAR_KEYWORD]
    self.assertEqual(arguments, ["adapter_size", "activation", "init_stddev"]
                     + [k for k in adapter_lib.ADAPTER_OPTIONS
                        if k not in ("mh_adapter", "output_adapter")])

  @parameterized.named_parameters(
      ("gelu", "gelu"),
      ("tanh", "tanh"),
  )
  def test_activation_is_configurable_and_changes_output(self, activation):
    """The bottleneck nonlinearity is the one asked for and changes what the adapter computes."""
    x = _inputs((2, 3, 8))
    relu_adapter = adapter_lib.Adapter(adapter_size=4, init_stddev=0.5)
    other_adapter = adapter_lib.Adapter(
        adapter_size=4, activation=activation, init_stddev=0.5)
    relu_adapter(x)
    other_adapter(x)
    other_adapter.set_weights(relu_adapter.get_weights())
    w_down, b_down, w_up, b_up = relu_adapter.get_weights()
    hidden = keras.activations.get(activation)(x.numpy() @ w_down + b_down).numpy()
    self.assertAllClose(other_adapter(x), x.numpy() + hidden @ w_up + b_up, atol=1e-5)
    self.assertNotAllClose(other_adapter(x), relu_adapter(x))

  @parameterized.named_parameters(
      ("zero", 0),
      ("negative", -1),
      ("float", 2.5),
      ("none", None),
      ("string", "64"),
  )
  def test_invalid_adapter_size_raises(self, adapter_size):
    """A non-positive or non-integer adapter_size is a ValueError naming the argument."""
    with self.assertRaisesRegex(ValueError, "adapter_size"):
      adapter_lib.Adapter(adapter_size=adapter_size)

  @parameterized.named_parameters(*testing.PLACEMENT_VARIANTS.items())
  def test_placement_is_adapterhubs(self, options):
    """Called on a sub-layer's output h, its input x and the base LayerNorm, the adapter
    computes AdapterHub's bottleneck_layer_forward for its options (written out here)."""
    options = {k: v for k, v in options.items() if k not in ("mh_adapter", "output_adapter")}
    adapter = adapter_lib.Adapter(adapter_size=4, activation="swish", init_stddev=0.5,
                                  **options)
    h, x = _inputs((2, 3, 8), seed=1), _inputs((2, 3, 8), seed=2)
    adapter(h)
    rng = np.random.RandomState(0)
    for weight in adapter.weights:
      weight.assign(rng.normal(scale=0.5, size=weight.shape))
    parts = {w.name.split("/", 1)[1].split(":")[0]: w.numpy() for w in adapter.weights}
    base_gamma, base_beta = rng.normal(size=8), rng.normal(size=8)

    def norm(v, gamma, beta, epsilon):
      return (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + epsilon) * (
          gamma) + beta

    def base_norm(v):
      return norm(np.asarray(v), base_gamma, base_beta, 1e-12)

    def own_norm(v, which):
      if not options.get(which):
        return v
      return norm(v, parts[f"{which}/gamma"], parts[f"{which}/beta"], 1e-5)

    def bottleneck(v):
      down = own_norm(v, "ln_before") @ parts["down_project/kernel"] + parts[
          "down_project/bias"]
      down = down / (1 + np.exp(-down))
      return options.get("scaling", 1.0) * (down @ parts["up_project/kernel"]
                                            + parts["up_project/bias"])

    h_np, x_np = h.numpy(), x.numpy()
    if options.get("is_parallel"):
      out = own_norm(bottleneck(x_np), "ln_after") + h_np
    else:
      rbl = options.get("residual_before_ln", True)
      residual, hidden = h_np, h_np
      if options.get("original_ln_before"):
        residual = h_np + x_np if rbl == "post_add" else h_np
        hidden = base_norm(h_np + x_np)
        residual = hidden if rbl is False else residual
      up = bottleneck(hidden)
      if options.get("adapter_residual_before_ln"):
        out = own_norm(up + residual, "ln_after")
      else:
        out = own_norm(up, "ln_after") + residual
    if options.get("original_ln_after", True):
      out = base_norm(out + x_np)
    layer_norm = lambda v: base_norm(v).astype(np.float32)
    self.assertAllClose(adapter(h, sublayer_input=x, layer_norm=layer_norm), out, atol=1e-5)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_projects_in_the_policy_and_places_in_float32(self, name, epsilon):
    """Made under a mixed policy (built and called outside it), an adapter keeps float32
    variables and projects in the policy's dtype; every placement returns float32, near what
    the float32 adapter with the same weights returns."""
    h, x = _inputs((2, 3, 8), seed=1), _inputs((2, 3, 8), seed=2)
    layer_norm = keras.layers.LayerNormalization(dtype="float32")
    for placement, options in testing.PLACEMENT_VARIANTS.items():
      options = {k: v for k, v in options.items() if k not in ("mh_adapter", "output_adapter")}
      with self.subTest(placement=placement):
        reference = adapter_lib.Adapter(adapter_size=4, init_stddev=0.5, **options)
        with precision.policy_scope(name):
          mixed = adapter_lib.Adapter(adapter_size=4, init_stddev=0.5, **options)
        reference(h)
        self.assertEqual(mixed(h).dtype, name)
        mixed.set_weights(reference.get_weights())
        self.assertEqual({w.dtype for w in mixed.weights}, {tf.float32})
        self.assertEqual(mixed.down_project.compute_dtype, name)
        placed = mixed(tf.cast(h, name), sublayer_input=x, layer_norm=layer_norm)
        self.assertEqual(placed.dtype, tf.float32)
        # The sub-layer output and the bottleneck's products are rounded to the compute
        # dtype: measured up to 2.0 epsilons (of the outputs' scale) over three seeds.
        self.assertLess(testing.mixed_precision_gap(
            placed, reference(h, sublayer_input=x, layer_norm=layer_norm), epsilon), 4)

  def test_unsupported_option_combinations_are_named(self):
    for options, message in (
        (dict(residual_before_ln="post_add"), "post_add.*original_ln_before"),
        (dict(is_parallel=True, original_ln_before=True), "parallel"),
        (dict(scaling="learned"), "scaling"),
        (dict(ln_after=1), "ln_after")):
      with self.assertRaisesRegex(ValueError, message):
        adapter_lib.Adapter(adapter_size=4, **options)
    with self.assertRaisesRegex(ValueError, r"Unknown adapter options \['phm_layer'\]"):
      adapter_lib.validate_options(dict(phm_layer=True))

  def test_negative_init_stddev_raises(self):
    """A negative init_stddev is a ValueError naming the argument."""
    with self.assertRaisesRegex(ValueError, "init_stddev"):
      adapter_lib.Adapter(adapter_size=4, init_stddev=-0.1)


if __name__ == "__main__":
  tf.test.main()

"""Tests of the mixed-precision policy scope."""

from absl.testing import parameterized
import tensorflow as tf
import tf_keras as keras

from keras_adapters.utils import precision


class PolicyScopeTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.addCleanup(keras.mixed_precision.set_global_policy,
                    keras.mixed_precision.global_policy())
    keras.mixed_precision.set_global_policy("float32")

  @parameterized.named_parameters(("float32", "float32", "float32"),
                                  ("bfloat16", "bfloat16", "mixed_bfloat16"),
                                  ("float16", "float16", "mixed_float16"))
  def test_sets_the_policy_and_restores_the_previous_one(self, name, policy):
    keras.mixed_precision.set_global_policy("mixed_float16")
    with precision.policy_scope(name):
      self.assertEqual(keras.mixed_precision.global_policy().name, policy)
      layer = keras.layers.Dense(2)
      layer.build((None, 3))
      self.assertEqual(layer.kernel.dtype, tf.float32)
      self.assertEqual(layer.compute_dtype, name)
    self.assertEqual(keras.mixed_precision.global_policy().name, "mixed_float16")

  def test_scopes_nest(self):
    with precision.policy_scope("bfloat16"):
      with precision.policy_scope("float16"):
        self.assertEqual(keras.mixed_precision.global_policy().name, "mixed_float16")
      self.assertEqual(keras.mixed_precision.global_policy().name, "mixed_bfloat16")
    self.assertEqual(keras.mixed_precision.global_policy().name, "float32")

  def test_restores_the_policy_on_error(self):
    with self.assertRaisesRegex(RuntimeError, "inside"):
      with precision.policy_scope("bfloat16"):
        raise RuntimeError("inside")
    self.assertEqual(keras.mixed_precision.global_policy().name, "float32")

  @parameterized.named_parameters(("keras_name", "mixed_bfloat16"), ("other", "float64"))
  def test_refuses_an_unknown_name_and_keeps_the_policy(self, name):
    with self.assertRaisesRegex(ValueError,
                                f"Unknown precision '{name}': use one of float32, bfloat16, "
                                "float16"):
      with precision.policy_scope(name):
        self.fail("The block must not run.")
    self.assertEqual(keras.mixed_precision.global_policy().name, "float32")


if __name__ == "__main__":
  tf.test.main()

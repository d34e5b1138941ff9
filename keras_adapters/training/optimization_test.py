"""Tests for optimization: the warmup/decay schedule and Adam(W) with excluded variables."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.training import optimization


class LinearWarmupLinearDecayTest(tf.test.TestCase):

  def test_values(self):
    # Peak 1e-3, 100 steps, 10 of warmup: rises by 1e-4 a step to step 10, then falls by
    # 1e-3 / 90 a step to 0 at step 100.
    schedule = optimization.LinearWarmupLinearDecay(1e-3, num_train_steps=100, warmup_steps=10)
    expected = {0: 0.0, 1: 1e-4, 5: 5e-4, 10: 1e-3, 55: 5e-4, 99: 1e-3 / 90, 100: 0.0,
                150: 0.0}
    for step, rate in expected.items():
      self.assertAllClose(schedule(step), rate, rtol=1e-6, atol=1e-10, msg=f"step {step}")

  def test_no_warmup_starts_at_the_peak(self):
    schedule = optimization.LinearWarmupLinearDecay(2e-3, num_train_steps=4, warmup_steps=0)
    self.assertAllClose([schedule(s) for s in range(5)], [2e-3, 1.5e-3, 1e-3, 5e-4, 0.0])

  def test_serialises(self):
    schedule = optimization.LinearWarmupLinearDecay(1e-3, num_train_steps=100, warmup_steps=10)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule))
    self.assertIsInstance(restored, optimization.LinearWarmupLinearDecay)
    self.assertEqual(restored.get_config(), schedule.get_config())

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "learning rate must be > 0"):
      optimization.LinearWarmupLinearDecay(0.0, num_train_steps=10, warmup_steps=1)
    with self.assertRaisesRegex(ValueError, "num_train_steps must be >= 1"):
      optimization.LinearWarmupLinearDecay(1e-3, num_train_steps=0, warmup_steps=0)
    with self.assertRaisesRegex(ValueError, "warmup_steps must be in"):
      optimization.LinearWarmupLinearDecay(1e-3, num_train_steps=10, warmup_steps=10)


class CreateOptimizerTest(tf.test.TestCase):

  def test_adam_on_the_schedule(self):
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=100)
    self.assertIsInstance(optimizer, keras.optimizers.Adam)
    self.assertNotIsInstance(optimizer, keras.optimizers.AdamW)
    self.assertEqual(optimizer.epsilon, optimization.ADAM_EPSILON)
    schedule = optimizer.get_config()["learning_rate"]
    self.assertEqual(schedule["class_name"], "LinearWarmupLinearDecay")
    self.assertEqual(schedule["config"]["warmup_steps"], 10)

  def test_weight_decay_skips_layer_norm_and_bias(self):
    inputs = keras.Input((4,))
    outputs = keras.layers.LayerNormalization()(keras.layers.Dense(3)(inputs))
    model = keras.Model(inputs, outputs)
    hub_style = [tf.Variable(np.ones(3, np.float32), name=name) for name in (
        "transformer/layer_0/self_attention_layer_norm/gamma", "bert/LayerNorm/beta",
        "adapter/down/kernel")]
    variables = model.trainable_variables + hub_style
    before = [v.numpy() for v in variables]
    optimizer = optimization.create_optimizer(
        0.5, num_train_steps=10, warmup_fraction=0.0, weight_decay=0.1)
    # Zero gradients leave Adam's own update at 0: whatever moves is the weight decay.
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in variables])
    decayed = {v.name for v, b in zip(variables, before) if not np.array_equal(v.numpy(), b)}
    self.assertEqual(decayed, {"dense/kernel:0", "adapter/down/kernel:0"})
    # Decoupled decay: w <- w - learning_rate * weight_decay * w.
    self.assertAllClose(variables[-1], before[-1] * (1 - 0.5 * 0.1))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "warmup_fraction must be in"):
      optimization.create_optimizer(1e-3, num_train_steps=10, warmup_fraction=1.0)
    with self.assertRaisesRegex(ValueError, "weight_decay must be >= 0"):
      optimization.create_optimizer(1e-3, num_train_steps=10, weight_decay=-0.01)


if __name__ == "__main__":
  tf.test.main()

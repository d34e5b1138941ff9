"""Tests for optimization: the Model Garden's BERT optimiser with adapter-bert's defaults."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from official.nlp import optimization as model_garden_optimization

from keras_adapters.training import optimization


def _rates(optimizer, steps):
  rates = []
  for step in steps:
    optimizer.iterations.assign(step)
    rates.append(optimization.current_learning_rate(optimizer))
  return rates


class CreateOptimizerTest(tf.test.TestCase):

  def test_defaults_are_adapter_berts(self):
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=100)
    self.assertIsInstance(optimizer, model_garden_optimization.AdamWeightDecay)
    self.assertEqual(optimizer.weight_decay_rate, 0.01)
    self.assertEqual(optimizer.gradient_clip_norm, 1.0)
    self.assertEqual(optimizer.epsilon, 1e-6)
    config = optimizer.get_config()
    self.assertEqual(config["learning_rate"]["config"]["warmup_steps"], 10)

  def test_learning_rate_by_hand(self):
    # Peak 1e-3, 100 steps, 10 of warmup. Warmup: 1e-3 * step / 10. After it, BERT's linear
    # decay counted from step 0: 1e-3 * (1 - step / 100), 0 from step 100 on.
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=100)
    steps = [0, 1, 5, 9, 10, 55, 99, 100, 150]
    expected = [0.0, 1e-4, 5e-4, 9e-4, 9e-4, 4.5e-4, 1e-5, 0.0, 0.0]
    self.assertAllClose(_rates(optimizer, steps), expected, rtol=1e-5, atol=1e-10)

  def test_no_warmup_starts_at_the_peak(self):
    optimizer = optimization.create_optimizer(2e-3, num_train_steps=4, warmup_fraction=0.0)
    self.assertAllClose(_rates(optimizer, range(5)), [2e-3, 1.5e-3, 1e-3, 5e-4, 0.0])

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

  def test_updates_are_the_model_gardens(self):
    rng = np.random.RandomState(0)
    start = rng.randn(4, 3).astype(np.float32)
    gradients = [rng.randn(4, 3).astype(np.float32) for _ in range(3)]
    finals = []
    for optimizer in (optimization.create_optimizer(1e-2, 10, weight_decay=0.1),
                      model_garden_optimization.create_optimizer(1e-2, 10, 1)):
      optimizer.weight_decay_rate = 0.1
      variable = tf.Variable(start, name="dense/kernel")
      for gradient in gradients:
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
      finals.append(variable.numpy())
    self.assertAllEqual(finals[0], finals[1])

  def test_the_decay_reads_a_variable_once_its_gradient_is_computed(self):
    """In a step's graph, the Model Garden's decay reads every variable at once, holding a
    copy of each until its update; here each read waits for that variable's gradient."""

    def decay_waits_for_gradient(optimizer):
      variable = tf.Variable(np.ones((4, 3), np.float32), name="dense/kernel")
      @tf.function
      def step(gradient):
        optimizer.apply_gradients([(gradient, variable)])
      graph = step.get_concrete_function(tf.TensorSpec((4, 3), tf.float32)).graph
      gradient = graph.inputs[0].op
      decay = [op for op in graph.get_operations() if op.type == "AssignSubVariableOp"]
      self.assertLen(decay, 1)  # w <- w - learning_rate * weight_decay * w
      # Everything the decayed value is computed from, following data and control inputs;
      # not through the clipping, which feeds Adam's update, not the decay.
      seen, stack = set(), [decay[0].inputs[1].op]
      while stack:
        op = stack.pop()
        if op.name not in seen:
          seen.add(op.name)
          stack.extend([tensor.op for tensor in op.inputs] + list(op.control_inputs))
      return gradient.name in seen

    self.assertTrue(decay_waits_for_gradient(optimization.create_optimizer(1e-2, 10)))
    self.assertFalse(decay_waits_for_gradient(
        model_garden_optimization.create_optimizer(1e-2, 10, 1)))

  def test_gradients_are_clipped_to_global_norm_one(self):
    variable = tf.Variable([0.0, 0.0])
    optimizer = optimization.create_optimizer(
        1.0, num_train_steps=10, warmup_fraction=0.0, weight_decay=0.0)
    # A gradient of norm 5 is scaled to norm 1; Adam's first step is then lr * sign-like
    # m_hat / sqrt(v_hat) = lr * g / |g| per coordinate, whatever the scale, so look at the
    # first moment, which keeps the clipped gradient: (1 - beta_1) * g_clipped.
    optimizer.apply_gradients([(tf.constant([3.0, 4.0]), variable)])
    self.assertAllClose(optimizer.get_slot(variable, "m"), [0.1 * 0.6, 0.1 * 0.8])

  def test_bad_arguments(self):
    cases = [(dict(learning_rate=0.0), "learning_rate must be a finite number > 0"),
             (dict(learning_rate=float("nan")), "learning_rate must be a finite number > 0"),
             (dict(num_train_steps=0), "num_train_steps must be an integer >= 1"),
             (dict(warmup_fraction=1.0), r"warmup_fraction must be in \[0, 1\)"),
             (dict(weight_decay=-0.01), "weight_decay must be a finite number >= 0")]
    for overrides, message in cases:
      with self.subTest(**overrides):
        kwargs = dict(learning_rate=1e-3, num_train_steps=10)
        kwargs.update(overrides)
        with self.assertRaisesRegex(ValueError, message):
          optimization.create_optimizer(**kwargs)


if __name__ == "__main__":
  tf.test.main()

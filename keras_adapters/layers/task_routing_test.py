"""Tests for stacked per-task adapters applied per example."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter_set
from keras_adapters.layers import task_routing
from keras_adapters.layers import testing
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision

_TINY = dict(vocab_size=64, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_sequence_length=32, type_vocab_size=2)


def _inputs(batch_size=5):
  rng = np.random.RandomState(1)
  lengths = rng.randint(2, 7, size=batch_size)
  mask = (np.arange(7)[np.newaxis] < lengths[:, np.newaxis]).astype(np.int32)
  ids = rng.randint(1, _TINY["vocab_size"], size=mask.shape) * mask
  return dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
              input_type_ids=tf.zeros_like(tf.constant(ids)))


def _random_set(seed, **kwargs):
  """An AdapterSet of the tiny encoder with random weights."""
  layer = adapter_set.AdapterSet(num_layers=2, activation="gelu", **kwargs)
  layer.build((None, None, _TINY["hidden_size"]))
  rng = np.random.RandomState(seed)
  for weight in layer.weights:
    weight.assign(rng.normal(scale=0.3, size=weight.shape))
  return layer


class TaskRoutingTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    keras.utils.set_random_seed(3)
    cls.encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, dropout_rate=0.0)
    cls.encoder(_inputs())
    # Different bottlenecks, a block left out, and a task without adapters.
    cls.sets = [_random_set(0, adapter_size=4), _random_set(1, adapter_size=2, leave_out=(0,)),
                _random_set(2)]
    cls.stacked = task_routing.StackedAdapters(
        [{k: w.numpy() for k, w in adapter_set.adapter_weights_by_key(
            s.encoder_adapters()).items()} for s in cls.sets],
        num_layers=2, activation="gelu", layer_norm_epsilon=1e-12)

  def test_layer_norm_equals_keras(self):
    layer = keras.layers.LayerNormalization(epsilon=1e-12)
    x = tf.random.normal([2, 3, 16])
    layer(x)
    layer.gamma.assign(tf.random.normal([16]))
    layer.beta.assign(tf.random.normal([16]))
    self.assertAllClose(task_routing.layer_norm(x, layer.gamma, layer.beta, 1e-12), layer(x),
                        atol=1e-6)

  def test_stacks_are_padded_to_the_largest_bottleneck(self):
    down_kernel, down_bias, up_kernel, up_bias = self.stacked.adapters[
        "transformer/layer_0/attention_adapter"]
    self.assertEqual(down_kernel.shape, (3, 16, 4))
    self.assertEqual(up_kernel.shape, (3, 4, 16))
    self.assertAllEqual(down_kernel[1], tf.zeros([16, 4]))  # left out in block 0
    self.assertAllEqual(up_kernel[0, :, :], self.sets[0].slots[
        "transformer/layer_0/attention_adapter"].up_project.kernel)
    self.assertEqual(self.stacked.adapters["transformer/layer_1/attention_adapter"][0].shape,
                     (3, 16, 4))
    self.assertEqual(self.stacked.layer_norms["embeddings/layer_norm"][0].shape, (3, 16))

  def test_mixed_batch_equals_each_task_on_its_own(self):
    """Per-example routing gives every row what its own task's set gives it, to 1e-5."""
    inputs = _inputs()
    task_ids = tf.constant([2, 0, 1, 0, 2])
    routed = self.encoder(inputs, adapters=self.stacked.encoder_adapters(task_ids))
    for task, layer in enumerate(self.sets):
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      one_task = self.encoder(inputs, adapters=self.stacked.encoder_adapters(task))
      rows = np.flatnonzero(task_ids.numpy() == task)
      for key in ("sequence_output", "pooled_output"):
        self.assertAllClose(tf.gather(routed[key], rows), tf.gather(alone[key], rows),
                            atol=1e-5, rtol=0, msg=f"{key} of task {task}")
        self.assertAllClose(one_task[key], alone[key], atol=1e-5, rtol=0)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_encoder_routes_in_float32(self, name, epsilon):
    """A mixed-precision encoder routed through the stacked (float32) tasks returns float32,
    every row near what the float32 encoder gives it with its own task's set."""
    with precision.policy_scope(name):
      mixed_encoder = adapted_bert_encoder.AdaptedBertEncoder(**_TINY, dropout_rate=0.0)
    mixed_encoder(_inputs())
    mixed_encoder.set_weights(self.encoder.get_weights())
    inputs = _inputs()
    task_ids = tf.constant([2, 0, 1, 0, 2])
    routed = mixed_encoder(inputs, adapters=self.stacked.encoder_adapters(task_ids))
    for task, layer in enumerate(self.sets):
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      rows = np.flatnonzero(task_ids.numpy() == task)
      for key in ("sequence_output", "pooled_output"):
        self.assertEqual(routed[key].dtype, tf.float32)
        # Measured up to 0.74 epsilons.
        self.assertLess(testing.mixed_precision_gap(
            tf.gather(routed[key], rows), tf.gather(alone[key], rows), epsilon), 3)

  def test_tasks_of_every_placement_route_exactly_in_one_batch(self):
    """A task per AdapterHub placement (some with a block left out), and tasks with the same
    placement but no attention adapters or none at all: a batch mixing them answers every
    row as its task's own set does."""
    options = list(testing.PLACEMENT_VARIANTS.values())
    options += [dict(options[3], mh_adapter=False), options[3]]
    sets = [_random_set(4 + i, adapter_size=2 + i % 3, leave_out=(i % 2,),
                        adapter_options=task_options) for i, task_options in enumerate(options)]
    sets.append(_random_set(20))  # No adapters.
    options.append(None)
    stacked = task_routing.StackedAdapters(
        [{k: w.numpy() for k, w in adapter_set.adapter_weights_by_key(
            s.encoder_adapters()).items()} for s in sets],
        num_layers=2, activation="gelu", layer_norm_epsilon=1e-12, adapter_options=options)
    task_ids = np.arange(len(sets))[::-1] % len(sets)
    inputs = _inputs(batch_size=len(sets))
    routed = self.encoder(inputs, adapters=stacked.encoder_adapters(tf.constant(task_ids)))
    for task, layer in enumerate(sets):
      row = int(np.flatnonzero(task_ids == task)[0])
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      self.assertAllClose(routed["sequence_output"][row], alone["sequence_output"][row],
                          atol=1e-5, rtol=0, msg=f"task {task}: {options[task]}")
      one_task = self.encoder(inputs, adapters=stacked.encoder_adapters(task))
      self.assertAllClose(one_task["sequence_output"], alone["sequence_output"], atol=1e-5,
                          rtol=0, msg=f"task {task} alone")

  def test_no_tasks_is_refused(self):
    with self.assertRaisesRegex(ValueError, "at least one task"):
      task_routing.StackedAdapters([], num_layers=2, activation="relu", layer_norm_epsilon=1e-12)


if __name__ == "__main__":
  tf.test.main()

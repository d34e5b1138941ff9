"""The layer contract (`testing.run_layer_test`) of the method layers the blocks take: LoRA
and (IA)³. Their own behaviour is tested beside them, in `keras_adapters/methods`, which sits
below `layers` and so does not import this package's test helpers."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import testing
from keras_adapters.methods.ia3 import layer as ia3_layer
from keras_adapters.methods.lora import layer as lora_layer


def _inputs(shape=(4, 6)):
  return tf.constant(np.random.RandomState(0).normal(size=shape), tf.float32)


def _projection(width_in, width_out):
  """A frozen projection `x · W + b` of inputs `[..., in]`, with random `W` and `b`."""
  rng = np.random.RandomState(1)
  kernel = tf.constant(rng.normal(size=(width_in, width_out)), tf.float32)
  bias = tf.constant(rng.normal(size=(width_out,)), tf.float32)
  return lambda x: tf.einsum("...i,io->...o", x, kernel) + bias


def _call_with(project):
  """How a block calls a method layer: with the projection's input and the projection."""
  return lambda layer, inputs, training: layer(inputs, project=project, training=training)


class MethodLayersContractTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(1234)

  @parameterized.named_parameters(
      ("rank2", (4, 6), (4, 5)),
      ("rank3", (2, 3, 6), (2, 3, 5)),
  )
  def test_lora(self, input_shape, output_shape):
    """Every argument away from its default; "bert" init, so that B is not zero and A gets a
    gradient too. Two trainable factors, `A` `[in, r]` and `B` `[r, units]`."""
    layer = testing.run_layer_test(
        self, lora_layer.LoRA,
        dict(target="value", units=5, rank=3, alpha=6.0, use_rslora=True, dropout=0.2,
             init_weights="bert", name="value_lora"),
        _inputs(input_shape), call=_call_with(_projection(6, 5)),
        expected_output_shape=output_shape, expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=0)
    self.assertEqual([tuple(w.shape) for w in layer.weights], [(6, 3), (3, 5)])

  @parameterized.named_parameters(
      ("output_scaling", False, 5),
      ("input_scaling", True, 6),
  )
  def test_ia3(self, scales_input, width):
    """One trainable scale, of the projection's output width (or input width)."""
    layer = testing.run_layer_test(
        self, ia3_layer.IA3,
        dict(target="output", units=5, scales_input=scales_input, name="output_ia3"),
        _inputs(), call=_call_with(_projection(6, 5)),
        expected_output_shape=(4, 5), expected_num_trainable_weights=1,
        expected_num_non_trainable_weights=0)
    self.assertEqual([tuple(w.shape) for w in layer.weights], [(width,)])


if __name__ == "__main__":
  tf.test.main()

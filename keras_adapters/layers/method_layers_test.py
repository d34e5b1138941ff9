"""The method layers (LoRA, (IA)³) in the blocks: their layer contract
(`testing.run_layer_test`), and a block's projections changed by them or by plain functions.
The layers' own behaviour is tested beside them, in `keras_adapters/methods`, which sits below
`layers` and so does not import this package's test helpers."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapted_transformer_block
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


_HIDDEN, _INTERMEDIATE = 16, 32
# LoRA on two projections, (IA)^3 on one of them and another, in one block.
_DELTAS = [dict(method="lora", targets={"query": dict(rank=2, init_weights="bert"),
                                        "output": dict(rank=3, alpha=6.0)}),
           dict(method="ia3", targets={"output": dict(scales_input=True),
                                       "attention_output": dict(scales_input=False)})]


def _block(**kwargs):
  return adapted_transformer_block.AdaptedTransformerBlock(
      num_heads=2, intermediate_size=_INTERMEDIATE, dropout_rate=0.0,
      attention_dropout_rate=0.0, name="block", **kwargs)


class BlockProjectionsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(42)

  def test_block_builds_the_method_layers(self):
    """`projection_deltas` build each method's layer at its projections, in the specs'
    order, of the projection's widths, named `<projection>/<method>`; the block's contract
    holds with them (config round trip, gradients for every weight)."""
    block = testing.run_layer_test(
        self, adapted_transformer_block.AdaptedTransformerBlock,
        dict(num_heads=2, intermediate_size=_INTERMEDIATE, projection_deltas=_DELTAS,
             name="block"),
        _inputs((2, 5, _HIDDEN)), expected_output_shape=(2, 5, _HIDDEN),
        # LoRA 2 x 2, (IA)^3 2, attention 8, dense layers 4, LayerNorms 4.
        expected_num_trainable_weights=22, expected_num_non_trainable_weights=0)
    self.assertEqual({target: [(type(l).__name__, l.name) for l in layers]
                      for target, layers in block.deltas.items()},
                     {"query": [("LoRA", "query/lora")],
                      "output": [("LoRA", "output/lora"), ("IA3", "output/ia3")],
                      "attention_output": [("IA3", "attention_output/ia3")]})
    self.assertEqual([tuple(w.shape) for w in block.deltas["output"][0].weights],
                     [(_INTERMEDIATE, 3), (3, _HIDDEN)])
    self.assertEqual(tuple(block.deltas["output"][1].scale.shape), (_INTERMEDIATE,))
    self.assertEqual(tuple(block.deltas["attention_output"][0].scale.shape), (_HIDDEN,))
    self.assertLen(block.projection_layers, 4)
    self.assertEqual(block.own_adapters().projection_changes(),
                     {target: tuple(layers) for target, layers in block.deltas.items()})

  @parameterized.named_parameters(
      ("query", "query", 2.0),
      ("key", "key", 0.5),
      ("value", "value", 3.0),
      ("attention_output", "attention_output", -1.0),
      ("intermediate", "intermediate", 1.5),
      ("output", "output", 2.0),
  )
  def test_a_change_applies_to_its_projection(self, target, factor):
    """A plain function scaling one projection's output (`adapters=BlockAdapters(...,
    projections=...)`) computes what the block computes with that projection's kernel and
    bias scaled: the change reaches exactly that projection."""
    block, scaled = _block(), _block()
    x = _inputs((2, 5, _HIDDEN))
    block(x)
    scaled(x)
    _randomize(block)
    scaled.set_weights(block.get_weights())
    for variable in scaled.projection_variables(target):
      variable.assign(variable * factor)
    calls = []

    def change(inputs, project, training):
      calls.append(training)
      return project(inputs) * factor

    adapters = block.own_adapters()._replace(projections={target: (change,)})
    self.assertAllClose(block(x, training=False, adapters=adapters), scaled(x, training=False),
                        atol=1e-5, rtol=1e-5)
    self.assertEqual(calls, [False])
    self.assertNotAllClose(block(x, training=False), scaled(x, training=False), atol=1e-3)


def _randomize(layer, seed=0):
  rng = np.random.RandomState(seed)
  for variable in layer.weights:
    variable.assign(rng.normal(scale=0.3, size=variable.shape))


if __name__ == "__main__":
  tf.test.main()

"""`adapt` and `merge` on every keras-hub encoder built from `TransformerEncoder` blocks, each a
tiny random backbone of the Keras 2 tests' block shapes, and `HubBertBackbone`'s options."""

from absl.testing import parameterized
import keras
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import layers
from keras_adapters.keras3 import testing

_CONFIGS = {"houlsby": kak.AdapterConfig(adapter_size=4),
            "lora": kak.LoRAConfig(r=2, target_modules=(
                "query", "key", "value", "attention_output", "intermediate", "output"))}


def _trainable(backbone):
  return sum(int(np.prod(w.shape)) for w in backbone.trainable_weights)


class AdaptEveryEncoderTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # The BERT's counts, which `adapt_test` checks against the Keras 2 path's.
    cls.bert_trainable = {name: _trainable(kak.adapt(testing.tiny_backbone(), config))
                          for name, config in _CONFIGS.items()}

  def test_every_adaptable_backbone_is_here(self):
    self.assertCountEqual(testing.tiny_backbones(), backbones.ADAPTABLE)

  @parameterized.named_parameters(*[(name, name) for name in backbones.ADAPTABLE])
  def test_adapters_train_as_on_bert(self, name):
    backbone = kak.adapt(testing.tiny_backbones(names=[name])[name], _CONFIGS["houlsby"])
    self.assertEqual(_trainable(backbone), self.bert_trainable["houlsby"])
    for block in backbone.transformer_layers:
      self.assertIsInstance(block._self_attention_dropout, layers.AdaptedSublayerOutput)
      self.assertIsInstance(block._feedforward_dropout, layers.AdaptedSublayerOutput)

  @parameterized.named_parameters(*[(name, name) for name in backbones.ADAPTABLE])
  def test_lora_starts_as_the_base_and_merges(self, name):
    backbone = testing.tiny_backbones(names=[name])[name]
    inputs = testing.inputs_for(backbone, testing.tiny_inputs())
    base = testing.sequence_output(backbone, inputs)
    kak.adapt(backbone, _CONFIGS["lora"])
    self.assertEqual(_trainable(backbone), self.bert_trainable["lora"])
    self.assertAllClose(testing.sequence_output(backbone, inputs), base, atol=1e-6)
    testing.randomize([layer for layer in backbone._flatten_layers()
                       if isinstance(layer, layers.MethodDelta)], scale=0.1)
    adapted = testing.sequence_output(backbone, inputs)
    self.assertGreater(np.abs(adapted - base).max(), 1e-3)
    self.assertEqual(kak.merge(backbone), 12)
    self.assertAllClose(testing.sequence_output(backbone, inputs), adapted, atol=1e-5)


class HubBertBackboneTest(tf.test.TestCase):

  def test_its_activation_and_narrow_embeddings_are_in_its_graph(self):
    for activation, function in backbones.ACTIVATIONS.items():
      backbone = backbones.HubBertBackbone(**testing.TINY_BACKBONE, activation=activation,
                                           embedding_dim=8)
      for block in backbone.transformer_layers:
        self.assertIs(block._feedforward_intermediate_dense.activation, function)
    self.assertEqual(backbone.embeddings_projection.kernel.shape, (8, 16))
    self.assertEqual(backbone.token_embedding.embeddings.shape, (100, 8))
    self.assertEqual(testing.sequence_output(backbone, testing.tiny_inputs()).shape, (3, 8, 16))

  def test_an_unknown_activation_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"activation must be one of \['gelu', "):
      backbones.HubBertBackbone(**testing.TINY_BACKBONE, activation="swish")


if __name__ == "__main__":
  tf.test.main()

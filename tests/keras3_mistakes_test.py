"""A Keras 3 user's mistake with `kak.adapt` (a backbone it cannot adapt, a config or a
config field the Keras 3 path does not take yet, a backbone adapted twice) is one line
naming what to change, raised before the backbone changes."""

from absl.testing import parameterized
import keras
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import testing
from keras_adapters.utils import errors


def _weights(backbone):
  return [(w.path, w.trainable) for w in backbone.weights]


class AdaptMistakesTest(tf.test.TestCase, parameterized.TestCase):

  def assert_refused(self, backbone, config, pattern):
    before = _weights(backbone) if hasattr(backbone, "weights") else None
    with self.assertRaisesRegex(errors.UsageError, pattern) as raised:
      kak.adapt(backbone, config)
    self.assertNotIn("\n", str(raised.exception))
    if before is not None:
      self.assertEqual(_weights(backbone), before)

  def test_another_model_is_refused_naming_the_supported(self):
    model = keras.Sequential([keras.layers.Dense(2)])
    self.assert_refused(model, kak.LoRAConfig(),
                        r"cannot adapt a Sequential: it supports keras-hub's BertBackbone")

  @parameterized.named_parameters(
      ("parallel", kak.AdapterConfig(is_parallel=True), r"AdapterConfig\(is_parallel=True\) "
       r"is not supported on Keras 3 yet: leave is_parallel at False"),
      ("pfeiffer", kak.AdapterConfig(mh_adapter=False, original_ln_before=True),
       r"original_ln_before=True.*Keras 2 path"),
      ("tuning", kak.AdapterConfig(tuning="full"), r"tuning='full'.*leave tuning at "
       "'adapters'"),
  )
  def test_unsupported_config_fields_are_refused_naming_them(self, config, pattern):
    self.assert_refused(testing.tiny_backbone(), config, pattern)

  def test_a_config_of_another_kind_is_refused(self):
    self.assert_refused(testing.tiny_backbone(), {"r": 8},
                        r"takes one of AdapterConfig, LoRAConfig, IA3Config, got \{'r': 8\}")

  def test_layers_beyond_the_backbone_are_refused(self):
    self.assert_refused(testing.tiny_backbone(), kak.LoRAConfig(leave_out=(0, 5)),
                        r"leave_out=\[0, 5\] names layers \[5\].*0\.\.1")

  def test_a_backbone_is_adapted_once(self):
    backbone = kak.adapt(testing.tiny_backbone(), kak.IA3Config())
    self.assert_refused(backbone, kak.LoRAConfig(), r"adapted already; adapt a backbone once")

  def test_keras_hub_s_own_lora_is_refused(self):
    backbone = testing.tiny_backbone()
    backbone.enable_lora(2)
    self.assert_refused(backbone, kak.LoRAConfig(), r"keras-hub's own LoRA \(enable_lora\)")


if __name__ == "__main__":
  tf.test.main()

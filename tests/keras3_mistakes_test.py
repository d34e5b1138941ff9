"""A Keras 3 user's mistake with `kak.adapt` (a backbone it cannot adapt, a config or a
config field the Keras 3 path does not take yet, a backbone adapted twice) is one line
naming what to change, raised before the backbone changes."""

from absl.testing import parameterized
import keras
import keras_hub
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import layers
from keras_adapters.keras3 import testing
from keras_adapters.hub import default_model
from keras_adapters.hub import testing as hub_testing
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
      ("ln_after_off", kak.AdapterConfig(original_ln_after=False),
       r"AdapterConfig\(original_ln_after=False\) is not supported on Keras 3 yet: leave "
       r"original_ln_after at True"),
      ("pfeiffer_skip_after_the_norm", kak.AdapterConfig(
          mh_adapter=False, original_ln_before=True, residual_before_ln=False),
       r"original_ln_before=True, residual_before_ln=False\) is not supported on Keras 3 "
       r"yet: .*residual_before_ln=True"),
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


class EncoderAndConversionMistakesTest(tf.test.TestCase):
  """Another encoder than the `TransformerEncoder` ones, AdapterDrop on blocks the backbone
  does not have, and a TF Hub model that `from_tf_hub` or `tokenizer_from_tf_hub` cannot
  convert: one line each, naming what to pass."""

  def assert_one_line(self, pattern, function, *args):
    with self.assertRaisesRegex(errors.UsageError, pattern) as raised:
      function(*args)
    self.assertNotIn("\n", str(raised.exception))

  def test_albert_is_refused_naming_the_encoders_supported(self):
    albert = keras_hub.models.AlbertBackbone(
        vocabulary_size=100, num_layers=2, num_heads=2, embedding_dim=8, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16)
    self.assert_one_line(
        r"cannot adapt a AlbertBackbone: it supports keras-hub's BertBackbone, "
        r"RobertaBackbone, XLMRobertaBackbone, DistilBertBackbone, ElectraBackbone",
        kak.adapt, albert, kak.LoRAConfig())

  def test_adapter_drop_beyond_the_backbone_is_refused(self):
    backbone = kak.adapt(testing.tiny_backbone(), kak.AdapterConfig(adapter_size=4))
    self.assert_one_line(r"drop_adapters names layers \[2\] that the BertBackbone does not "
                         r"have: it has layers 0\.\.1", kak.drop_adapters, backbone, [0, 2])
    # Refused before any block changed.
    self.assertIsInstance(backbone.transformer_layers[0]._feedforward_dropout,
                          layers.AdaptedSublayerOutput)

  def test_from_tf_hub_refuses_a_folder_without_a_saved_model(self):
    self.assert_one_line(r"No TF Hub BERT encoder at .*: it is not a folder holding a "
                         r"SavedModel", kak.from_tf_hub, self.get_temp_dir())

  # The embedded default's folders, found in this process (which has Keras 2 already): what
  # `tf_hub.local_folder(None, ...)` prints from a fresh Python, about 8 CPU seconds each,
  # which `tf_hub_bert_test` and `tokenizer_test` run for the Keras 3 path of `None`.
  def test_from_tf_hub_refuses_a_preprocessing_model(self):
    self.assert_one_line(r"is a BERT preprocessing model, not an encoder: pass it to "
                         r"kak.tokenizer_from_tf_hub", kak.from_tf_hub,
                         default_model.default_preprocess_handle())

  def test_tokenizer_from_tf_hub_refuses_an_encoder(self):
    self.assert_one_line(r"is not a TF Hub BERT preprocessing model \(it has no tokenize "
                         r"and bert_pack_inputs\)", kak.tokenizer_from_tf_hub,
                         default_model.default_hub_handle())

  def test_tokenizer_from_tf_hub_refuses_a_vocabulary_without_a_mask_token(self):
    self.assert_one_line(r"has no '\[MASK\]' token, which keras-hub's BertTokenizer requires",
                         kak.tokenizer_from_tf_hub, hub_testing.tiny_preprocess_handle())


if __name__ == "__main__":
  tf.test.main()

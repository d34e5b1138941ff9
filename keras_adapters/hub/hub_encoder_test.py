"""Tests for reading TF Hub BERT encoders and copying their weights."""

import os

import numpy as np
import tensorflow as tf

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.networks import adapted_bert_encoder


class HubEncoderTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.save_tiny_hub_encoder(
        os.path.join(tf.compat.v1.test.get_temp_dir(), "hub_encoder_test", "encoder"))
    cls.hub_weights = hub_encoder.read_hub_encoder(cls.handle)

  def test_config_is_inferred_from_shapes_and_layer_configs(self):
    """Layers, heads, widths and table sizes come from the variables; the activation and
    epsilon, which weights cannot show, from the SavedModel's layer configs."""
    self.assertEqual(self.hub_weights.config,
                     {**testing.TINY_CONFIG, "embedding_width": 16, "activation": "gelu",
                      "layer_norm_epsilon": 1e-12})

  def test_weights_use_model_garden_names(self):
    """Every variable is read under its Model Garden name, with no export prefix."""
    self.assertIn("transformer/layer_1/self_attention/attention_output/kernel",
                  self.hub_weights.weights)
    self.assertLen(self.hub_weights.weights, 5 + 16 * 2 + 2)

  def test_fingerprint_is_stable_and_sensitive(self):
    """Same weights give the same fingerprint; one changed value gives another."""
    weights = dict(self.hub_weights.weights)
    self.assertEqual(hub_encoder.fingerprint(weights), self.hub_weights.fingerprint)
    weights["pooler_transform/bias"] = weights["pooler_transform/bias"] + 1e-6
    self.assertNotEqual(hub_encoder.fingerprint(weights), self.hub_weights.fingerprint)

  def test_missing_handle_is_a_clear_error(self):
    """A path that does not exist names itself and the kinds of handle accepted."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "no_such_model.*neither a URL"):
      hub_encoder.read_hub_encoder("/tmp/no_such_model")

  def test_folder_without_savedmodel_is_a_clear_error(self):
    """An existing folder with no saved_model.pb says so."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "saved_model.pb"):
      hub_encoder.read_hub_encoder(self.create_tempdir().full_path)

  def test_non_bert_savedmodel_is_a_clear_error(self):
    """A SavedModel without BERT variables is refused as 'not a BERT encoder'."""
    module = tf.Module()
    module.table = tf.Variable(tf.zeros([3, 4]), name="embedding_table")
    path = self.create_tempdir().full_path
    tf.saved_model.save(module, path)
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "not a BERT encoder"):
      hub_encoder.read_hub_encoder(path)

  def test_unused_hub_variable_is_named(self):
    """A Hub variable with no place in the rebuilt encoder is an error naming it."""
    weights = dict(self.hub_weights.weights)
    weights["transformer/layer_0/extra/kernel"] = np.zeros([2])
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "extra/kernel"):
      hub_encoder.copy_weights(self._encoder(), self._with(weights))

  def test_shape_mismatch_is_named(self):
    """A variable of another shape is an error naming it and both shapes."""
    weights = dict(self.hub_weights.weights)
    weights["pooler_transform/bias"] = np.zeros([3], np.float32)
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"pooler_transform/bias.*\(3,\).*\(16,\)"):
      hub_encoder.copy_weights(self._encoder(), self._with(weights))

  def test_masked_lm_variables_are_left_out(self):
    """The masked-LM head some Hub exports carry is skipped, not reported as unused."""
    loaded = tf.saved_model.load(self.handle)
    loaded.masked_lm_bias = tf.Variable(tf.zeros([64]), name="masked_lm/output_bias")
    path = self.create_tempdir().full_path
    tf.saved_model.save(loaded, path)
    weights = hub_encoder.read_hub_encoder(path).weights
    self.assertNotIn("masked_lm/output_bias", weights)
    self.assertEqual(sorted(weights), sorted(self.hub_weights.weights))

  def _encoder(self):
    return adapted_bert_encoder.AdaptedBertEncoder(**testing.TINY_CONFIG)

  def _with(self, weights):
    return hub_encoder.HubEncoderWeights(
        handle=self.handle, config=self.hub_weights.config, weights=weights, fingerprint="")


if __name__ == "__main__":
  tf.test.main()

"""Tests for reading TF Hub BERT encoders and copying their weights."""

import dataclasses
import gc
import hashlib
import os
import shutil
from unittest import mock
import weakref

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from official.nlp.configs import encoders

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import model_garden_export
from keras_adapters.hub import read_cache
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision


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

  def test_reading_a_base_leaves_the_random_seed_stream_alone(self):
    """The parity check builds an encoder; a model seeded the same way starts from the same
    weights whether or not it read its base first (the cache was cold or warm), and whether
    it reads it inside a distribution scope (in a thread of its own) or not."""
    def dense_after(read):
      keras.utils.set_random_seed(3)
      read()
      layer = keras.layers.Dense(3)
      layer.build((None, 4))
      return layer.kernel.numpy()

    def cold_read():
      with testing.unproven():
        hub_encoder.read_hub_encoder(self.handle)

    def read_in_scope():
      with testing.unproven(), tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        hub_encoder.read_hub_encoder(self.handle)

    unread = dense_after(lambda: None)
    self.assertAllEqual(dense_after(cold_read), unread)
    self.assertAllEqual(dense_after(read_in_scope), unread)

  def test_parity_probe_runs_in_float32_under_a_mixed_policy(self):
    """The probe's encoder computes in float32 whatever the global policy (the Hub model
    does): a cold read under a mixed policy measures exactly the float32 read's parity and
    leaves the policy as it was."""
    for name, _, _ in layers_testing.MIXED_PRECISIONS:
      with self.subTest(precision=name), precision.policy_scope(name), testing.unproven():
        read = hub_encoder.read_hub_encoder(self.handle)
        self.assertEqual(keras.mixed_precision.global_policy().compute_dtype, name)
        self.assertEqual(read.parity, self.hub_weights.parity)
        self.assertEqual(read.config, self.hub_weights.config)

  def test_small_bases_stay_read_larger_ones_only_while_held(self):
    """The tiny base is read once for every model around it; a base over
    `SMALL_BASE_BYTES` is read again once nothing holds its weights, so that no copy of it
    stays beside the models built from it."""
    hub_encoder.clear_cache()
    small = weakref.ref(hub_encoder.read_hub_encoder(self.handle))
    gc.collect()
    self.assertIs(hub_encoder.read_hub_encoder(self.handle), small())  # Kept, not read again.
    with mock.patch.object(read_cache, "SMALL_BASE_BYTES", 0):
      hub_encoder.clear_cache()
      held = hub_encoder.read_hub_encoder(self.handle)
      self.assertIs(hub_encoder.read_hub_encoder(self.handle), held)
      probe = weakref.ref(held)
      del held
      gc.collect()
      self.assertIsNone(probe())
      self.assertEqual(hub_encoder.read_hub_encoder(self.handle).config,
                       self.hub_weights.config)

  def test_a_base_proven_before_is_read_from_its_checkpoint_without_restoring_it(self):
    """A read of files proven before, in any folder and process (its record kept in
    `proofs`), restores nothing and gives the proven read; changed files are proven again,
    and a tampered one refused."""
    with testing.unproven():
      proven = hub_encoder.read_hub_encoder(self.handle)
      copy = os.path.join(self.create_tempdir().full_path, "copy")
      shutil.copytree(self.handle, copy)
      hub_encoder.clear_cache()  # As in a new process.
      with mock.patch.object(hub, "load", side_effect=AssertionError("restored")):
        remembered = hub_encoder.read_hub_encoder(copy)
      self.assertEqual((remembered.config, remembered.fingerprint, remembered.parity),
                       (proven.config, proven.fingerprint, proven.parity))
      self.assertEqual(remembered.tokenizer, dataclasses.replace(
          proven.tokenizer, path=os.path.join(copy, "assets", "vocab.txt")))
      self.assertCountEqual(remembered.weights, proven.weights)
      for name, value in proven.weights.items():
        self.assertAllEqual(remembered.weights[name], value, msg=name)
      # The copy's layer configs now say the tanh GELU its graph does not compute: other
      # files, so restored and proven again, and refused.
      testing.replace_in_layer_configs(copy, '"gelu"', '"Text>gelu"')
      hub_encoder.clear_cache()
      restores = mock.Mock(wraps=hub.load)
      with mock.patch.object(hub, "load", restores), \
          self.assertRaisesRegex(hub_encoder.HubEncoderError, "does not reproduce"):
        hub_encoder.read_hub_encoder(copy)
      restores.assert_called_once()

  def test_without_weights_keeps_what_checks_and_names_the_base(self):
    facts = self.hub_weights.without_weights()
    self.assertEqual(facts.weights, {})
    self.assertEqual((facts.config, facts.fingerprint, facts.tokenizer),
                     (self.hub_weights.config, self.hub_weights.fingerprint,
                      self.hub_weights.tokenizer))

  def test_missing_handle_is_a_clear_error(self):
    """A path that does not exist names itself and the kinds of handle accepted."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "no_such_model.*neither a URL"):
      hub_encoder.read_hub_encoder("/tmp/no_such_model")

  def test_folder_without_savedmodel_is_a_clear_error(self):
    """An existing folder with no saved_model.pb says so."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, "saved_model.pb"):
      hub_encoder.read_hub_encoder(self.create_tempdir().full_path)

  def _saved_module(self, variable_name):
    """A SavedModel of one tf.Module holding one variable named `variable_name`."""
    module = tf.Module()
    module.table = tf.Variable(tf.zeros([8, 4]), name=variable_name)
    path = self.create_tempdir().full_path
    tf.saved_model.save(module, path)
    return path

  def test_non_bert_savedmodel_is_a_clear_error(self):
    """A text-embedding module is refused as 'not a BERT encoder', naming what it holds and
    what is supported."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"not a BERT encoder.*variables start \['embedding_table'\].*"
                                r"Supported: BERT-family encoders"):
      hub_encoder.read_hub_encoder(self._saved_module("embedding_table"))

  def test_tf1_bert_names_are_refused_with_the_converter_named(self):
    """An encoder without Model Garden names (a TF1 BERT's) is pointed at the converter."""
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"bert/embeddings/word_embeddings.*"
                                r"tf2_bert_encoder_checkpoint_converter"):
      hub_encoder.read_hub_encoder(self._saved_module("bert/embeddings/word_embeddings"))

  def test_a_preprocessing_model_is_named_as_such(self):
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"is a BERT preprocessing model.*pass it as the preprocessing "
                                r"handle"):
      hub_encoder.read_hub_encoder(testing.tiny_preprocess_handle())

  def test_albert_is_refused_as_sharing_one_layer(self):
    """A genuine Model Garden ALBERT export: one layer shared across depth, named so."""
    path = model_garden_export.export_encoder(
        os.path.join(self.create_tempdir().full_path, "albert"),
        encoder_config=encoders.EncoderConfig(type="albert", albert=encoders.AlbertEncoderConfig(
            vocab_size=64, embedding_width=8, hidden_size=16, num_layers=2,
            num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)),
        sp_model_file=testing.save_tiny_sentencepiece(self.create_tempdir().full_path))
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"ALBERT encoder: one Transformer layer shared across depth"):
      hub_encoder.read_hub_encoder(path)

  def test_a_tfhub_url_resolves_through_the_hub_cache_like_a_folder(self):
    """A tfhub.dev or Kaggle handle takes the local-folder path once TF Hub's cache holds it:
    nothing is downloaded (this machine has no network to do so)."""
    cache = self.create_tempdir().full_path
    for url in ("https://tfhub.dev/tensorflow/bert_en_uncased_L-2_H-128_A-2/2",
                "https://www.kaggle.com/models/tensorflow/bert/TensorFlow2/"
                "en-uncased-l-2-h-128-a-2/2"):
      shutil.copytree(self.handle, os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))
      with mock.patch.dict(os.environ, {"TFHUB_CACHE_DIR": cache}):
        read = hub_encoder.read_hub_encoder(url)
      self.assertEqual(read.fingerprint, self.hub_weights.fingerprint)
      self.assertEqual(read.config, self.hub_weights.config)

  def test_a_url_missing_from_the_cache_says_how_to_provide_it(self):
    with mock.patch.dict(os.environ, {"TFHUB_CACHE_DIR": self.create_tempdir().full_path}), \
         mock.patch("urllib.request.urlopen", side_effect=OSError("no network")):
      with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                  r"could not be downloaded.*TFHUB_CACHE_DIR"):
        hub_encoder.read_hub_encoder("https://tfhub.dev/tensorflow/no_such_bert/1")

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

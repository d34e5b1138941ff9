"""Tests for AdaptedBert: a TF Hub BERT encoder rebuilt with adapters."""

import inspect
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.networks import adapted_bert_encoder

_NUM_LAYERS = testing.TINY_CONFIG["num_layers"]
_HIDDEN = testing.TINY_CONFIG["hidden_size"]


def _padded_batch():
  """Three sequences of lengths 7, 4 and 2, padded to 7, with two segments."""
  rng = np.random.RandomState(0)
  lengths = np.array([7, 4, 2])
  mask = (np.arange(7)[np.newaxis] < lengths[:, np.newaxis]).astype(np.int32)
  ids = rng.randint(1, testing.TINY_CONFIG["vocab_size"], size=mask.shape) * mask
  type_ids = (np.arange(7)[np.newaxis] >= 2).astype(np.int32) * mask
  return dict(input_word_ids=tf.constant(ids, tf.int32), input_mask=tf.constant(mask),
              input_type_ids=tf.constant(type_ids))


def _is_adapter_or_layer_norm(variable):
  name = adapted_bert_encoder.canonical_variable_name(variable.name)
  return "_adapter/" in name or "layer_norm/" in name


class AdaptedBertTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.hub_layer = hub.KerasLayer(cls.handle)
    cls.inputs = _padded_batch()
    cls.hub_outputs = cls.hub_layer(cls.inputs, training=False)

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(11)

  def _assert_matches_hub(self, outputs, atol=1e-5):
    for key in ("pooled_output", "sequence_output", "default"):
      self.assertAllClose(outputs[key], self.hub_outputs[key], atol=atol, rtol=0, msg=key)
    self.assertLen(outputs["encoder_outputs"], _NUM_LAYERS)
    for i in range(_NUM_LAYERS):
      self.assertAllClose(outputs["encoder_outputs"][i], self.hub_outputs["encoder_outputs"][i],
                          atol=atol, rtol=0, msg=f"encoder_outputs[{i}]")

  def test_identity_adapters_match_hub_layer(self):
    """With adapter_init_stddev=0 every output equals hub.KerasLayer's to 1e-5, padding too."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, adapter_init_stddev=0.0)
    outputs = layer(self.inputs, training=False)
    self.assertEqual(outputs["sequence_output"].shape, tf.TensorShape([3, 7, _HIDDEN]))
    self._assert_matches_hub(outputs)

  def test_no_adapters_match_hub_layer(self):
    """Without adapters (adapter_size=None) the rebuilt encoder equals the Hub encoder."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="layer_norm")
    self.assertEmpty(layer.encoder.adapters)
    self._assert_matches_hub(layer(self.inputs, training=False))

  def test_default_init_is_near_identity(self):
    """Default adapters change the outputs, but only slightly."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4)
    outputs = layer(self.inputs, training=False)
    self.assertNotAllClose(outputs["sequence_output"], self.hub_outputs["sequence_output"],
                           atol=1e-6, rtol=0)
    self.assertAllClose(outputs["sequence_output"], self.hub_outputs["sequence_output"],
                        atol=0.1, rtol=0)
    self.assertAllClose(outputs["pooled_output"], self.hub_outputs["pooled_output"],
                        atol=0.1, rtol=0)

  def test_base_weights_are_the_hub_weights(self):
    """Every Hub variable is copied, by name, into the rebuilt encoder's base variable."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4)
    hub_values = {adapted_bert_encoder.canonical_variable_name(v.name): v.numpy()
                  for v in self.hub_layer.weights}
    variable_map = layer.encoder.hub_variable_map()
    self.assertEqual(set(variable_map), set(hub_values))
    for name, variable in variable_map.items():
      self.assertAllEqual(variable, hub_values[name], msg=name)
    self.assertEqual(layer.base_fingerprint, hub_encoder.fingerprint(hub_values))

  def test_trains_only_adapters_layer_norms_and_head_in_functional_model(self):
    """model.fit changes adapters, LayerNorms and head; every other variable stays bitwise."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4)
    inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
              for key in adapted_bert_encoder.INPUT_KEYS}
    logits = keras.layers.Dense(3, name="head")(layer(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    # Eager steps: tracing the train step would triple this file's run time; the layer runs
    # in graph mode in the MirroredStrategy test.
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    before = {id(v): v.numpy().copy() for v in model.weights}
    labels = tf.constant([0, 1, 2])
    history = model.fit(self.inputs, labels, batch_size=3, epochs=2, verbose=0)
    self.assertLen(history.history["loss"], 2)

    head = model.get_layer("head")
    expected_trained = ({id(v) for v in head.weights}
                        | {id(v) for v in layer.weights if _is_adapter_or_layer_norm(v)})
    self.assertEqual({id(v) for v in model.trainable_weights}, expected_trained)
    self.assertLen(expected_trained, 2 + 4 * 2 * _NUM_LAYERS + 2 * (2 * _NUM_LAYERS + 1))
    for variable in model.weights:
      changed = not np.array_equal(variable.numpy(), before[id(variable)])
      self.assertEqual(changed, id(variable) in expected_trained, msg=variable.name)

  def test_get_config_has_every_argument_and_from_config_rebuilds(self):
    """get_config holds every constructor argument; from_config rebuilds an equivalent layer."""
    layer = adapted_bert.AdaptedBert(
        self.handle, adapter_size=3, tuning="top_k", top_k=1, adapter_activation="tanh",
        adapter_init_stddev=0.0, activation="gelu", dropout_rate=0.2,
        attention_dropout_rate=0.05, layer_norm_epsilon=1e-12, name="adapted")
    config = layer.get_config()
    arguments = [name for name, p in inspect.signature(
        adapted_bert.AdaptedBert.__init__).parameters.items()
                 if name != "self" and p.kind is not p.VAR_KEYWORD]
    self.assertLen(arguments, 12)
    for name in arguments:
      value = getattr(layer, name)
      self.assertEqual(config[name], value.to_dict() if name == "adapter_config" else value,
                       msg=name)
    self.assertEqual(config["handle"], self.handle)

    rebuilt = keras.layers.deserialize(keras.layers.serialize(layer))
    self.assertIsInstance(rebuilt, adapted_bert.AdaptedBert)
    self.assertEqual(rebuilt.get_config(), config)
    rebuilt = adapted_bert.AdaptedBert.from_config(config)
    self.assertEqual(rebuilt.get_config(), config)
    self.assertEqual(rebuilt.base_fingerprint, layer.base_fingerprint)
    self.assertEqual([v.name for v in rebuilt.trainable_weights],
                     [v.name for v in layer.trainable_weights])
    self.assertAllClose(rebuilt(self.inputs)["pooled_output"],
                        layer(self.inputs)["pooled_output"], atol=1e-6)
    self._assert_matches_hub(rebuilt(self.inputs, training=False))

  def test_missing_handle_raises_with_path(self):
    """A handle that is neither a URL nor a folder is a HubEncoderError naming the path."""
    missing = os.path.join(self.create_tempdir().full_path, "no_such_encoder")
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, f"No TF Hub encoder at.*{missing}"):
      adapted_bert.AdaptedBert(missing, adapter_size=4)
    self.assertTrue(issubclass(hub_encoder.HubEncoderError, ValueError))

  def test_folder_without_saved_model_raises(self):
    """An existing folder with no SavedModel is a HubEncoderError mentioning saved_model.pb."""
    empty = self.create_tempdir().full_path
    with self.assertRaisesRegex(hub_encoder.HubEncoderError, r"saved_model\.pb"):
      adapted_bert.AdaptedBert(empty, adapter_size=4)

  def test_non_bert_saved_model_raises(self):
    """A SavedModel that is not a BERT encoder is a HubEncoderError saying so."""
    module = tf.Module()
    module.weight = tf.Variable(tf.ones([3]), name="weight")
    path = os.path.join(self.create_tempdir().full_path, "not_bert")
    tf.saved_model.save(module, path)
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"not a BERT encoder.*word_embeddings/embeddings"):
      adapted_bert.AdaptedBert(path, adapter_size=4)

  @parameterized.named_parameters(("zero", 0), ("negative", -3), ("string", "64"),
                                  ("float", 8.0))
  def test_invalid_adapter_size_raises(self, adapter_size):
    """adapter_size must be a positive integer or None; otherwise a ValueError naming it."""
    with self.assertRaisesRegex(ValueError, "adapter_size must be a positive integer"):
      adapted_bert.AdaptedBert(self.handle, adapter_size=adapter_size)

  def test_mirrored_strategy_variables_and_parity(self):
    """Built in a MirroredStrategy scope, variables are mirrored and outputs match the Hub's."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
      layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, adapter_init_stddev=0.0)
    self.assertNotEmpty(layer.weights)
    for variable in layer.weights:
      self.assertIsInstance(variable, tf.distribute.DistributedValues)
      self.assertEqual(type(variable).__name__, "MirroredVariable")
      self.assertLen(strategy.experimental_local_results(variable), 2)
    kernel = layer.encoder.hub_variable_map()["transformer/layer_1/output/kernel"]
    for replica_value in strategy.experimental_local_results(kernel):
      self.assertAllEqual(replica_value, kernel.values[0])

    @tf.function
    def run():
      return strategy.run(lambda: layer(self.inputs, training=False)["pooled_output"])

    results = strategy.experimental_local_results(run())
    self.assertLen(results, 2)
    for replica_output in results:
      self.assertAllClose(replica_output, self.hub_outputs["pooled_output"], atol=1e-5, rtol=0)
    self._assert_matches_hub(layer(self.inputs, training=False))


if __name__ == "__main__":
  tf.test.main()

"""`AdaptedBert` against genuine Model Garden TF Hub exports of every BERT-family variant.

Each encoder is written at test time by `official.nlp.tools.export_tfhub_lib.export_model`
(through `model_garden_export`), with random weights far from zero, and loaded back both as
`hub.KerasLayer` and through `AdaptedBert` with identity adapters.
"""

import os
import shutil

from absl.testing import parameterized
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.models import adapted_bert
from keras_adapters.utils import precision

class AdaptedBertHubParityTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tf.compat.v1.test.get_temp_dir()
    cls.exports, cls.hub_outputs = {}, {}

  def _export(self, name):
    """The variant's export, written once per class (an export takes seconds)."""
    if name not in self.exports:
      self.exports[name] = testing.export_model_garden_variant(name, self.root)
    return self.exports[name]

  def _hub_outputs(self, name):
    """A padded two-segment batch and the Hub layer's outputs on it, once per class (each
    `hub.KerasLayer` restores the SavedModel)."""
    if name not in self.hub_outputs:
      handle = self._export(name)
      inputs = hub_encoder.probe_inputs(hub_encoder.read_hub_encoder(handle).config,
                                        batch_size=3, seq_length=12)
      self.hub_outputs[name] = inputs, hub.KerasLayer(handle)(inputs)
    return self.hub_outputs[name]

  @parameterized.named_parameters(*[(name, name) for name in testing.MODEL_GARDEN_VARIANTS])
  def test_identity_adapters_equal_the_hub_layer(self, name):
    """Every output, at every position of a padded two-segment batch, to 1e-5."""
    handle = self._export(name)
    base = hub_encoder.read_hub_encoder(handle)
    variant = testing.MODEL_GARDEN_VARIANTS[name]
    self.assertEqual(base.config["activation"], variant.activation)
    self.assertEqual(base.tokenizer.kind, variant.tokenizer)
    inputs, expected = self._hub_outputs(name)
    self.assertEqual(set(inputs["input_type_ids"].numpy().ravel()), {0, 1})
    self.assertIn(0, inputs["input_mask"].numpy())
    bert = adapted_bert.AdaptedBert(handle, adapter_size=4, adapter_init_stddev=0.0)
    actual = bert(inputs)
    for key in ("sequence_output", "pooled_output", "default"):
      self.assertAllClose(expected[key], actual[key], atol=1e-5, rtol=0, msg=key)
    self.assertLen(actual["encoder_outputs"], len(expected["encoder_outputs"]))
    for expected_layer, actual_layer in zip(expected["encoder_outputs"],
                                            actual["encoder_outputs"]):
      self.assertAllClose(expected_layer, actual_layer, atol=1e-5, rtol=0)

  @parameterized.named_parameters(*[(name, name) for name in testing.MODEL_GARDEN_VARIANTS])
  def test_mixed_precision_builds_near_the_hub_layer(self, name):
    """Under each mixed policy, a cold read of the variant builds (its parity probe runs in
    float32), with float32 variables and float32 outputs near the Hub layer's."""
    handle = self._export(name)
    inputs, expected = self._hub_outputs(name)
    # Cold: the first policy's layer reads the base, probe included, under that policy.
    self.enter_context(testing.unproven())
    for precision_name, _, epsilon in layers_testing.MIXED_PRECISIONS:
      with self.subTest(precision=precision_name):
        with precision.policy_scope(precision_name):
          bert = adapted_bert.AdaptedBert(handle, adapter_size=4, adapter_init_stddev=0.0)
        self.assertEqual(bert.encoder.compute_dtype, precision_name)
        self.assertEqual({w.dtype for w in bert.weights}, {tf.float32})
        actual = bert(inputs)
        for key in ("sequence_output", "pooled_output"):
          self.assertEqual(actual[key].dtype, tf.float32)
          # Measured up to 5.3 epsilons: these exports' random weights are far from zero.
          self.assertLess(layers_testing.mixed_precision_gap(actual[key], expected[key],
                                                             epsilon), 10, msg=key)

  def test_a_stated_activation_that_differs_is_refused(self):
    """The base's activation is read, not taken from the caller: a contradiction is named."""
    handle = self._export("legacy_gelu_vocab")
    with self.assertRaisesRegex(ValueError, r"activation='gelu' \(the base has "
                                            r"'gelu_approximate'\)"):
      adapted_bert.AdaptedBert(handle, activation="gelu")

  def test_an_export_whose_recorded_facts_do_not_reproduce_it_is_refused(self):
    """A SavedModel whose layer configs say exact GELU while its graph computes the tanh one
    is refused naming both outputs' difference, not served as a near-miss."""
    handle = os.path.join(self.create_tempdir().full_path, "tampered")
    shutil.copytree(self._export("legacy_gelu_vocab"), handle)
    testing.replace_in_layer_configs(handle, '"Text>gelu"', '"gelu"')
    with self.assertRaisesRegex(hub_encoder.HubEncoderError,
                                r"does not reproduce the Hub model.*'activation': 'gelu'.*"
                                r"differs by"):
      hub_encoder.read_hub_encoder(handle)

  def test_adapters_train_on_a_genuine_export(self):
    """A few steps move the adapters and LayerNorms, never the Hub weights."""
    handle = self._export("bert_v2_embedding_width_with_mlm")
    bert = adapted_bert.AdaptedBert(handle, adapter_size=4)
    inputs = hub_encoder.probe_inputs(hub_encoder.read_hub_encoder(handle).config)
    layers = {k: keras.Input([None], dtype=tf.int32, name=k) for k in inputs}
    model = keras.Model(layers, keras.layers.Dense(2)(bert(layers)["pooled_output"]))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    trainable = {id(v) for v in model.trainable_weights}
    frozen = {v.name: v.numpy() for v in bert.encoder.hub_variable_map().values()
              if id(v) not in trainable}
    model.fit(inputs, tf.constant([0, 1]), epochs=2, verbose=0)
    self.assertNotEmpty(frozen)
    for variable in bert.encoder.hub_variable_map().values():
      if variable.name in frozen:
        self.assertAllEqual(variable, frozen[variable.name], msg=variable.name)


if __name__ == "__main__":
  tf.test.main()

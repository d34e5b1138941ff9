"""Tests for AdaptedBert: a TF Hub BERT encoder rebuilt with adapters."""

import functools
import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.methods.ia3 import config as ia3_config
from keras_adapters.methods.lora import config as lora_config
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import merging
from keras_adapters.models import saving
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision

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


@functools.lru_cache(maxsize=None)
def _hub_layer_and_outputs():
  """hub.KerasLayer of the tiny encoder and its outputs on `_padded_batch()`, loaded once for
  every test class: read-only references the adapted encoders must match."""
  layer = hub.KerasLayer(testing.tiny_hub_handle())
  return layer, layer(_padded_batch(), training=False)


def _is_adapter_or_layer_norm(variable):
  name = adapted_bert_encoder.canonical_variable_name(variable.name)
  return "_adapter/" in name or "layer_norm/" in name


class AdaptedBertTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.hub_layer, cls.hub_outputs = _hub_layer_and_outputs()
    cls.inputs = _padded_batch()

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
    # Less the export's do_lower_case flag, which belongs to its tokenizer.
    hub_values = {adapted_bert_encoder.canonical_variable_name(v.name): v.numpy()
                  for v in self.hub_layer.weights if v.dtype != tf.bool}
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

  def test_layer_contract(self):
    """Every argument set away from its default: the weights (the Hub's) made by the
    constructor, config round trip, registered serialization (rebuilt layers compute the
    same), the TF Hub output dict's shapes, what trains under top_k and its gradients. From
    its config alone a layer rebuilds with the Hub weights and the same trainable weights."""
    layer = layers_testing.run_layer_test(
        self, adapted_bert.AdaptedBert,
        dict(handle=self.handle, adapter_size=3, tuning="top_k", top_k=1,
             adapter_activation="tanh", adapter_init_stddev=0.0, activation="gelu",
             dropout_rate=0.2, attention_dropout_rate=0.05, layer_norm_epsilon=1e-12,
             recompute_attention="always",
             adapter_config=adapter_config.AdapterConfig(
                 adapter_size=3, tuning="top_k", top_k=1, activation="tanh",
                 init_stddev=0.0).to_dict(),
             adapter_name="first", name="adapted"),
        self.inputs, weights_in_constructor=True,
        expected_output_shape=dict(sequence_output=(3, 7, _HIDDEN), pooled_output=(3, _HIDDEN),
                                   encoder_outputs=[(3, 7, _HIDDEN)] * _NUM_LAYERS,
                                   default=(3, _HIDDEN)),
        # The top block (attention 8, dense layers 4, LayerNorms 4, adapters 8) and the
        # pooler 2 train; the embeddings 3 and their LayerNorm 2 and the lower block 24 not.
        expected_num_trainable_weights=26, expected_num_non_trainable_weights=29)
    rebuilt = adapted_bert.AdaptedBert.from_config(layer.get_config())
    self.assertEqual(rebuilt.base_fingerprint, layer.base_fingerprint)
    self.assertEqual([v.name for v in rebuilt.trainable_weights],
                     [v.name for v in layer.trainable_weights])
    self.assertAllClose(rebuilt(self.inputs)["pooled_output"],
                        layer(self.inputs)["pooled_output"], atol=1e-6)
    self._assert_matches_hub(rebuilt(self.inputs, training=False))
    self.assertEqual({block.self_attention.recompute_attention
                      for block in rebuilt.encoder.transformer_layers}, {"always"})

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

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_first_layer_of_a_base(self, name, epsilon):
    """Under a mixed policy the first AdaptedBert of a base builds (its Hub parity probe runs
    in float32 inside); variables stay float32, the encoder computes in the policy, and every
    output is float32, with identity adapters near the Hub encoder's."""
    with testing.unproven(), precision.policy_scope(name):
      layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, adapter_init_stddev=0.0)
    self.assertEqual(layer.encoder.compute_dtype, name)
    self.assertEqual({w.dtype for w in layer.weights}, {tf.float32})
    outputs = layer(self.inputs, training=False)
    for key in ("pooled_output", "sequence_output", "default"):
      self.assertEqual(outputs[key].dtype, tf.float32)
      # Measured up to 2.0 epsilons (the pooled output).
      self.assertLess(layers_testing.mixed_precision_gap(
          outputs[key], self.hub_outputs[key], epsilon), 4, msg=key)
    self.assertEqual({output.dtype for output in outputs["encoder_outputs"]}, {tf.float32})

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


class NamedAdaptersTest(tf.test.TestCase, parameterized.TestCase):
  """Several adapter sets on one base: add, activate, train one, disable, delete, drop."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.inputs = _padded_batch()
    _, cls.hub_outputs = _hub_layer_and_outputs()

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(11)

  def _layer(self, **kwargs):
    return adapted_bert.AdaptedBert(self.handle, adapter_size=4, dropout_rate=0.0,
                                    attention_dropout_rate=0.0, **kwargs)

  def _sequence(self, layer, **kwargs):
    return layer(self.inputs, training=False, **kwargs)["sequence_output"]

  def _fit(self, model, num_classes):
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    model.fit(self.inputs, tf.constant([0, 1, num_classes - 1]), batch_size=3, epochs=2,
              verbose=0)

  def test_adapter_config_argument(self):
    """adapter_config= gives the first set's settings; conflicting arguments are refused."""
    config = adapter_config.AdapterConfig(adapter_size=3, activation="tanh", leave_out=(1,))
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
    self.assertEqual(layer.adapter_configs, {"default": config})
    self.assertEqual((layer.adapter_size, layer.adapter_activation), (3, "tanh"))
    self.assertLen(layer.encoder.adapters, 2)
    self.assertEqual([a.adapter_size for a in layer.encoder.transformer_layers[0].adapters],
                     [3, 3])
    self.assertEmpty(layer.encoder.transformer_layers[1].adapters)
    with self.assertRaisesRegex(ValueError, r"conflicting arguments \{'adapter_size': 8\}"):
      adapted_bert.AdaptedBert(self.handle, adapter_size=8, adapter_config=config)
    with self.assertRaisesRegex(ValueError, r"leave_out=\[7\]"):
      adapted_bert.AdaptedBert(
          self.handle, adapter_config=adapter_config.AdapterConfig(leave_out=(7,)))

  def test_added_set_starts_from_the_base_and_is_chosen_by_name(self):
    """A new set (identity adapters) computes the Hub encoder; set_adapter switches to it."""
    layer = self._layer()
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2, init_stddev=0.0))
    self.assertEqual(list(layer.adapter_configs), ["default", "b"])
    self.assertEqual(layer.active_adapter, "default")
    for weight in layer.adapter_weights("default").values():  # the default set "trained"
      weight.assign_add(tf.random.normal(weight.shape, stddev=0.1))
    trained = self._sequence(layer)
    self.assertNotAllClose(trained, self.hub_outputs["sequence_output"], atol=1e-3)
    self.assertAllClose(self._sequence(layer, adapter_name="b"),
                        self.hub_outputs["sequence_output"], atol=1e-5, rtol=0)
    layer.set_adapter("b")
    self.assertAllClose(self._sequence(layer), self.hub_outputs["sequence_output"], atol=1e-5,
                        rtol=0)
    self.assertAllClose(self._sequence(layer, adapter_name="default"), trained, atol=1e-6)
    # Added sets stay frozen until train_adapter.
    self.assertEmpty({id(w) for w in layer.trainable_weights}
                     & {id(w) for w in layer.adapter_weights("b").values()})

  def test_training_task_b_never_changes_task_a(self):
    """With A's model trained and B training on the same base, A's weights, head and
    outputs stay bitwise; only B's set and head move."""
    layer = self._layer()
    model_a = classifier.build_classifier(layer, 3)
    self._fit(model_a, 3)
    # m=4: with 2 units, a ReLU unit of B that no token of this tiny batch activates would
    # keep its down-projection still for a reason that has nothing to do with isolation.
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=4))
    layer.train_adapter("b")
    model_b = classifier.build_classifier(layer, 2)
    b_weights = {id(w) for w in layer.adapter_weights("b").values()}
    b_head = {id(w) for w in model_b.get_layer("logits").weights}
    self.assertEqual({id(w) for w in model_b.trainable_weights}, b_weights | b_head)
    before = {id(v): v.numpy().copy() for v in model_a.weights + model_b.weights}
    outputs_a = model_a(self.inputs, training=False)
    self._fit(model_b, 2)
    for variable in model_a.weights + model_b.weights:
      changed = not np.array_equal(variable.numpy(), before[id(variable)])
      self.assertEqual(changed, id(variable) in b_weights | b_head, msg=variable.name)
    self.assertAllEqual(model_a(self.inputs, training=False), outputs_a)
    # Training A again leaves B alone, and brings back A's trainable weights.
    layer.train_adapter("default")
    a_trainable = {id(w) for w in model_a.trainable_weights}
    self.assertEqual(a_trainable, {id(w) for w in layer.adapter_weights("default").values()}
                     | {id(w) for w in model_a.get_layer("logits").weights})

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_sets_and_their_models(self, name, epsilon):
    """Under a mixed policy an added set follows it too: the models of both sets give float32
    logits, and a new set (identity adapters) and the plain base compute near the Hub
    encoder."""
    with precision.policy_scope(name):
      layer = self._layer()
      layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2, init_stddev=0.0))
      model_a = classifier.build_classifier(layer, 3)
      layer.train_adapter("b")
      model_b = classifier.build_classifier(layer, 2)
    self.assertEqual({w.dtype for w in model_a.weights + model_b.weights}, {tf.float32})
    self.assertEqual(model_a(self.inputs).dtype, tf.float32)
    self.assertEqual(model_b(self.inputs).dtype, tf.float32)
    with layer.disable_adapter():
      plain = self._sequence(layer)
    for sequence in (self._sequence(layer, adapter_name="b"), plain):
      self.assertEqual(sequence.dtype, tf.float32)
      # Measured up to 1.7 epsilons.
      self.assertLess(layers_testing.mixed_precision_gap(
          sequence, self.hub_outputs["sequence_output"], epsilon), 4)

  def test_disable_adapter_gives_the_plain_base(self):
    """Inside disable_adapter() every call is the Hub encoder, even a model bound to a set."""
    layer = self._layer()
    model = classifier.build_classifier(layer, 3)
    for weight in layer.adapter_weights().values():
      weight.assign_add(tf.random.normal(weight.shape, stddev=0.1))
    trained = self._sequence(layer)
    with layer.disable_adapter():
      self.assertAllClose(self._sequence(layer), self.hub_outputs["sequence_output"],
                          atol=1e-5, rtol=0)
      pooled = self.hub_outputs["pooled_output"]
      head = model.get_layer("logits")
      self.assertAllClose(model(self.inputs, training=False),
                          pooled @ head.kernel + head.bias, atol=1e-5)
    self.assertAllClose(self._sequence(layer), trained, atol=1e-6)

  def test_delete_adapter(self):
    """Deleting the active set activates the next; deleting the encoder's own leaves the
    base in the encoder; with no set left a call says what to do."""
    layer = self._layer()
    layer.add_adapter("b")
    layer.add_adapter("c", adapter_config.AdapterConfig(adapter_size=None,
                                                        tuning="layer_norm"))
    layer.set_adapter("b")
    layer.delete_adapter("b")
    self.assertEqual(layer.active_adapter, "default")
    for weight in layer.adapter_weights("default").values():
      weight.assign_add(tf.random.normal(weight.shape, stddev=0.1))
    layer.delete_adapter("default")
    self.assertEqual((list(layer.adapter_configs), layer.active_adapter), (["c"], "c"))
    self.assertEmpty(layer.encoder.adapters)
    self.assertAllClose(self._sequence(layer), self.hub_outputs["sequence_output"], atol=1e-5,
                        rtol=0)
    layer.delete_adapter("c")
    self.assertIsNone(layer.active_adapter)
    with self.assertRaisesRegex(ValueError, "No adapter set named None.*add_adapter"):
      layer(self.inputs)
    with self.assertRaisesRegex(ValueError, "No adapter set named 'b'"):
      layer.set_adapter("b")

  def test_add_adapter_refusals(self):
    """Duplicate or bad names, and any set that trains the shared base, are refused."""
    layer = self._layer()
    with self.assertRaisesRegex(ValueError, "exists already"):
      layer.add_adapter("default")
    with self.assertRaisesRegex(ValueError, "Adapter set names"):
      layer.add_adapter("a/b")
    with self.assertRaisesRegex(ValueError, r"\['b'\] train the base"):
      layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=None, tuning="full"))
    full = adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="full")
    with self.assertRaisesRegex(ValueError, r"\['default'\] train the base"):
      full.add_adapter("b")

  def test_drop_adapters_is_adapter_drop(self):
    """Dropping block 0's adapters equals zeroing them; the set's config leaves block 0 out;
    the layer still checkpoints and restores."""
    layer = self._layer()
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2))
    for name in ("default", "b"):
      for key, weight in layer.adapter_weights(name).items():
        dropped = key.startswith("transformer/layer_0/") and "_adapter/" in key
        weight.assign(tf.zeros_like(weight) if dropped
                      else weight + tf.random.normal(weight.shape, stddev=0.2))
    expected = {name: self._sequence(layer, adapter_name=name) for name in ("default", "b")}
    for name in ("default", "b"):
      layer.drop_adapters(range(1), adapter_name=name)
      self.assertEqual(layer.adapter_configs[name].leave_out, (0,))
      self.assertFalse([k for k in layer.adapter_weights(name) if "layer_0/attention_ad" in k])
      self.assertAllClose(self._sequence(layer, adapter_name=name), expected[name], atol=1e-6)
    self.assertLen(layer.encoder.adapters, 2)
    path = tf.train.Checkpoint(layer=layer).save(self.create_tempdir().full_path + "/ckpt")
    restored = self._layer()
    restored.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2))
    for name in ("default", "b"):
      restored.drop_adapters([0], adapter_name=name)
    tf.train.Checkpoint(layer=restored).restore(path).assert_consumed()
    self.assertAllClose(self._sequence(restored, adapter_name="b"), expected["b"], atol=1e-6)
    with self.assertRaisesRegex(ValueError, r"layers \[5\] do not exist"):
      layer.drop_adapters([5])


def _canonical_names(variables):
  return sorted(adapted_bert_encoder.canonical_variable_name(v.name) for v in variables)


def _layer_norm_names():
  """The canonical names of the base's LayerNorm variables, the embedding one included."""
  return sorted([f"embeddings/layer_norm/{w}" for w in ("gamma", "beta")] + [
      f"transformer/layer_{i}/{norm}/{w}" for i in range(_NUM_LAYERS)
      for norm in ("self_attention_layer_norm", "output_layer_norm") for w in ("gamma", "beta")])


def _move(layers, seed, scale=0.3):
  """Moves every weight of `layers` away from its initial value, as training would."""
  rng = np.random.default_rng(seed)
  for layer in layers:
    for weight in layer.weights:
      weight.assign(weight + rng.normal(scale=scale, size=weight.shape))


class MethodConfigTest(tf.test.TestCase, parameterized.TestCase):
  """AdaptedBert with a LoRA or (IA)^3 set (LoRAConfig, IA3Config) in place of adapters."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.inputs = _padded_batch()
    _, cls.hub_outputs = _hub_layer_and_outputs()
    keras.utils.set_random_seed(3)
    # Read-only models, their method layers moved as training would.
    cls.configs = dict(
        lora=lora_config.LoRAConfig(r=2, alpha=4.0, target_modules=("key", "output"),
                                    leave_out=(1,), init_weights="bert"),
        ia3=ia3_config.IA3Config())
    cls.models = {}
    for seed, (name, config) in enumerate(cls.configs.items()):
      bert = adapted_bert.AdaptedBert(cls.handle, adapter_config=config)
      _move(bert.encoder.projection_layers, seed)
      cls.models[name] = classifier.build_classifier(bert, 3)

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(11)

  @parameterized.named_parameters(
      ("lora", lora_config.LoRAConfig()),
      ("ia3", ia3_config.IA3Config()),
  )
  def test_starts_as_the_base(self, config):
    """peft's LoRA init (B zero) and (IA)^3's ones compute the Hub encoder exactly."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
    self.assertNotEmpty(layer.encoder.projection_layers)
    self.assertEmpty(layer.encoder.adapters)
    self.assertIsNone(layer.adapter_size)
    self.assertEqual(layer.adapter_configs, {"default": config})
    outputs = layer(self.inputs, training=False)
    for key in ("pooled_output", "sequence_output"):
      self.assertAllClose(outputs[key], self.hub_outputs[key], atol=1e-5, rtol=0, msg=key)

  def test_lora_trains_only_its_factors_and_the_head(self):
    """model.fit moves A and B of every LoRA layer and the head; the base's kernels and
    LayerNorms, and everything else, stay bitwise."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=lora_config.LoRAConfig(r=2))
    model = classifier.build_classifier(layer, 3)
    self.assertEqual(_canonical_names(model.trainable_variables), sorted(
        [f"transformer/layer_{i}/{target}/lora/lora_{factor}" for i in range(_NUM_LAYERS)
         for target in ("query", "value") for factor in "ab"]
        + ["logits/bias", "logits/kernel"]))
    self.assertEmpty(set(_canonical_names(model.trainable_variables)) & set(_layer_norm_names()))
    self.assert_training_changes_only_trainable_weights(model)

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_method_layers_near_the_float32_models(self, name, epsilon):
    """Built under a mixed policy, with a float32 model's moved weights, every method's
    layers (LoRA, DoRA of both variants, (IA)³; on the blocks' projections and the pooler's)
    keep float32 variables and give float32 logits near the float32 model's, in inference
    and, with dropout on, finite in training."""
    configs = dict(
        lora=lora_config.LoRAConfig(r=2, target_modules=("query", "intermediate", "pooler")),
        dora=lora_config.LoRAConfig(r=2, use_dora=True, dropout=0.1,
                                    target_modules=("value", "output", "pooler")),
        dora_adapterhub=lora_config.LoRAConfig(r=2, use_dora=True, dora_variant="adapterhub",
                                               target_modules=("key", "attention_output")),
        ia3=ia3_config.IA3Config(target_modules=("key", "output", "pooler")))
    for method, config in configs.items():
      with self.subTest(method=method):
        bert = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
        _move(bert.encoder.projection_layers, seed=0, scale=0.1)
        reference = classifier.build_classifier(bert, 3)
        with precision.policy_scope(name):
          mixed = classifier.build_classifier(
              adapted_bert.AdaptedBert(self.handle, adapter_config=config), 3)
        mixed.set_weights(reference.get_weights())
        self.assertEqual({v.dtype for v in mixed.variables}, {tf.float32})
        logits = mixed(self.inputs, training=False)
        self.assertEqual(logits.dtype, tf.float32)
        # Measured up to 0.13 epsilons.
        self.assertLess(layers_testing.mixed_precision_gap(
            logits, reference(self.inputs, training=False), epsilon), 1)
        self.assertTrue(np.isfinite(mixed(self.inputs, training=True).numpy()).all())

  @parameterized.named_parameters(("peft", "peft"), ("adapterhub", "adapterhub"))
  def test_dora_starts_as_the_base_and_trains_its_magnitudes(self, variant):
    """DoRA's magnitudes start at the base's column norms (B is zero), so the new model is
    the base; A, B and m train, and nothing of the base."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=lora_config.LoRAConfig(
        r=2, use_dora=True, dora_variant=variant, target_modules=("key", "intermediate")))
    outputs = layer(self.inputs, training=False)
    for key in ("pooled_output", "sequence_output"):
      self.assertAllClose(outputs[key], self.hub_outputs[key], atol=1e-5, rtol=0, msg=key)
    block = layer.encoder.transformer_layers[1]
    kernel, _ = block.projection_variables("key")
    self.assertAllClose(block.deltas["key"][0].magnitude,
                        np.linalg.norm(kernel.numpy().reshape(kernel.shape[0], -1), axis=0),
                        rtol=1e-6)
    model = classifier.build_classifier(layer, 3)
    self.assertEqual(_canonical_names(model.trainable_variables), sorted(
        [f"transformer/layer_{i}/{target}/lora/{weight}" for i in range(_NUM_LAYERS)
         for target in ("key", "intermediate") for weight in ("lora_a", "lora_b", "magnitude")]
        + ["logits/bias", "logits/kernel"]))
    self.assert_training_changes_only_trainable_weights(model)

  def assert_training_changes_only_trainable_weights(self, model):
    """Two steps of `fit` change every trainable weight and nothing else. (Two: LoRA's B
    starts at zero, so A only gets a gradient once B has moved.)"""
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    before = {id(v): v.numpy().copy() for v in model.weights}
    model.fit(self.inputs, tf.constant([0, 1, 2]), batch_size=3, epochs=2, verbose=0)
    trained = {id(v) for v in model.trainable_variables}
    for variable in model.weights:
      changed = not np.array_equal(variable.numpy(), before[id(variable)])
      self.assertEqual(changed, id(variable) in trained, msg=variable.name)

  @parameterized.named_parameters(
      ("lora", lora_config.LoRAConfig(r=2, train_layer_norms=True), 2 * 2 * _NUM_LAYERS),
      ("ia3", ia3_config.IA3Config(train_layer_norms=True), 3 * _NUM_LAYERS),
  )
  def test_train_layer_norms(self, config, method_weights):
    """With train_layer_norms the base's LayerNorms train beside the method's layers."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
    names = _canonical_names(layer.trainable_weights)
    self.assertContainsSubset(_layer_norm_names(), names)
    self.assertLen(names, len(_layer_norm_names()) + method_weights)
    self.assertEmpty([n for n in names if n.endswith("/kernel") or "embeddings/embeddings" in n])

  def test_ia3_trains_only_its_scales(self):
    names = _canonical_names(self.models["ia3"].trainable_variables)
    self.assertEqual(names, sorted(
        [f"transformer/layer_{i}/{target}/ia3/scale" for i in range(_NUM_LAYERS)
         for target in ("key", "value", "output")] + ["logits/bias", "logits/kernel"]))

  def test_leave_out_leaves_those_layers_without_lora(self):
    """Block 1 is left out: block 0 has LoRA on key and output, block 1 computes as the base
    on block 0's output; disable_adapter gives the Hub encoder."""
    layer = saving.the_adapted_bert(self.models["lora"])
    blocks = layer.encoder.transformer_layers
    self.assertEqual([(l.target, l.rank) for l in blocks[0].projection_layers],
                     [("key", 2), ("output", 2)])
    self.assertEmpty(blocks[1].projection_layers)
    outputs = layer(self.inputs, training=False)
    self.assertNotAllClose(outputs["encoder_outputs"][0], self.hub_outputs["encoder_outputs"][0],
                           atol=1e-3)
    # Block 1 alone, without LoRA, on block 0's output.
    mask = tf.cast(self.inputs["input_mask"][:, tf.newaxis, :], tf.bool)
    self.assertAllClose(blocks[1](outputs["encoder_outputs"][0], attention_mask=mask,
                                  training=False),
                        outputs["encoder_outputs"][1], atol=1e-6)
    with layer.disable_adapter():
      plain = layer(self.inputs, training=False)
    self.assertAllClose(plain["sequence_output"], self.hub_outputs["sequence_output"], atol=1e-5,
                        rtol=0)
    self.assertEqual(sorted(k for k in layer.adapter_weights() if "/lora/" in k), [
        "transformer/layer_0/key/lora/lora_a", "transformer/layer_0/key/lora/lora_b",
        "transformer/layer_0/output/lora/lora_a", "transformer/layer_0/output/lora/lora_b"])

  @parameterized.named_parameters(("lora", "lora"), ("ia3", "ia3"))
  def test_config_round_trip(self, name):
    """get_config records the method's config (and no bottleneck arguments); from_config
    and keras' deserialize rebuild a layer of the same config and weights that, given the
    same values, computes the same outputs."""
    layer = saving.the_adapted_bert(self.models[name])
    config = layer.get_config()
    self.assertEqual(config["adapter_config"], self.configs[name].to_dict())
    self.assertEmpty([key for key in ("adapter_size", "tuning", "top_k") if key in config])
    expected = layer(self.inputs, training=False)["pooled_output"]
    for rebuilt in (adapted_bert.AdaptedBert.from_config(config),
                    keras.layers.deserialize(keras.layers.serialize(layer))):
      self.assertEqual(rebuilt.adapter_config, self.configs[name])
      self.assertEqual(rebuilt.get_config(), config)
      self.assertEqual([v.name for v in rebuilt.weights], [v.name for v in layer.weights])
      self.assertEqual([v.name for v in rebuilt.trainable_weights],
                       [v.name for v in layer.trainable_weights])
      rebuilt.set_weights(layer.get_weights())
      self.assertAllClose(rebuilt(self.inputs, training=False)["pooled_output"], expected,
                          atol=1e-6)

  @parameterized.named_parameters(("lora", "lora"), ("ia3", "ia3"))
  def test_artifact_round_trip(self, name):
    """save_adapters stores the method's weights, its config and the head; load_task_model
    rebuilds the task with the same logits."""
    model = self.models[name]
    path = saving.save_adapters(model, os.path.join(self.create_tempdir().full_path, name),
                                label_names=("a", "b", "c"))
    rebuilt = saving.load_task_model(path)
    self.assertAllClose(rebuilt(self.inputs, training=False), model(self.inputs, training=False),
                        atol=1e-6)
    bert = saving.the_adapted_bert(rebuilt)
    self.assertEqual(bert.adapter_config, self.configs[name])
    self.assertEqual(rebuilt.head_config.label_names, ("a", "b", "c"))
    for key, variable in saving.task_variables(model).items():
      self.assertAllEqual(saving.task_variables(rebuilt)[key], variable, msg=key)

  def test_set_configs_read_from_their_dicts(self):
    """A dict (an artifact's, get_config's) becomes the config its "method" names, or an
    AdapterConfig when it names none; an unknown method or field is refused naming it."""
    for config in (lora_config.LoRAConfig(r=4, target_modules=("key",)),
                   ia3_config.IA3Config(leave_out=(1,)),
                   adapter_config.AdapterConfig(adapter_size=8)):
      values = json.loads(json.dumps(config.to_dict()))
      self.assertEqual(adapter_config.config_from_dict(values), config)
      self.assertEqual(adapter_config.check_set_config(values), config)
      self.assertIs(adapter_config.check_set_config(config), config)
    with self.assertRaisesRegex(ValueError, r"Unknown method 'vera'; known: \[.*'lora'.*\]\. "
                                "The adapter set config .* names no method"):
      adapter_config.config_from_dict(dict(method="vera", r=4))
    with self.assertRaisesRegex(ValueError, r"Unknown LoRAConfig fields \['rank'\]"):
      adapter_config.config_from_dict(dict(method="lora", rank=4))
    with self.assertRaisesRegex(ValueError, "Unknown method 'vera'"):
      adapted_bert.AdaptedBert(self.handle, adapter_config=dict(method="vera"))

  def test_sets_of_two_kinds_on_one_base_are_refused(self):
    """A LoRA or (IA)^3 set shares its base with no other set (yet); a list of configs
    (AdapterHub's ConfigUnion) is refused naming what is accepted."""
    lora = saving.the_adapted_bert(self.models["lora"])
    for config in (lora_config.LoRAConfig(), ia3_config.IA3Config(), None):
      with self.assertRaisesRegex(ValueError, r"add_adapter\('b'\).*cannot yet share a base"):
        lora.add_adapter("b", config)
    self.assertEqual(list(lora.adapter_configs), ["default"])
    bottleneck = adapted_bert.AdaptedBert(self.handle, adapter_size=2)
    with self.assertRaisesRegex(ValueError, "cannot yet share a base"):
      bottleneck.add_adapter("b", lora_config.LoRAConfig())
    with self.assertRaisesRegex(ValueError, "config is one of AdapterConfig, .*LoRAConfig.*not "
                                "supported yet"):
      adapted_bert.AdaptedBert(self.handle, adapter_config=[
          adapter_config.AdapterConfig(), lora_config.LoRAConfig()])
    with self.assertRaisesRegex(ValueError, r"leave_out=\[2\]"):
      adapted_bert.AdaptedBert(self.handle, adapter_config=lora_config.LoRAConfig(leave_out=(2,)))
    with self.assertRaisesRegex(ValueError, r"conflicting arguments \{'tuning': 'full'\}"):
      adapted_bert.AdaptedBert(self.handle, tuning="full", adapter_config=ia3_config.IA3Config())

  def test_drop_adapters_drops_lora_from_those_blocks(self):
    """AdapterDrop on a LoRA set removes its layers from the blocks dropped, as its config
    then says: block 0 computes as the base, and the artifact rebuilds the dropped model."""
    layer = adapted_bert.AdaptedBert(
        self.handle, adapter_config=lora_config.LoRAConfig(init_weights="bert"))
    model = classifier.build_classifier(layer, 2)
    _move(layer.encoder.projection_layers, 5)
    layer.drop_adapters([0])
    self.assertEqual(layer.adapter_config.leave_out, ())  # The layer's own argument stays.
    self.assertEqual(layer.adapter_configs["default"].leave_out, (0,))
    self.assertEmpty(layer.encoder.transformer_layers[0].projection_layers)
    self.assertLen(layer.encoder.projection_layers, 2)
    outputs = layer(self.inputs, training=False)
    self.assertAllClose(outputs["encoder_outputs"][0], self.hub_outputs["encoder_outputs"][0],
                        atol=1e-5, rtol=0)
    self.assertNotAllClose(outputs["sequence_output"], self.hub_outputs["sequence_output"],
                           atol=1e-3)
    path = saving.save_adapters(model, os.path.join(self.create_tempdir().full_path, "dropped"))
    self.assertAllClose(saving.load_task_model(path)(self.inputs, training=False),
                        model(self.inputs, training=False), atol=1e-6)

  def test_delete_adapter_removes_the_method_s_layers(self):
    """Deleting a LoRA set leaves the plain base: a set added afterwards computes on it, and
    nothing of the deleted set is merged into the base."""
    layer = adapted_bert.AdaptedBert(
        self.handle, adapter_config=lora_config.LoRAConfig(init_weights="bert"))
    _move(layer.encoder.projection_layers, 6)
    layer.delete_adapter("default")
    self.assertEmpty(layer.encoder.projection_layers)
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2, init_stddev=0.0))
    layer.train_adapter("b")
    model = classifier.build_classifier(layer, 2)
    self.assertEmpty([v.name for v in model.trainable_variables if "/lora/" in v.name])
    self.assertAllClose(layer(self.inputs, training=False)["sequence_output"],
                        self.hub_outputs["sequence_output"], atol=1e-5, rtol=0)
    self.assertEqual(merging.merge(model), 0)


if __name__ == "__main__":
  tf.test.main()

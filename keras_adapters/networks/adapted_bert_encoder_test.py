"""Tests for the BERT encoder network with Houlsby adapters, called with its own adapters and
LayerNorms, another set's (`AdapterSet`) or several tasks' routed per example
(`StackedAdapters`)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import adapter_set
from keras_adapters.layers import testing
from keras_adapters.methods.lora import config as lora_config
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision

_TINY = dict(vocab_size=64, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_sequence_length=32, type_vocab_size=2)


def _encoder(**kwargs):
  config = dict(_TINY, adapter_size=4, name="bert_encoder")
  config.update(kwargs)
  return adapted_bert_encoder.AdaptedBertEncoder(**config)


def _inputs(batch_size=2, seq_length=6, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(1, _TINY["vocab_size"], size=[batch_size, seq_length])
  lengths = np.maximum(seq_length - np.arange(batch_size) * 2, 1)
  mask = (np.arange(seq_length)[np.newaxis] < lengths[:, np.newaxis]).astype(np.int32)
  type_ids = (np.arange(seq_length)[np.newaxis] >= seq_length // 2).astype(np.int32) * mask
  return dict(input_word_ids=tf.constant(ids * mask, tf.int32),
              input_mask=tf.constant(mask, tf.int32),
              input_type_ids=tf.constant(type_ids, tf.int32))


def _model_garden_names(num_layers):
  names = {"word_embeddings/embeddings", "position_embedding/embeddings",
           "type_embeddings/embeddings", "embeddings/layer_norm/gamma",
           "embeddings/layer_norm/beta", "pooler_transform/kernel", "pooler_transform/bias"}
  for i in range(num_layers):
    prefix = f"transformer/layer_{i}/"
    for part in ("query", "key", "value", "attention_output"):
      names |= {f"{prefix}self_attention/{part}/kernel", f"{prefix}self_attention/{part}/bias"}
    for dense in ("intermediate", "output"):
      names |= {f"{prefix}{dense}/kernel", f"{prefix}{dense}/bias"}
    for norm in ("self_attention_layer_norm", "output_layer_norm"):
      names |= {f"{prefix}{norm}/gamma", f"{prefix}{norm}/beta"}
  return names


class AdaptedBertEncoderTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    keras.utils.set_random_seed(7)
    # One built encoder for the tests that only read it.
    cls.shared_encoder = _encoder()
    cls.shared_encoder(_inputs())

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(7)

  def test_output_keys_and_shapes(self):
    """Outputs are the TF Hub BERT dict, with the shapes of a [2, 6] batch."""
    outputs = self.shared_encoder(_inputs())
    self.assertCountEqual(
        outputs, ["sequence_output", "pooled_output", "encoder_outputs", "default"])
    self.assertEqual(outputs["sequence_output"].shape, tf.TensorShape([2, 6, 16]))
    self.assertEqual(outputs["pooled_output"].shape, tf.TensorShape([2, 16]))
    self.assertLen(outputs["encoder_outputs"], _TINY["num_layers"])
    for layer_output in outputs["encoder_outputs"]:
      self.assertEqual(layer_output.shape, tf.TensorShape([2, 6, 16]))
    self.assertAllEqual(outputs["encoder_outputs"][-1], outputs["sequence_output"])
    self.assertAllEqual(outputs["default"], outputs["pooled_output"])

  def test_pooled_output_is_tanh_projection_of_first_token(self):
    """pooled_output = tanh(W sequence_output[:, 0] + b)."""
    encoder = self.shared_encoder
    outputs = encoder(_inputs())
    kernel = encoder.pooler_transform.kernel.numpy()
    bias = encoder.pooler_transform.bias.numpy()
    expected = np.tanh(outputs["sequence_output"].numpy()[:, 0] @ kernel + bias)
    self.assertAllClose(outputs["pooled_output"], expected, atol=1e-5)

  def test_hub_variable_map_has_exactly_model_garden_names(self):
    """hub_variable_map() keys are exactly the Model Garden names, adapters excluded."""
    encoder = _encoder()
    self.assertFalse(encoder.built)
    variable_map = encoder.hub_variable_map()  # Builds the encoder on dummy inputs.
    self.assertTrue(encoder.built)
    self.assertEqual(set(variable_map), _model_garden_names(_TINY["num_layers"]))
    adapter_ids = {id(w) for a in encoder.adapters for w in a.weights}
    self.assertLen(adapter_ids, 4 * 2 * _TINY["num_layers"])
    self.assertFalse(adapter_ids & {id(w) for w in variable_map.values()})
    self.assertFalse(any("adapter" in name for name in variable_map))
    self.assertLen(variable_map, len(encoder.weights) - len(adapter_ids))

  def test_hub_variable_map_shapes(self):
    """Spot-checked Model Garden variables have the Model Garden shapes."""
    variable_map = self.shared_encoder.hub_variable_map()
    for name, shape in (
        ("transformer/layer_1/self_attention/attention_output/kernel", (2, 8, 16)),
        ("transformer/layer_0/self_attention/query/kernel", (16, 2, 8)),
        ("transformer/layer_1/intermediate/kernel", (16, 32)),
        ("transformer/layer_0/output/kernel", (32, 16)),
        ("embeddings/layer_norm/gamma", (16,)),
        ("pooler_transform/kernel", (16, 16)),
        ("word_embeddings/embeddings", (64, 16)),
        ("position_embedding/embeddings", (32, 16)),
        ("type_embeddings/embeddings", (2, 16))):
      with self.subTest(name=name):
        self.assertIn(name, variable_map)
        self.assertEqual(tuple(variable_map[name].shape), shape)

  def test_hub_variable_map_points_at_the_right_sublayers(self):
    """Mapped names lead to the variables of the sub-layers they name."""
    encoder = self.shared_encoder
    variable_map = encoder.hub_variable_map()
    block = encoder.transformer_layers[1]
    self.assertIs(variable_map["transformer/layer_1/output_layer_norm/gamma"],
                  block.output_layer_norm.gamma)
    self.assertIs(variable_map["transformer/layer_1/output/kernel"], block.output_dense.kernel)
    self.assertIs(variable_map["embeddings/layer_norm/beta"],
                  encoder.embedding_layer_norm.beta)
    self.assertIs(variable_map["pooler_transform/bias"], encoder.pooler_transform.bias)

  @parameterized.named_parameters(
      ("keras_model_prefix", "model/bert_encoder/transformer/layer_3/output/kernel:0",
       "transformer/layer_3/output/kernel"),
      ("hub_prefix", "bert_encoder/word_embeddings/embeddings:0",
       "word_embeddings/embeddings"),
      ("embedding_layer_norm", "x/y/embeddings/layer_norm/gamma:0",
       "embeddings/layer_norm/gamma"),
      ("pooler", "classifier/bert_encoder/pooler_transform/bias:0", "pooler_transform/bias"),
      ("already_canonical", "transformer/layer_10/self_attention/query/bias",
       "transformer/layer_10/self_attention/query/bias"),
      ("adapter", "bert_encoder/transformer/layer_0/feedforward_adapter/up_project/bias:0",
       "transformer/layer_0/feedforward_adapter/up_project/bias"),
      ("no_root", "logits/kernel:0", "logits/kernel"),
      ("no_root_no_suffix", "some/other_variable", "some/other_variable"),
  )
  def test_canonical_variable_name(self, name, expected):
    """Scopes before the first Model Garden root and the ':0' suffix are removed."""
    self.assertEqual(adapted_bert_encoder.canonical_variable_name(name), expected)

  def test_adapters_and_layer_norms(self):
    """There are 2 adapters per block and 2 LayerNorms per block plus the embedding one."""
    for num_layers, encoder in ((2, self.shared_encoder),
                                (3, _encoder(num_layers=3, adapter_size=None))):
      with self.subTest(num_layers=num_layers):
        encoder(_inputs())
        norms = encoder.layer_norms
        self.assertLen(norms, 2 * num_layers + 1)
        self.assertLen({id(n) for n in norms}, 2 * num_layers + 1)
        self.assertIs(norms[0], encoder.embedding_layer_norm)
        for norm in norms:
          self.assertIsInstance(norm, keras.layers.LayerNormalization)
    adapters = self.shared_encoder.adapters
    self.assertLen(adapters, 2 * _TINY["num_layers"])
    self.assertLen({id(a) for a in adapters}, 2 * _TINY["num_layers"])
    for adapter in adapters:
      self.assertIsInstance(adapter, adapter_lib.Adapter)
    self.assertEqual(adapters[0].name, "attention_adapter")
    self.assertIs(adapters[-1], self.shared_encoder.transformer_layers[-1].feedforward_adapter)
    self.assertEmpty(encoder.adapters)  # The encoder built without adapters.

  def test_adapter_leave_out_blocks_have_no_adapters(self):
    """Blocks in adapter_leave_out get no adapters; the others keep theirs."""
    encoder = _encoder(num_layers=3, adapter_leave_out=(0, 2))
    encoder(_inputs())
    self.assertEqual([len(block.adapters) for block in encoder.transformer_layers], [0, 2, 0])
    self.assertEqual(encoder.get_config()["adapter_leave_out"], (0, 2))

  def test_masked_mean_averages_real_tokens(self):
    sequence = tf.constant([[[1.0], [3.0], [100.0]], [[2.0], [0.0], [0.0]]])
    mask = tf.constant([[1, 1, 0], [0, 0, 0]])
    self.assertAllClose(adapted_bert_encoder.masked_mean(sequence, mask), [[2.0], [0.0]])

  def test_padding_does_not_change_unpadded_outputs(self):
    """Changing the word ids at padded positions leaves every unpadded output unchanged."""
    encoder = self.shared_encoder
    inputs = _inputs(batch_size=2, seq_length=6)
    mask = inputs["input_mask"].numpy()
    self.assertEqual(mask.sum(axis=1).tolist(), [6, 4])
    ids = inputs["input_word_ids"].numpy()
    changed_ids = np.where(mask == 1, ids, (ids + 17) % _TINY["vocab_size"] + 1)
    self.assertFalse(np.array_equal(ids, changed_ids))
    before = encoder(inputs)
    after = encoder(dict(inputs, input_word_ids=tf.constant(changed_ids, tf.int32)))
    self.assertAllClose(before["sequence_output"].numpy()[mask == 1],
                        after["sequence_output"].numpy()[mask == 1], atol=1e-5)
    self.assertAllClose(before["pooled_output"], after["pooled_output"], atol=1e-5)
    # The mask matters: without it, the same change moves the outputs.
    unmasked = dict(inputs, input_mask=tf.ones_like(inputs["input_mask"]))
    self.assertNotAllClose(
        encoder(unmasked)["pooled_output"][1],
        encoder(dict(unmasked, input_word_ids=tf.constant(changed_ids, tf.int32)))[
            "pooled_output"][1])

  def test_dropout_only_when_training(self):
    """training=True applies dropout (calls differ); inference is deterministic."""
    encoder = self.shared_encoder
    self.assertEqual(encoder.dropout_rate, 0.1)
    inputs = _inputs()
    inference = encoder(inputs, training=False)["sequence_output"]
    self.assertAllEqual(encoder(inputs)["sequence_output"], inference)
    self.assertNotAllClose(encoder(inputs, training=True)["sequence_output"],
                           encoder(inputs, training=True)["sequence_output"])

  def test_missing_input_key_raises(self):
    """A dict without all three BERT inputs is a ValueError naming the expected keys."""
    inputs = _inputs()
    del inputs["input_type_ids"]
    with self.assertRaisesRegex(
        ValueError, r"input_word_ids.*input_mask.*input_type_ids.*got \['input_mask', "
        r"'input_word_ids'\]"):
      self.shared_encoder(inputs)

  def test_non_dict_input_raises(self):
    """A bare tensor instead of the dict is a ValueError naming the expected keys."""
    with self.assertRaisesRegex(ValueError, "input_word_ids"):
      self.shared_encoder(tf.ones([2, 3], tf.int32))

  def test_float_ids_raise_type_error(self):
    """Float word ids are a TypeError naming the input and the dtype."""
    inputs = _inputs()
    inputs["input_word_ids"] = tf.cast(inputs["input_word_ids"], tf.float32)
    with self.assertRaisesRegex(TypeError, r"input_word_ids.*float32"):
      self.shared_encoder(inputs)

  def test_int64_ids_are_accepted(self):
    """int64 ids are cast to int32 and give the same outputs."""
    encoder = self.shared_encoder
    inputs = _inputs()
    int64_inputs = {k: tf.cast(v, tf.int64) for k, v in inputs.items()}
    self.assertAllClose(encoder(int64_inputs)["pooled_output"],
                        encoder(inputs)["pooled_output"])

  def test_rank3_ids_raise(self):
    """Ids of rank 3 are a ValueError naming the expected [batch, seq_length] shape."""
    inputs = {k: v[:, :, tf.newaxis] for k, v in _inputs().items()}
    with self.assertRaisesRegex(ValueError, r"input_word_ids.*\[batch, seq_length\]"):
      self.shared_encoder(inputs)

  def test_too_long_sequence_raises(self):
    """A sequence longer than max_sequence_length fails, naming the position embeddings."""
    encoder = _encoder(max_sequence_length=8)
    encoder(_inputs(seq_length=8))  # The longest allowed length works.
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "position embeddings"):
      encoder(_inputs(seq_length=9))

  def test_too_long_sequence_raises_in_tf_function(self):
    """The length check also runs inside a traced function with a dynamic length."""
    encoder = _encoder(max_sequence_length=8)
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[dict(input_word_ids=spec, input_mask=spec,
                                       input_type_ids=spec)])
    def run(inputs):
      return encoder(inputs)["pooled_output"]

    self.assertEqual(run(_inputs(seq_length=4)).shape, tf.TensorShape([2, 16]))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "position embeddings"):
      run(_inputs(seq_length=9))

  def test_layer_contract(self):
    """Every argument set away from its default: weights made by build, config round trip,
    registered serialization (rebuilt encoders compute the same), the TF Hub output dict's
    shapes, gradients for every weight; a rebuilt encoder maps the same Hub variables."""
    arguments = dict(
        _TINY, max_sequence_length=16, type_vocab_size=3, embedding_width=8,
        activation="gelu_approximate", dropout_rate=0.2, attention_dropout_rate=0.05,
        recompute_attention="always",
        layer_norm_epsilon=1e-6, adapter_size=4, adapter_activation="tanh",
        adapter_init_stddev=0.1, adapter_leave_out=(0,),
        adapter_options=testing.PLACEMENT_VARIANTS["pfeiffer"], name="bert_encoder")
    encoder = testing.run_layer_test(
        self, adapted_bert_encoder.AdaptedBertEncoder, arguments, _inputs(),
        expected_output_shape=dict(sequence_output=(2, 6, 16), pooled_output=(2, 16),
                                   encoder_outputs=[(2, 6, 16)] * 2, default=(2, 16)),
        # Embeddings 3, their LayerNorm 2, projection 2, two blocks of 16, the one adapter
        # (after the feed-forward of block 1) 4, pooler 2.
        expected_num_trainable_weights=3 + 2 + 2 + 2 * 16 + 4 + 2,
        expected_num_non_trainable_weights=0)
    rebuilt = adapted_bert_encoder.AdaptedBertEncoder.from_config(encoder.get_config())
    rebuilt(_inputs())
    self.assertEqual(rebuilt.count_params(), encoder.count_params())
    self.assertEqual(set(rebuilt.hub_variable_map()), set(encoder.hub_variable_map()))

  def test_the_hub_map_builds_every_weight_as_a_first_call_would(self):
    """`hub_variable_map` builds an encoder without running it: the weights of a first call
    (embedding projection, adapters and LoRA on the blocks and the pooler included), in its
    order, under its names and, seeded alike, with its values; a call then adds none."""
    deltas = lora_config.LoRAConfig(
        r=2, init_weights="gaussian", target_modules=("query", "output", "pooler")).delta_specs()
    encoders = {}
    for build, make_weights in (("mapped", lambda encoder: encoder.hub_variable_map()),
                                ("called", lambda encoder: encoder(_inputs()))):
      encoders[build] = _encoder(embedding_width=8, projection_deltas=deltas, name=build)
      keras.utils.set_random_seed(1)
      make_weights(encoders[build])
    mapped, called = encoders["mapped"].weights, encoders["called"].weights
    self.assertEqual([w.name.replace("mapped/", "", 1) for w in mapped],
                     [w.name.replace("called/", "", 1) for w in called])
    for mapped_weight, called_weight in zip(mapped, called):
      self.assertAllEqual(mapped_weight, called_weight, msg=mapped_weight.name)
    encoders["mapped"](_inputs())
    self.assertLen(encoders["mapped"].weights, len(mapped))

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_outputs_are_float32(self, name, epsilon):
    """Made under a mixed policy, the encoder (embedding projection and adapters included)
    keeps float32 variables, computes every sub-layer in the policy's dtype but the LayerNorms
    and the pooler, returns float32 outputs, and stays near the float32 encoder."""
    reference = _encoder(embedding_width=8, dropout_rate=0.0)
    reference(_inputs())
    rng = np.random.RandomState(0)
    for weight in reference.weights:
      weight.assign(rng.normal(scale=0.3, size=weight.shape))
    with precision.policy_scope(name):
      mixed = _encoder(embedding_width=8, dropout_rate=0.0)
    mixed(_inputs())
    mixed.set_weights(reference.get_weights())
    self.assertEqual({w.dtype for w in mixed.weights}, {tf.float32})
    float32_layers = set(mixed.layer_norms + [mixed.pooler_transform])
    layers = [m for m in mixed.submodules if isinstance(m, keras.layers.Layer)]
    self.assertEqual({layer.compute_dtype for layer in layers if layer not in float32_layers},
                     {name})
    self.assertEqual({layer.compute_dtype for layer in float32_layers}, {"float32"})
    outputs, expected = mixed(_inputs()), reference(_inputs())
    for key in ("sequence_output", "pooled_output", "default"):
      self.assertEqual(outputs[key].dtype, tf.float32)
      # Measured up to 1.1 epsilons.
      self.assertLess(testing.mixed_precision_gap(outputs[key], expected[key], epsilon), 3)
    self.assertEqual({output.dtype for output in outputs["encoder_outputs"]}, {tf.float32})

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_a_float32_encoder_ignores_a_mixed_global_policy(self, name, epsilon):
    """`dtype="float32"` reaches every sub-layer: under a mixed global policy the encoder
    computes exactly what it computes under float32 (what the Hub parity probe relies on)."""
    del epsilon  # Nothing is rounded.
    reference = _encoder(embedding_width=8)
    reference(_inputs())
    with precision.policy_scope(name):
      encoder = _encoder(embedding_width=8, dtype="float32")
      encoder(_inputs())
      encoder.set_weights(reference.get_weights())
      self.assertEqual({m.compute_dtype for m in encoder.submodules
                        if isinstance(m, keras.layers.Layer)}, {"float32"})
      self.assertAllEqual(encoder(_inputs())["sequence_output"],
                          reference(_inputs())["sequence_output"])

  def test_bert_base_parameter_arithmetic(self):
    """BERT-base with m=64: each adapter 99,136 params, all 24 together 2,379,264."""
    encoder = adapted_bert_encoder.AdaptedBertEncoder(
        vocab_size=30522, hidden_size=768, num_layers=12, num_attention_heads=12,
        intermediate_size=3072, adapter_size=64)
    encoder(adapted_bert_encoder.dummy_inputs())
    self.assertLen(encoder.adapters, 24)
    sizes = [adapter.count_params() for adapter in encoder.adapters]
    self.assertEqual(sizes, [2 * 64 * 768 + 768 + 64] * 24)
    self.assertEqual(sizes[0], 99_136)
    self.assertEqual(sum(sizes), 2_379_264)
    # The base (every weight but the adapters') is BERT-base with its pooler: 109,482,240
    # parameters.
    self.assertEqual(sum(int(np.prod(w.shape)) for w in encoder.hub_variable_map().values()),
                     109_482_240)
    self.assertEqual(encoder.count_params(), 109_482_240 + 2_379_264)


class AdapterSetCallTest(tf.test.TestCase, parameterized.TestCase):
  """The encoder called with an `AdapterSet` in place of its own adapters and LayerNorms."""

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(5)

  def test_keys_match_the_encoders_own(self):
    """One set's weights have the keys of the encoder's own adapters and LayerNorms, which
    are their Model Garden variable names."""
    encoder = _encoder()
    encoder(_inputs())
    own = adapter_set.adapter_weights_by_key(encoder.own_adapters())
    self.assertEqual(set(own), {adapted_bert_encoder.canonical_variable_name(w.name)
                                for w in encoder.weights
                                if "_adapter/" in w.name or "layer_norm/" in w.name})
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    weights = adapter_set.adapter_weights_by_key(layer.encoder_adapters())
    self.assertEqual(set(weights), set(own))
    self.assertEqual({k: tuple(w.shape) for k, w in weights.items()},
                     {k: tuple(w.shape) for k, w in own.items()})

  def test_encoder_call_with_a_set_equal_to_its_own_gives_the_same_outputs(self):
    """An encoder called with a set holding a copy of its own weights computes the same."""
    encoder = _encoder(dropout_rate=0.0)
    encoder(_inputs())
    own = adapter_set.adapter_weights_by_key(encoder.own_adapters())
    rng = np.random.RandomState(0)
    for weight in own.values():
      weight.assign(rng.normal(scale=0.3, size=weight.shape))
    layer = adapter_set.AdapterSet(num_layers=2, adapter_size=4)
    layer.build((None, None, 16))
    for key, weight in adapter_set.adapter_weights_by_key(layer.encoder_adapters()).items():
      weight.assign(own[key])
    expected = encoder(_inputs())["sequence_output"]
    self.assertAllClose(encoder(_inputs(), adapters=layer.encoder_adapters())["sequence_output"],
                        expected, atol=1e-6)
    for weight in own.values():
      weight.assign(tf.zeros_like(weight))
    self.assertNotAllClose(encoder(_inputs())["sequence_output"], expected)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_set_in_a_mixed_encoder(self, name, epsilon):
    """Made under a mixed policy, a set keeps float32 variables, its adapters compute in the
    policy's dtype and its LayerNorms in float32; a mixed encoder called with it returns
    float32 near what the float32 encoder returns with the same weights."""
    encoder = _encoder(adapter_size=None, dropout_rate=0.0)
    encoder(_inputs())
    layer = testing.random_adapter_set(0, adapter_size=4)
    with precision.policy_scope(name):
      mixed_encoder = _encoder(adapter_size=None, dropout_rate=0.0)
      mixed_layer = testing.random_adapter_set(1, adapter_size=4)
    mixed_encoder(_inputs())
    mixed_encoder.set_weights(encoder.get_weights())
    mixed_layer.set_weights(layer.get_weights())
    self.assertEqual({w.dtype for w in mixed_layer.weights}, {tf.float32})
    adapters = mixed_layer.encoder_adapters()
    self.assertEqual(adapters.blocks[1].feedforward_adapter.compute_dtype, name)
    self.assertEqual(adapters.blocks[1].output_layer_norm.compute_dtype, "float32")
    expected = encoder(_inputs(), adapters=layer.encoder_adapters())
    outputs = mixed_encoder(_inputs(), adapters=adapters)
    for key in ("sequence_output", "pooled_output"):
      self.assertEqual(outputs[key].dtype, tf.float32)
      # Two blocks of one rounding per product: measured up to 0.65 epsilons.
      self.assertLess(testing.mixed_precision_gap(outputs[key], expected[key], epsilon), 3)


class TaskRoutingCallTest(tf.test.TestCase, parameterized.TestCase):
  """The encoder called with several tasks' `StackedAdapters`, routed per example."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    keras.utils.set_random_seed(3)
    cls.encoder = _encoder(adapter_size=None, dropout_rate=0.0)
    cls.encoder(_inputs())
    cls.sets = testing.routed_adapter_sets()
    cls.stacked = testing.stacked_adapter_sets(cls.sets)

  def test_mixed_batch_equals_each_task_on_its_own(self):
    """Per-example routing gives every row what its own task's set gives it, to 1e-5."""
    inputs = _inputs(batch_size=5, seq_length=7)
    task_ids = tf.constant([2, 0, 1, 0, 2])
    routed = self.encoder(inputs, adapters=self.stacked.encoder_adapters(task_ids))
    for task, layer in enumerate(self.sets):
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      one_task = self.encoder(inputs, adapters=self.stacked.encoder_adapters(task))
      rows = np.flatnonzero(task_ids.numpy() == task)
      for key in ("sequence_output", "pooled_output"):
        self.assertAllClose(tf.gather(routed[key], rows), tf.gather(alone[key], rows),
                            atol=1e-5, rtol=0, msg=f"{key} of task {task}")
        self.assertAllClose(one_task[key], alone[key], atol=1e-5, rtol=0)

  @parameterized.named_parameters(*testing.MIXED_PRECISIONS)
  def test_mixed_precision_encoder_routes_in_float32(self, name, epsilon):
    """A mixed-precision encoder routed through the stacked (float32) tasks returns float32,
    every row near what the float32 encoder gives it with its own task's set."""
    with precision.policy_scope(name):
      mixed_encoder = _encoder(adapter_size=None, dropout_rate=0.0)
    mixed_encoder(_inputs())
    mixed_encoder.set_weights(self.encoder.get_weights())
    inputs = _inputs(batch_size=5, seq_length=7)
    task_ids = tf.constant([2, 0, 1, 0, 2])
    routed = mixed_encoder(inputs, adapters=self.stacked.encoder_adapters(task_ids))
    for task, layer in enumerate(self.sets):
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      rows = np.flatnonzero(task_ids.numpy() == task)
      for key in ("sequence_output", "pooled_output"):
        self.assertEqual(routed[key].dtype, tf.float32)
        # Measured up to 0.74 epsilons.
        self.assertLess(testing.mixed_precision_gap(
            tf.gather(routed[key], rows), tf.gather(alone[key], rows), epsilon), 3)

  def test_tasks_of_every_placement_route_exactly_in_one_batch(self):
    """A task per AdapterHub placement (some with a block left out), and tasks with the same
    placement but no attention adapters or none at all: a batch mixing them answers every
    row as its task's own set does."""
    options = list(testing.PLACEMENT_VARIANTS.values())
    options += [dict(options[3], mh_adapter=False), options[3]]
    sets = [testing.random_adapter_set(4 + i, adapter_size=2 + i % 3, leave_out=(i % 2,),
                                       adapter_options=task_options)
            for i, task_options in enumerate(options)]
    sets.append(testing.random_adapter_set(20))  # No adapters.
    options.append(None)
    stacked = testing.stacked_adapter_sets(sets, adapter_options=options)
    task_ids = np.arange(len(sets))[::-1] % len(sets)
    inputs = _inputs(batch_size=len(sets), seq_length=2 * len(sets))
    routed = self.encoder(inputs, adapters=stacked.encoder_adapters(tf.constant(task_ids)))
    for task, layer in enumerate(sets):
      row = int(np.flatnonzero(task_ids == task)[0])
      alone = self.encoder(inputs, adapters=layer.encoder_adapters())
      self.assertAllClose(routed["sequence_output"][row], alone["sequence_output"][row],
                          atol=1e-5, rtol=0, msg=f"task {task}: {options[task]}")
      one_task = self.encoder(inputs, adapters=stacked.encoder_adapters(task))
      self.assertAllClose(one_task["sequence_output"], alone["sequence_output"], atol=1e-5,
                          rtol=0, msg=f"task {task} alone")


if __name__ == "__main__":
  tf.test.main()

"""Tests for the tuning policies: which encoder variables train under each."""


from absl.testing import parameterized
import tensorflow as tf

from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import tuning
from keras_adapters.networks import adapted_bert_encoder

_NUM_LAYERS = testing.TINY_CONFIG["num_layers"]


def _names(variables):
  return {adapted_bert_encoder.canonical_variable_name(v.name) for v in variables}


def _is_adapter(name):
  return "_adapter/" in name


def _is_layer_norm(name):
  return "layer_norm/" in name


def _in_block(name, index):
  return name.startswith(f"transformer/layer_{index}/")


class TuningTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()

  def _assert_trains_exactly(self, layer, predicate):
    names = _names(layer.weights)
    expected = {name for name in names if predicate(name)}
    self.assertNotEmpty(expected)
    self.assertEqual(_names(layer.trainable_weights), expected)
    self.assertEqual(_names(layer.non_trainable_weights), names - expected)
    self.assertLen(layer.trainable_weights, len(expected))

  def test_adapters_policy_trains_adapters_and_every_layer_norm(self):
    """'adapters': all adapters + every LayerNorm (embedding one included), nothing else."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, tuning="adapters")
    self._assert_trains_exactly(layer, lambda n: _is_adapter(n) or _is_layer_norm(n))
    trainable = _names(layer.trainable_weights)
    self.assertIn("embeddings/layer_norm/gamma", trainable)
    self.assertIn("embeddings/layer_norm/beta", trainable)
    self.assertLen([n for n in trainable if _is_adapter(n)], 4 * 2 * _NUM_LAYERS)
    self.assertLen([n for n in trainable if _is_layer_norm(n)], 2 * (2 * _NUM_LAYERS + 1))
    self.assertEqual(sum(a.count_params() for a in layer.encoder.adapters), 4 * 148)

  def test_freeze_below_adapters_trains_nothing_below_the_lowest_adapters(self):
    """AdapterDrop's training: the adapters and LayerNorms of the adapted blocks train; the
    left-out block's LayerNorms and the embeddings' stay frozen. A training step takes the
    gradients of the trainable weights alone, so its backward pass stops at the lowest
    adapters; each of them gets one."""
    config = adapter_config.AdapterConfig(adapter_size=4, leave_out=(0,),
                                          freeze_below_adapters=True)
    layer = adapted_bert.AdaptedBert(self.handle, adapter_config=config)
    self._assert_trains_exactly(
        layer, lambda n: _in_block(n, 1) and (_is_adapter(n) or _is_layer_norm(n)))
    frozen_layer_norms = [v for v in layer.weights if _is_layer_norm(
        adapted_bert_encoder.canonical_variable_name(v.name)) and not _in_block(
            adapted_bert_encoder.canonical_variable_name(v.name), 1)]
    self.assertLen(frozen_layer_norms, 2 * (2 + 1))
    ids = tf.constant([[5, 6, 7, 8], [9, 10, 0, 0]])
    inputs = dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
                  input_type_ids=tf.zeros_like(ids))
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(layer(inputs, training=True)["sequence_output"] ** 2)
    self.assertNotIn(None, tape.gradient(loss, layer.trainable_weights))
    self.assertEmpty({id(v) for v in frozen_layer_norms}
                     & {id(v) for v in layer.trainable_weights})

  def test_freeze_below_adapters_applies_to_an_added_set(self):
    """train_adapter(name) freezes the bottom of that set's LayerNorms as its config says."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4)
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2, leave_out=(0,),
                                                        freeze_below_adapters=True))
    layer.train_adapter("b")
    trainable = {id(w) for w in layer.trainable_weights}
    self.assertEqual({k for k, w in layer.adapter_weights("b").items() if id(w) in trainable},
                     {k for k in layer.adapter_weights("b") if _in_block(k, 1)})

  @parameterized.named_parameters(("with_adapters", 4), ("without_adapters", None))
  def test_layer_norm_policy_trains_layer_norms_only(self, adapter_size):
    """'layer_norm': only the LayerNorms train; adapters, if any, stay frozen."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=adapter_size,
                                     tuning="layer_norm")
    self._assert_trains_exactly(layer, _is_layer_norm)
    self.assertLen(layer.trainable_weights, 2 * (2 * _NUM_LAYERS + 1))

  @parameterized.named_parameters(("with_adapters", 4), ("without_adapters", None))
  def test_top_1_trains_top_block_and_pooler_only(self, adapter_size):
    """'top_k' with k=1: the whole top block and the pooler; lower LayerNorms stay frozen."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=adapter_size, tuning="top_k",
                                     top_k=1)
    top = _NUM_LAYERS - 1
    self._assert_trains_exactly(
        layer, lambda n: _in_block(n, top) or n.startswith("pooler_transform/"))
    frozen = _names(layer.non_trainable_weights)
    self.assertIn("transformer/layer_0/self_attention_layer_norm/gamma", frozen)
    self.assertIn("transformer/layer_0/output_layer_norm/beta", frozen)
    self.assertIn("embeddings/layer_norm/gamma", frozen)
    self.assertIn("word_embeddings/embeddings", frozen)
    trainable = _names(layer.trainable_weights)
    self.assertIn(f"transformer/layer_{top}/self_attention/query/kernel", trainable)
    self.assertIn(f"transformer/layer_{top}/output_layer_norm/gamma", trainable)
    if adapter_size:
      self.assertIn(f"transformer/layer_{top}/feedforward_adapter/up_project/kernel",
                    trainable)
      self.assertIn("transformer/layer_0/feedforward_adapter/up_project/kernel", frozen)

  def test_top_k_equal_to_num_layers_trains_all_blocks_but_not_embeddings(self):
    """'top_k' with k=num_layers: every block and the pooler; the embeddings stay frozen."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="top_k",
                                     top_k=_NUM_LAYERS)
    self._assert_trains_exactly(
        layer, lambda n: n.startswith(("transformer/", "pooler_transform/")))

  def test_full_policy_trains_everything(self):
    """'full': every encoder variable trains, adapters included."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, tuning="full")
    self.assertLen(layer.trainable_weights, len(layer.weights))
    self.assertEmpty(layer.non_trainable_weights)

  def test_apply_tuning_switches_policy_on_a_built_encoder(self):
    """apply_tuning can move an encoder from one policy to another and back."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4, tuning="full")
    tuning.apply_tuning(layer.encoder, "layer_norm")
    self._assert_trains_exactly(layer, _is_layer_norm)
    tuning.apply_tuning(layer.encoder, "adapters")
    self._assert_trains_exactly(layer, lambda n: _is_adapter(n) or _is_layer_norm(n))
    tuning.apply_tuning(layer.encoder, "full")
    self.assertLen(layer.trainable_weights, len(layer.weights))

  @parameterized.named_parameters(("adapters", "adapters"), ("layer_norm", "layer_norm"))
  def test_another_adapter_set_trains_alone(self, policy):
    """With adapter_set=, that set's part trains; the base and the own set stay frozen."""
    layer = adapted_bert.AdaptedBert(self.handle, adapter_size=4)
    layer.add_adapter("b", adapter_config.AdapterConfig(adapter_size=2))
    other = layer._adapter_sets["b"]  # pylint: disable=protected-access
    other.trainable = True
    tuning.apply_tuning(layer.encoder, policy, adapter_set=other.encoder_adapters())
    self.assertEmpty(layer.encoder.trainable_weights)
    expected = {k for k in layer.adapter_weights("b")
                if policy == "adapters" or _is_layer_norm(k)}
    trainable = {id(w) for w in layer.trainable_weights}
    self.assertEqual({k for k, w in layer.adapter_weights("b").items() if id(w) in trainable},
                     expected)
    self.assertLen(trainable, len(expected))
    with self.assertRaisesRegex(ValueError, "tuning='full' trains the shared base"):
      tuning.apply_tuning(layer.encoder, "full", adapter_set=other.encoder_adapters())

  def test_unknown_policy_raises_listing_policies(self):
    """An unknown policy is a ValueError that lists every policy."""
    self.assertEqual(tuning.TUNING_POLICIES, ("adapters", "layer_norm", "top_k", "full"))
    with self.assertRaisesRegex(ValueError, "'bitfit'") as context:
      adapted_bert.AdaptedBert(self.handle, adapter_size=4, tuning="bitfit")
    for policy in tuning.TUNING_POLICIES:
      self.assertIn(repr(policy), str(context.exception))

  @parameterized.named_parameters(
      ("missing", None),
      ("zero", 0),
      ("too_large", _NUM_LAYERS + 1),
      ("negative", -1),
      ("float", 1.0),
  )
  def test_top_k_out_of_range_or_missing_raises(self, top_k):
    """tuning='top_k' needs an integer top_k in [1, num_layers]; the message gives the range."""
    with self.assertRaisesRegex(ValueError, rf"top_k must be an integer in \[1, {_NUM_LAYERS}\]"):
      tuning.validate_tuning("top_k", top_k, _NUM_LAYERS, has_adapters=True)

  def test_top_k_out_of_range_raises_from_adapted_bert(self):
    """AdaptedBert checks top_k against the Hub encoder's number of layers."""
    with self.assertRaisesRegex(ValueError, rf"\[1, {_NUM_LAYERS}\], got 3"):
      adapted_bert.AdaptedBert(self.handle, adapter_size=4, tuning="top_k", top_k=3)

  @parameterized.named_parameters(("adapters", "adapters"), ("layer_norm", "layer_norm"),
                                  ("full", "full"))
  def test_top_k_with_another_policy_raises(self, policy):
    """top_k given with a policy other than 'top_k' is a ValueError naming both."""
    with self.assertRaisesRegex(ValueError, rf"top_k.*only.*tuning='top_k'.*{policy}"):
      tuning.validate_tuning(policy, 1, _NUM_LAYERS, has_adapters=True)

  def test_adapters_policy_without_adapters_raises(self):
    """tuning='adapters' with adapter_size=None is a ValueError that asks for adapter_size."""
    with self.assertRaisesRegex(ValueError, "adapter_size"):
      adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="adapters")

  def test_valid_choices_pass_validation(self):
    """Every valid combination passes validate_tuning without error."""
    for policy, top_k, has_adapters in (("adapters", None, True), ("layer_norm", None, False),
                                        ("top_k", 1, False), ("top_k", 2, True),
                                        ("full", None, False)):
      with self.subTest(policy=policy, top_k=top_k):
        self.assertIsNone(tuning.validate_tuning(policy, top_k, _NUM_LAYERS, has_adapters))


if __name__ == "__main__":
  tf.test.main()

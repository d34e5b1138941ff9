"""Tests for AdapterConfig."""

import json

from absl.testing import parameterized
import tensorflow as tf

from keras_adapters.layers import adapter as adapter_lib
from keras_adapters.layers import testing
from keras_adapters.models import adapter_config


class AdapterConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_defaults_are_the_papers_adapters(self):
    config = adapter_config.AdapterConfig()
    self.assertEqual((config.adapter_size, config.activation, config.init_stddev,
                      config.leave_out, config.tuning, config.top_k),
                     (64, "relu", 1e-2, (), "adapters", None))
    self.assertFalse(config.trains_base)

  def test_dict_round_trip_through_json(self):
    """to_dict is plain JSON; from_dict gives an equal config, leave_out canonical."""
    config = adapter_config.AdapterConfig(adapter_size=8, activation="tanh", init_stddev=0.0,
                                          leave_out=[3, 0, 3], tuning="layer_norm")
    self.assertEqual(config.leave_out, (0, 3))
    values = json.loads(json.dumps(config.to_dict()))
    self.assertEqual(values["leave_out"], [0, 3])
    self.assertEqual(adapter_config.AdapterConfig.from_dict(values), config)

  def test_unknown_fields_are_named(self):
    with self.assertRaisesRegex(ValueError, r"Unknown AdapterConfig fields \['bottleneck'\]"):
      adapter_config.AdapterConfig.from_dict({"bottleneck": 8})

  @parameterized.named_parameters(
      ("zero_size", dict(adapter_size=0), "adapter_size"),
      ("bool_size", dict(adapter_size=True), "adapter_size"),
      ("negative_std", dict(init_stddev=-1.0), "init_stddev"),
      ("nan_std", dict(init_stddev=float("nan")), "init_stddev must be a finite number"),
      ("infinite_std", dict(init_stddev=float("inf")), "init_stddev must be a finite number"),
      ("negative_layer", dict(leave_out=(-1,)), "leave_out"),
      ("string_leave_out", dict(leave_out="01"), "leave_out"),
      ("policy", dict(tuning="bitfit"), "'bitfit'"))
  def test_invalid_values_are_named(self, values, message):
    with self.assertRaisesRegex(ValueError, message):
      adapter_config.AdapterConfig(**values)

  @parameterized.named_parameters(*testing.PLACEMENT_VARIANTS.items())
  def test_placements_round_trip_and_reach_the_layers(self, options):
    config = adapter_config.AdapterConfig(reduction_factor=4, activation="silu", **options)
    values = json.loads(json.dumps(config.to_dict()))
    self.assertEqual(adapter_config.AdapterConfig.from_dict(values), config)
    self.assertEqual(config.activation, "swish")
    self.assertEqual(config.bottleneck_size(384), 96)
    self.assertEqual(config.adapter_options(),
                     {**adapter_lib.ADAPTER_OPTIONS, **options})

  def test_a_record_without_placement_options_is_houlsbys(self):
    """Artifacts saved before the AdapterHub options load with the placement they had."""
    old = dict(adapter_size=8, activation="relu", init_stddev=0.01, leave_out=[],
               tuning="adapters", top_k=None)
    config = adapter_config.AdapterConfig.from_dict(old)
    self.assertEqual(config.adapter_options(), adapter_lib.ADAPTER_OPTIONS)
    self.assertEqual(config.bottleneck_size(384), 8)

  @parameterized.named_parameters(
      ("reduction_without_adapters", dict(adapter_size=None, reduction_factor=16),
       "reduction_factor"),
      ("reduction_zero", dict(reduction_factor=0), "reduction_factor"),
      ("post_add_alone", dict(residual_before_ln="post_add"), "original_ln_before"))
  def test_invalid_adapterhub_options_are_named(self, values, message):
    with self.assertRaisesRegex(ValueError, message):
      adapter_config.AdapterConfig(**values)

  def test_validate_for_an_encoder(self):
    """Layers to leave out must exist; the tuning must fit the encoder."""
    adapter_config.AdapterConfig(leave_out=(0, 1)).validate_for(num_layers=2)
    with self.assertRaisesRegex(ValueError, r"leave_out=\[0, 5\].*\[5\].*0\.\.1"):
      adapter_config.AdapterConfig(leave_out=(0, 5)).validate_for(num_layers=2)
    with self.assertRaisesRegex(ValueError, "top_k must be an integer"):
      adapter_config.AdapterConfig(tuning="top_k", top_k=3).validate_for(num_layers=2)
    self.assertTrue(adapter_config.AdapterConfig(tuning="full").trains_base)

  def test_freeze_below_adapters_freezes_below_the_lowest_adapted_layer(self):
    """AdapterDrop's training: the LayerNorms below the lowest adapted layer stay frozen (the
    embeddings' counted below layer 0); the field round-trips as artifacts store it."""
    config = adapter_config.AdapterConfig(leave_out=(2, 0, 1, 4), freeze_below_adapters=True)
    self.assertEqual((config.lowest_adapted_layer, config.layer_norms_frozen_below), (3, 3))
    values = json.loads(json.dumps(config.to_dict()))
    self.assertIs(values["freeze_below_adapters"], True)
    self.assertEqual(adapter_config.AdapterConfig.from_dict(values), config)
    unfrozen = adapter_config.AdapterConfig(leave_out=(0, 1))
    self.assertEqual((unfrozen.lowest_adapted_layer, unfrozen.layer_norms_frozen_below), (2, 0))
    self.assertFalse(adapter_config.AdapterConfig().freeze_below_adapters)

  @parameterized.named_parameters(
      ("not_bool", dict(leave_out=(0,), freeze_below_adapters="yes"), "must be True or False"),
      ("other_tuning", dict(adapter_size=None, tuning="layer_norm", leave_out=(0,),
                            freeze_below_adapters=True), "use it with tuning='adapters'"),
      ("nothing_left_out", dict(freeze_below_adapters=True), r"layer 0 has adapters "
       r"\(leave_out=\[\]\): leave the lowest layers out"),
      ("lowest_adapted", dict(leave_out=(1,), freeze_below_adapters=True), "layer 0 has "
       "adapters"))
  def test_freeze_below_adapters_where_it_cannot_apply_is_refused(self, values, message):
    with self.assertRaisesRegex(ValueError, message):
      adapter_config.AdapterConfig(**values)

  def test_freeze_below_adapters_with_every_layer_left_out_is_refused(self):
    """A config that would freeze the whole encoder does not silently train nothing."""
    config = adapter_config.AdapterConfig(leave_out=(0, 1), freeze_below_adapters=True)
    with self.assertRaisesRegex(ValueError, r"freezes the whole encoder.*layers 0\.\.1"):
      config.validate_for(num_layers=2)
    config.validate_for(num_layers=3)


if __name__ == "__main__":
  tf.test.main()

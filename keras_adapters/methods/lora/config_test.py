"""Tests for LoRAConfig."""

import json

from absl.testing import parameterized
import tensorflow as tf

from keras_adapters.methods import registry
from keras_adapters.methods.lora import config as lora_config
from keras_adapters.methods.lora import layer as lora_layer

LoRAConfig = lora_config.LoRAConfig


class LoRAConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_defaults_are_peft_s(self):
    """r=8, alpha=8, query and value, no dropout, no rsLoRA, peft's init, base frozen."""
    config = LoRAConfig()
    self.assertEqual(config.method, "lora")
    self.assertEqual(config.r, 8)
    self.assertEqual(config.alpha, 8)
    self.assertFalse(config.use_rslora)
    self.assertEqual(config.dropout, 0.0)
    self.assertEqual(config.target_modules, ("query", "value"))
    self.assertEqual(config.leave_out, ())
    self.assertEqual(config.init_weights, "lora")
    self.assertFalse(config.train_layer_norms)
    self.assertFalse(config.use_dora)
    self.assertEqual(config.dora_variant, "peft")
    self.assertEqual(config.tuning, "adapters")
    self.assertIsNone(config.top_k)
    self.assertFalse(config.trains_base)
    self.assertIsNone(config.bottleneck_size(768))
    self.assertEqual(config.adapter_options(), {})

  def test_dict_round_trip_through_json(self):
    """to_dict names the method, holds lists and survives JSON; from_dict gives it back."""
    config = LoRAConfig(r=4, alpha=16.0, use_rslora=True, dropout=0.1,
                        target_modules=("output", "query", "key"), leave_out=(1, 0),
                        init_weights="bert", train_layer_norms=True, use_dora=True,
                        dora_variant="adapterhub")
    values = config.to_dict()
    self.assertEqual(values["method"], "lora")
    self.assertEqual(values["target_modules"], ["query", "key", "output"])
    self.assertEqual(values["leave_out"], [0, 1])
    values = json.loads(json.dumps(values))
    self.assertEqual(LoRAConfig.from_dict(values), config)
    # Without the method key too.
    del values["method"]
    self.assertEqual(LoRAConfig.from_dict(values), config)

  def test_target_modules_in_canonical_order(self):
    """Targets are kept in the block's order, without repeats, so equal configs compare
    equal; a single name is a tuple of one."""
    self.assertEqual(LoRAConfig(target_modules=("value", "query", "value")).target_modules,
                     ("query", "value"))
    self.assertEqual(LoRAConfig(target_modules=["output", "intermediate", "key"]),
                     LoRAConfig(target_modules=("key", "intermediate", "output")))
    self.assertEqual(LoRAConfig(target_modules="key").target_modules, ("key",))
    self.assertEqual(LoRAConfig(leave_out=(3, 1, 3)).leave_out, (1, 3))

  @parameterized.named_parameters(
      ("r_zero", dict(r=0), "r must"),
      ("r_bool", dict(r=True), "r must"),
      ("r_float", dict(r=4.0), "r must"),
      ("alpha_zero", dict(alpha=0), "alpha must"),
      ("alpha_negative", dict(alpha=-1.0), "alpha must"),
      ("alpha_string", dict(alpha="8"), "alpha must"),
      ("alpha_infinite", dict(alpha=float("inf")), "alpha must be a finite number"),
      ("alpha_nan", dict(alpha=float("nan")), "alpha must be a finite number"),
      ("dropout_one", dict(dropout=1.0), "dropout must"),
      ("dropout_negative", dict(dropout=-0.1), "dropout must"),
      ("dropout_nan", dict(dropout=float("nan")), "dropout must be a finite number"),
      ("use_rslora_string", dict(use_rslora="yes"), "use_rslora must"),
      ("use_dora_string", dict(use_dora="yes"), "use_dora must"),
      ("unknown_dora_variant", dict(dora_variant="torch"),
       r"dora_variant must be one of \['peft', 'adapterhub'\], got 'torch'"),
      ("unknown_init", dict(init_weights="kaiming"), "init_weights must.*'kaiming'"),
      ("unknown_target", dict(target_modules=("query", "dense")),
       "target_modules must.*'dense'"),
      ("no_target", dict(target_modules=()), "target_modules must"),
      ("leave_out_negative", dict(leave_out=(-1,)), "leave_out must"),
      ("leave_out_string", dict(leave_out="0"), "leave_out must"),
      ("leave_out_bool", dict(leave_out=(True,)), "leave_out must"),
      ("train_layer_norms_int", dict(train_layer_norms=1), "train_layer_norms must"),
  )
  def test_invalid_values_raise_naming_the_field(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      LoRAConfig(**kwargs)

  def test_unknown_from_dict_field_raises_naming_it(self):
    values = dict(LoRAConfig().to_dict(), rank=4)
    with self.assertRaisesRegex(ValueError, r"Unknown LoRAConfig fields \['rank'\]"):
      LoRAConfig.from_dict(values)

  def test_delta_specs_give_the_layer_options_of_every_target(self):
    """One spec: the method, the layers left out and each target's LoRA arguments."""
    config = LoRAConfig(r=2, alpha=4.0, use_rslora=True, dropout=0.1,
                        target_modules=("value", "intermediate"), leave_out=(1,),
                        init_weights="gaussian", use_dora=True, dora_variant="adapterhub")
    options = dict(rank=2, alpha=4.0, use_rslora=True, dropout=0.1, init_weights="gaussian",
                   use_dora=True, dora_variant="adapterhub")
    self.assertEqual(config.delta_specs(), [dict(
        method="lora", leave_out=[1],
        targets={"value": options, "intermediate": options})])
    # The options build the registered layer.
    layer = registry.get("lora").layer_class(target="value", units=4, **options)
    self.assertIsInstance(layer, lora_layer.LoRA)
    self.assertEqual((layer.rank, layer.use_dora, layer.dora_variant), (2, True, "adapterhub"))

  def test_validate_for_refuses_layers_beyond_the_encoder(self):
    LoRAConfig(leave_out=(1,)).validate_for(2)
    with self.assertRaisesRegex(ValueError, r"leave_out=\[0, 2\].*\[2\].*0\.\.1"):
      LoRAConfig(leave_out=(0, 2)).validate_for(2)
    with self.assertRaisesRegex(ValueError, r"leave_out=\[0, 1\] leaves out every layer.*"
                                "LoRAConfig would change nothing"):
      LoRAConfig(leave_out=(0, 1)).validate_for(2)


if __name__ == "__main__":
  tf.test.main()

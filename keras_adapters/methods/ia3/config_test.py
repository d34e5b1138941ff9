"""Tests for IA3Config."""

import json

from absl.testing import parameterized
import tensorflow as tf

from keras_adapters.methods.ia3 import config as ia3_config

IA3Config = ia3_config.IA3Config


class IA3ConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_defaults_are_the_paper_s(self):
    """Keys, values and the feed-forward output's input (the intermediate activation)."""
    config = IA3Config()
    self.assertEqual(config.method, "ia3")
    self.assertEqual(config.target_modules, ("key", "value", "output"))
    self.assertEqual(config.feedforward_modules, ("output",))
    self.assertEqual(config.leave_out, ())
    self.assertFalse(config.train_layer_norms)
    self.assertFalse(config.trains_base)
    self.assertIsNone(config.bottleneck_size(768))

  def test_dict_round_trip_through_json(self):
    config = IA3Config(target_modules=("intermediate", "value", "key", "query"),
                       feedforward_modules=("intermediate",), leave_out=(2, 0),
                       train_layer_norms=True)
    values = config.to_dict()
    self.assertEqual(values, dict(
        method="ia3", target_modules=["query", "key", "value", "intermediate"],
        feedforward_modules=["intermediate"], leave_out=[0, 2], train_layer_norms=True))
    values = json.loads(json.dumps(values))
    self.assertEqual(IA3Config.from_dict(values), config)

  def test_canonical_order(self):
    """Targets and feed-forward modules in the block's order, so equal configs are equal."""
    config = IA3Config(target_modules=["output", "key", "value", "key"],
                       feedforward_modules="output")
    self.assertEqual(config.target_modules, ("key", "value", "output"))
    self.assertEqual(config.feedforward_modules, ("output",))
    self.assertEqual(config, IA3Config())
    self.assertEqual(
        IA3Config(target_modules=("output", "intermediate"),
                  feedforward_modules=("output", "intermediate")).feedforward_modules,
        ("intermediate", "output"))

  @parameterized.named_parameters(
      ("unknown_target", dict(target_modules=("key", "dense")), "target_modules must.*'dense'"),
      ("no_target", dict(target_modules=(), feedforward_modules=()), "target_modules must"),
      ("leave_out_negative", dict(leave_out=(-2,)), "leave_out must"),
      ("feedforward_not_a_target",
       dict(target_modules=("key", "value"), feedforward_modules=("output",)),
       r"feedforward_modules \['output'\] are not among target_modules"),
      ("train_layer_norms_string", dict(train_layer_norms="no"), "train_layer_norms must"),
  )
  def test_invalid_values_raise_naming_the_field(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      IA3Config(**kwargs)

  def test_unknown_from_dict_field_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"Unknown IA3Config fields \['init_ia3_weights'\]"):
      IA3Config.from_dict(dict(IA3Config().to_dict(), init_ia3_weights=True))

  def test_delta_specs(self):
    """Each target scales its output, those among feedforward_modules their input."""
    config = IA3Config(leave_out=(0,))
    self.assertEqual(config.delta_specs(), [dict(
        method="ia3", leave_out=[0],
        targets=dict(key=dict(scales_input=False), value=dict(scales_input=False),
                     output=dict(scales_input=True)))])
    # AdapterHub's: the intermediate projection's output.
    self.assertEqual(
        IA3Config(target_modules=("key", "value", "intermediate"),
                  feedforward_modules=()).delta_specs()[0]["targets"]["intermediate"],
        dict(scales_input=False))


if __name__ == "__main__":
  tf.test.main()

"""Tests of the experiment config tree: one definition per setting."""

import dataclasses
import os

from absl.testing import parameterized
import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.methods import registry
from keras_adapters.models import adapter_config
from keras_adapters.models import tuning
from keras_adapters.utils import errors
from keras_adapters.utils import settings


def _config(**overrides):
  return config_definitions.ExperimentConfig.from_settings(
      **dict(dict(hub_handle="hub", preprocess_handle="preprocess"), **overrides))


class ExperimentConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_every_adapter_config_field_is_a_setting_handed_to_the_model_unchanged(self):
    """Each AdapterConfig field is a setting of its own (AdapterHub's names; activation and
    init_stddev as adapter_*), and the model section holds the AdapterConfig itself."""
    names = {settings.flag_name(field) for field in dataclasses.fields(
        adapter_config.AdapterConfig)}
    self.assertContainsSubset(names, config_definitions.SETTINGS)
    self.assertIn("adapter_activation", names)
    config = _config(mh_adapter=False, original_ln_before=True, adapter_activation="silu",
                     leave_out=[1], adapter_size=4, residual_before_ln="post_add")
    self.assertEqual(config.model.adapter, adapter_config.AdapterConfig(
        adapter_size=4, mh_adapter=False, original_ln_before=True, activation="swish",
        leave_out=(1,), residual_before_ln="post_add"))

  def test_every_setting_has_help_and_one_name(self):
    for path, field in config_definitions.leaves():
      self.assertTrue(field.metadata.get(settings.HELP), path)
    self.assertLen(config_definitions.SETTINGS, len(list(config_definitions.leaves())))

  def test_settings_round_trip_and_record_only_what_changes_learning(self):
    config = _config(learning_rate=1e-3, leave_out=[2, 0], strategy="mirrored")
    self.assertEqual(config_definitions.ExperimentConfig.from_settings(**config.settings()),
                     config)
    self.assertEqual(config_definitions.ExperimentConfig.from_dict(config.as_dict()), config)
    self.assertEqual(config.settings()["leave_out"], [0, 2])
    self.assertNotIn("strategy", config.definition())
    self.assertNotIn("checkpoint_every_steps", config.definition())
    self.assertEqual(config.definition()["learning_rate"], 1e-3)

  @parameterized.named_parameters(
      ("auto_short", "auto", 64, "never"), ("auto_from_128", "auto", 128, "always"),
      ("auto_long", "auto", 512, "always"),
      ("always", "always", 128, "always"), ("never", "never", 512, "never"))
  def test_attention_recomputes_by_the_runs_longest_sequence(self, setting, length, expected):
    """--recompute_attention reaches AdaptedBert decided: "auto" by --max_seq_length, since
    batches padded to their longest example have no static length to decide by."""
    options = _config(recompute_attention=setting, max_seq_length=length).adapted_bert_options
    self.assertEqual(options["recompute_attention"], expected)

  def test_baselines_have_no_adapters(self):
    self.assertIsNone(_config(tuning="full").model.adapter.adapter_size)

  def test_method_takes_every_method_name(self):
    """The bottleneck adapters, every registered method and every tuning policy are method
    names; a baseline is recorded as the adapter section's tuning, as the old spelling."""
    self.assertCountEqual(config_definitions.METHODS,
                          set(registry.names()) | set(tuning.TUNING_POLICIES))
    for method in config_definitions.METHODS:
      top_k = dict(top_k=2) if method == "top_k" else {}
      config = _config(method=method, **top_k)
      self.assertEqual(config.model.method_name, method)
      if method in tuning.TUNING_POLICIES:
        self.assertEqual(config, _config(method="adapters", tuning=method, **top_k))
    self.assertEqual(_config(method="full", tuning="full").model.method_name, "full")

  @parameterized.named_parameters(
      ("baseline", dict(method="top_k", tuning="full"),
       r"method='top_k' with tuning='full': tuning is the old spelling of method='full'; "
       r"give only method='top_k'\."),
      ("registered", dict(method="lora", tuning="layer_norm"),
       r"method='lora' with tuning='layer_norm'"))
  def test_a_method_and_another_tuning_are_refused(self, overrides, message):
    with self.assertRaisesRegex(errors.UsageError, message):
      _config(**overrides)

  def test_a_setting_belongs_to_the_method_of_its_section(self):
    self.assertEqual(config_definitions.setting_methods("lora_r"), ("lora",))
    self.assertEqual(config_definitions.setting_methods("ia3_leave_out"), ("ia3",))
    self.assertEqual(config_definitions.setting_methods("adapter_size"), ("adapters",))
    self.assertEqual(config_definitions.setting_methods("leave_out"), ("adapters",))
    self.assertEqual(config_definitions.setting_methods("top_k"), ("top_k",))
    self.assertEqual(config_definitions.setting_methods("learning_rate"), ())
    self.assertEqual(config_definitions.setting_methods("method"), ())

  def test_every_setting_of_a_method_not_trained_is_refused_naming_both(self):
    """Each setting of each method's section, given to a run of any other method, is refused
    in one line naming the setting and its method; with its own method it passes."""
    checked = 0
    for name in config_definitions.SETTINGS:
      owners = config_definitions.setting_methods(name)
      for method in config_definitions.METHODS:
        if not owners or method in owners:
          config_definitions.check_methods_settings({name: 1}, [method])
          continue
        checked += 1
        with self.assertRaisesRegex(
            errors.UsageError,
            rf"^{name}=1 is a setting of method='{owners[0]}', not of method='{method}' that "
            rf"this run trains: drop it, or give method='{owners[0]}'\.$"):
          config_definitions.check_methods_settings({name: 1}, [method])
    self.assertGreater(checked, 50)
    with self.assertRaisesRegex(
        errors.UsageError, r"lora_target_modules=\['key'\] is a setting of lora, which "
        r"methods=\['adapters', 'full'\] does not train: drop it, or add lora to the methods"):
      config_definitions.check_methods_settings({"lora_target_modules": ("key",)},
                                                ["adapters", "full"], compared=True)
    config_definitions.check_methods_settings({"lora_r": 4}, ["adapters", "lora"],
                                              compared=True)

  @parameterized.named_parameters(
      ("lora_leave_out", dict(method="lora", lora_leave_out=[0, 1]),
       r"^lora_leave_out=\[0, 1\] leaves out every layer"),
      ("ia3_leave_out", dict(method="ia3", ia3_leave_out=[2]),
       r"^ia3_leave_out=\[2\] names layers \[2\]"),
      ("adapter_leave_out", dict(leave_out=[5]), r"^leave_out=\[5\] names layers \[5\]"),
      ("top_k", dict(method="top_k", top_k=3), r"top_k must be an integer in \[1, 2\]"))
  def test_settings_beyond_the_base_name_their_setting(self, overrides, message):
    with self.assertRaisesRegex(errors.UsageError, message):
      _config(**overrides).model.validate_for(2)
    _config(**overrides).model.validate_for(6)

  def test_flat_settings_invert_nested_settings(self):
    values = dict(lora_r=4, learning_rate=0.1, leave_out=[1])
    self.assertEqual(config_definitions.flat_settings(
        config_definitions.nested_settings(values)), values)

  def test_override_by_path_yaml_text_and_file_as_the_model_garden(self):
    config = _config()
    self.assertEqual(
        config.override("trainer.learning_rate=0.001,model.adapter.adapter_size=16"),
        config.replace(learning_rate=1e-3, adapter_size=16))
    self.assertEqual(config.override("trainer:\n  epochs: 2.5\n").trainer.epochs, 2.5)
    path = os.path.join(self.create_tempdir().full_path, "config.yaml")
    with open(path, "w", encoding="utf-8") as f:
      f.write("model:\n  adapter:\n    leave_out: [0, 1]\nruntime:\n  jit_compile: true\n")
    overridden = config.override(path)
    self.assertEqual((overridden.model.adapter.leave_out, overridden.runtime.jit_compile),
                     ((0, 1), True))
    with self.assertRaisesRegex(errors.UsageError, r"trainer.*epoch.*the sections are "
                                                   r"\['model', 'data', 'trainer', 'runtime'\]"):
      config.override("trainer.epoch=2")
    with self.assertRaisesRegex(errors.UsageError, r"epochs=-1: must be positive"):
      config.override("trainer.epochs=-1")

  @parameterized.named_parameters(
      ("zero_epochs", dict(epochs=0.0), r"epochs=0\.0: must be positive and finite\."),
      ("nan_epochs", dict(epochs=float("nan")), r"epochs=nan: must be positive and finite"),
      ("infinite_epochs", dict(epochs=float("inf")), "epochs=inf: must be positive"),
      ("nan_learning_rate", dict(learning_rate=float("nan")), "learning_rate=nan: must be"),
      ("zero_learning_rate", dict(learning_rate=0.0), "learning_rate=0.0: must be positive"),
      ("negative_batch_size", dict(batch_size=-1),
       "batch_size=-1: must be a whole number of at least 1"),
      ("fractional_batch_size", dict(batch_size=8.5), "batch_size=8.5: must be a whole"),
      ("one_token", dict(max_seq_length=1), "max_seq_length=1: must be a whole number of at "
       "least 2"),
      ("warmup_of_all_steps", dict(warmup_fraction=1.0),
       r"warmup_fraction=1\.0: must be a finite number at least 0 and below 1"),
      ("negative_weight_decay", dict(weight_decay=-0.1), "weight_decay=-0.1: must be"),
      ("negative_seed", dict(seed=-1), "seed=-1: must be"),
      ("fractional_top_k", dict(tuning="top_k", top_k=1.5), "top_k must be a whole number"),
      ("negative_init_stddev", dict(adapter_init_stddev=-1.0), "init_stddev must be a finite "
       "number >= 0"),
      ("unknown_setting", dict(learning_rat=1e-3), r"Unknown settings \['learning_rat'\]"),
      ("no_adapter_size", dict(adapter_size=None), "adapter_size=None: must be"),
      ("unknown_tuning", dict(tuning="all"), "Unknown tuning policy 'all'; choose one of"),
      ("unknown_pooling", dict(pooling="max"), "pooling='max': choose one of cls, mean"),
      ("unknown_precision", dict(mixed_precision="half"),
       "mixed_precision='half': choose one of float32, bfloat16, float16"),
      ("jit_compile_not_a_bool", dict(jit_compile="yes"), "jit_compile must be True or False"))
  def test_invalid_config(self, overrides, message):
    """A value that cannot be trained with is a ValueError naming the field and the fix."""
    with self.assertRaisesRegex(ValueError, message):
      _config(**overrides)

  def test_tpu_implies_bfloat16_and_xla_with_static_shapes(self):
    on_tpu = _config(strategy="tpu")
    self.assertEqual((on_tpu.runtime.mixed_precision, on_tpu.runtime.jit_compile,
                      on_tpu.static_shapes), ("bfloat16", True, True))
    # Static shapes stay on a TPU even without XLA asked for: it compiles every step.
    self.assertTrue(_config(strategy="tpu", jit_compile=False).static_shapes)
    config = _config()
    self.assertEqual((config.runtime.mixed_precision, config.runtime.jit_compile,
                      config.static_shapes), ("float32", False, False))


if __name__ == "__main__":
  tf.test.main()

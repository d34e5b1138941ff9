"""Tests for AdapterHub's LoRA family (LoRAConfig, IA3Config) written and read back, and
the options of it that this library refuses."""

import json
import os
import shutil

from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import adapterhub_lora
from keras_adapters.interop import testing as interop_testing
from keras_adapters.methods.ia3 import IA3Config
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.models import saving

# Written by AdapterHub (`adapters` 1.3.0) itself; see testdata/README.md.
FIXTURES = interop_testing.FIXTURES


def _config_of(model):
  return saving.the_adapted_bert(model).adapter_configs["task"]


class RoundTripTest(tf.test.TestCase, parameterized.TestCase):
  """Random LoRA and (IA)^3 models on a tiny base, written by save_adapterhub and read back
  by load_adapterhub: the same config and logits."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()

  def _round_trip(self, config, **head):
    model = interop_testing.random_method_model(self.handle, config, **head)
    directory = adapterhub.save_adapterhub(
        model, os.path.join(self.create_tempdir().full_path, "ah"), model_name="tiny-bert")
    loaded = adapterhub.load_adapterhub(directory, base_handle=self.handle)
    inputs = interop_testing.tiny_inputs()
    self.assertAllClose(loaded(inputs, training=False), model(inputs, training=False),
                        atol=1e-6, rtol=0)
    with open(os.path.join(directory, adapterhub.CONFIG_FILE), encoding="utf-8") as file:
      written = json.load(file)["config"]
    return loaded, written

  @parameterized.named_parameters(
      ("lora_query_value", LoRAConfig(), {}),
      ("lora_ffn_leave_out", LoRAConfig(r=4, alpha=16, target_modules=(
          "key", "intermediate", "output"), leave_out=(1,), init_weights="bert"),
       dict(pooling="cls", hidden_layers=0)),
      ("dora", LoRAConfig(r=2, alpha=4, use_dora=True, dora_variant="adapterhub",
                          target_modules=("query", "key", "value", "intermediate")), {}),
      ("ia3_adapterhub_default", IA3Config(target_modules=("key", "value", "intermediate"),
                                           feedforward_modules=()), {}),
      ("ia3_query_output_leave_out", IA3Config(target_modules=("query", "output"),
                                               feedforward_modules=(), leave_out=(0,)),
       dict(pooling="cls", hidden_layers=0)))
  def test_export_then_import_gives_the_same_model(self, config, head):
    loaded, written = self._round_trip(config, **head)
    self.assertEqual(_config_of(loaded), config)
    self.assertEqual(written["composition_mode"],
                     "add" if isinstance(config, LoRAConfig) else "scale")
    self.assertEqual(written["leave_out"], list(config.leave_out))

  def test_rslora_is_written_as_alpha_times_sqrt_r(self):
    """AdapterHub has no rsLoRA: alpha/sqrt(r) is its alpha/r with alpha·sqrt(r)."""
    config = LoRAConfig(r=4, alpha=8, use_rslora=True, target_modules=("query", "value"))
    loaded, written = self._round_trip(config)
    self.assertEqual((written["r"], written["alpha"]), (4, 16.0))
    self.assertEqual(_config_of(loaded), LoRAConfig(r=4, alpha=16.0, use_rslora=False,
                                                    target_modules=("query", "value")))

  def test_what_adapterhub_cannot_represent_is_refused_before_writing(self):
    directory = os.path.join(self.create_tempdir().full_path, "ah")
    input_scaling = interop_testing.random_method_model(self.handle, IA3Config())
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                r"^feedforward_modules=\['output'\]: AdapterHub's \(IA\)\^3 "
                                "scales projection outputs only"):
      adapterhub.save_adapterhub(input_scaling, directory, model_name="tiny-bert")
    attention_output = interop_testing.random_method_model(
        self.handle, LoRAConfig(target_modules=("query", "attention_output")))
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "AdapterHub has no LoRA on 'attention_output'"):
      adapterhub.save_adapterhub(attention_output, directory, model_name="tiny-bert")
    self.assertFalse(os.path.exists(directory))

  def test_peft_s_dora_is_refused_naming_the_variant(self):
    directory = os.path.join(self.create_tempdir().full_path, "ah")
    model = interop_testing.random_method_model(self.handle, LoRAConfig(use_dora=True))
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "dora_variant='peft', which AdapterHub does not compute.*"
                                "save_peft"):
      adapterhub.save_adapterhub(model, directory, model_name="tiny-bert")
    self.assertFalse(os.path.exists(directory))


class FamilyTest(tf.test.TestCase):

  def test_each_member_is_found_in_its_method_s_folder(self):
    members = adapterhub_lora.members()
    self.assertEqual({name: member.__name__ for name, member in members.items()},
                     {"lora": "keras_adapters.methods.lora.adapterhub",
                      "ia3": "keras_adapters.methods.ia3.adapterhub"})
    self.assertEqual(sorted(member.COMPOSITION_MODE for member in members.values()),
                     ["add", "scale"])

  def test_an_unknown_mode_is_refused_naming_the_members(self):
    with self.assertRaisesRegex(adapterhub_lora.Error,
                                r"composition_mode='mul': AdapterHub has 'add' \(lora\) and "
                                r"'scale' \(ia3\)\.$"):
      adapterhub_lora.config_from_adapterhub({"composition_mode": "mul"})


class BadInputTest(tf.test.TestCase, parameterized.TestCase):
  """AdapterHub LoRA-family options with no equivalent here: one error naming the option."""

  def _copy(self, fixture, edit):
    directory = os.path.join(self.create_tempdir().full_path, fixture)
    shutil.copytree(os.path.join(FIXTURES, fixture), directory)
    path = os.path.join(directory, adapterhub.CONFIG_FILE)
    with open(path, encoding="utf-8") as file:
      meta = json.load(file)
    edit(meta["config"])
    with open(path, "w", encoding="utf-8") as file:
      json.dump(meta, file)
    return directory

  @parameterized.named_parameters(
      ("dora_on_ia3", "ia3", dict(use_dora=True),
       r"composition_mode='scale' with use_dora=True: AdapterHub's \(IA\)\^3 has no DoRA"),
      ("gating", "lora", dict(use_gating=True), "AdapterHub's use_gating=True"),
      ("vera", "lora", dict(vera_d=0.1), "AdapterHub's vera_d=0.1"),
      ("scale_rank_2", "ia3", dict(r=2), r"composition_mode='scale' with r=2: AdapterHub's "
       r"\(IA\)\^3 has r=1"),
      ("unknown_mode", "lora", dict(composition_mode="mul"), "composition_mode='mul'"),
      ("unknown_matrix", "lora", dict(attn_matrices=["q", "o"]), r"attn_matrices \['o'\]"))
  def test_unsupported_options_are_named(self, fixture, values, message):
    directory = self._copy(fixture, lambda config: config.update(values))
    with self.assertRaisesRegex(adapterhub.AdapterHubError, message) as raised:
      adapterhub.load_adapterhub(directory, base_handle=hub_testing.tiny_hub_handle())
    self.assertEqual(str(raised.exception).count("\n"), 0)  # One line, no traceback.

  def test_truncated_lora_weights_name_the_file(self):
    directory = self._copy("lora", lambda config: None)
    path = os.path.join(directory, adapterhub.WEIGHTS_FILE)
    with open(path, "rb") as file:
      data = file.read()
    with open(path, "wb") as file:
      file.write(data[:len(data) // 2])
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "adapter.safetensors' is incomplete or corrupt"):
      adapterhub.load_adapterhub(directory, base_handle=hub_testing.tiny_hub_handle())

  def test_the_fixtures_tensors_are_adapterhubs_layout(self):
    """What the loader assumes of AdapterHub's files: LoRA's A `[r, in]` and B `[out, r]`,
    (IA)^3 only a B `[out, 1]`, on every layer of the base."""
    lora = safetensors_numpy.load_file(os.path.join(FIXTURES, "lora", adapterhub.WEIGHTS_FILE))
    prefix = "bert.encoder.layer.5.attention.self"
    self.assertEqual(lora[f"{prefix}.query.loras.ah_lora.lora_A"].shape, (8, 384))
    self.assertEqual(lora[f"{prefix}.value.loras.ah_lora.lora_B"].shape, (384, 8))
    ia3 = safetensors_numpy.load_file(os.path.join(FIXTURES, "ia3", adapterhub.WEIGHTS_FILE))
    self.assertEqual(ia3["bert.encoder.layer.5.intermediate.dense.loras.ah_ia3.lora_B"].shape,
                     (1536, 1))
    self.assertFalse([name for name in ia3 if name.endswith("lora_A")])
    self.assertNotEqual(np.abs(ia3[f"{prefix}.key.loras.ah_ia3.lora_B"] - 1).max(), 0)


if __name__ == "__main__":
  tf.test.main()

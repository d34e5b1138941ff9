"""Tests for LoRA's part of peft's format: its config both ways and its checks."""

import types

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from keras_adapters.methods.lora import peft
from keras_adapters.methods.lora.config import LoRAConfig

_FILES = types.SimpleNamespace(folder="/a/lora", config="adapter_config.json",
                               weights="/a/lora/adapter_model.safetensors")
_QUERY = "base_model.model.bert.encoder.layer.0.attention.self.query"


def _module(rank=4, size=6, dora=False):
  """One wrapped module's tensors in peft's layout: A `[r, in]`, B `[out, r]`, DoRA's `[out]`."""
  weights = {"lora_a": np.zeros([rank, size]), "lora_b": np.zeros([size, rank])}
  if dora:
    weights["magnitude"] = np.ones([size])
  return weights


class ConfigTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("plain", LoRAConfig(r=4, alpha=8, target_modules=("query", "value"))),
      ("gaussian_rslora", LoRAConfig(r=2, alpha=4, use_rslora=True, init_weights="gaussian",
                                     dropout=0.1, target_modules=("key",))),
      ("dora", LoRAConfig(r=2, target_modules=("query",), use_dora=True)))
  def test_a_config_reads_back_as_itself(self, config):
    meta = peft.config_to_peft(config)
    self.assertEqual(meta["peft_type"], peft.PEFT_TYPE)
    self.assertEqual(peft.config_from_peft(meta, config.target_modules), config)

  def test_adapterhub_s_dora_is_refused(self):
    with self.assertRaisesRegex(ValueError, "dora_variant='adapterhub', which peft does not"):
      peft.config_to_peft(LoRAConfig(use_dora=True, dora_variant="adapterhub"))

  @parameterized.parameters("pissa", "PiSSA_niter_16", "olora", "corda", "loftq")
  def test_inits_that_rewrite_the_base_are_refused(self, init):
    with self.assertRaisesRegex(ValueError, f"init_lora_weights={init!r} rewrites the base"):
      peft.check_config({"init_lora_weights": init})

  @parameterized.parameters(True, False, "gaussian", None)
  def test_inits_that_keep_the_base_pass(self, init):
    peft.check_config({"init_lora_weights": init})


class CheckTensorsTest(absltest.TestCase):

  def test_consistent_tensors_pass(self):
    peft.check_tensors({"r": 4}, {_QUERY: _module()}, _FILES)
    peft.check_tensors({"r": 4, "use_dora": True}, {_QUERY: _module(dora=True)}, _FILES)

  def test_magnitudes_without_use_dora_are_refused(self):
    with self.assertRaisesRegex(
        ValueError, f"'/a/lora' holds DoRA's '{_QUERY}.lora_magnitude_vector', but its "
        "config says use_dora=None: peft would not load it"):
      peft.check_tensors({"r": 4}, {_QUERY: _module(dora=True)}, _FILES)

  def test_use_dora_without_magnitudes_is_refused(self):
    key = _QUERY.replace("query", "key")
    with self.assertRaisesRegex(
        ValueError, f"says use_dora=True but holds no DoRA magnitude "
        rf"\(lora_magnitude_vector\) beside '{key}.lora_A.weight'"):
      peft.check_tensors({"r": 4, "use_dora": True},
                         {_QUERY: _module(dora=True), key: _module()}, _FILES)

  def test_a_rank_that_is_not_r_names_both_files(self):
    with self.assertRaisesRegex(
        ValueError, rf"^'/a/lora/adapter_model.safetensors' holds '{_QUERY}.lora_A.weight' "
        r"of shape \[4, 6\], rank 4, but its adapter_config.json says r=2: "):
      peft.check_tensors({"r": 2}, {_QUERY: _module()}, _FILES)
    weights = dict(_module(), lora_b=np.zeros([6, 3]))
    with self.assertRaisesRegex(ValueError, r"lora_B.weight' of shape \[6, 3\], rank 3"):
      peft.check_tensors({"r": 4}, {_QUERY: weights}, _FILES)


if __name__ == "__main__":
  absltest.main()

"""Tests for reading and writing peft LoRA artifacts of BERT sequence classifiers."""

import json
import os
import re
import shutil

from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import testing as interop_testing
from keras_adapters.interop import peft
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.models import saving

# Written by peft 0.21.2 itself on all-MiniLM-L6-v2; see testdata/README.md.
FIXTURE = os.path.join(os.path.dirname(__file__), "testdata", "peft", "lora")
# The same with DoRA (use_dora=True); see testdata/README.md.
DORA_FIXTURE = os.path.join(os.path.dirname(__file__), "testdata", "peft", "dora")
# LoRA with target_modules=["query", "key", "value", "dense"]: every dense layer of BERT's
# blocks and its pooler's; see testdata/README.md.
POOLER_FIXTURE = os.path.join(os.path.dirname(__file__), "testdata", "peft", "lora_pooler")
# The config values that change what peft builds or computes.
_CONFIG_VALUES = ("peft_type", "task_type", "base_model_name_or_path", "r", "lora_alpha",
                  "use_rslora", "lora_dropout", "target_modules", "layers_to_transform",
                  "layers_pattern", "modules_to_save", "bias", "use_dora", "lora_bias",
                  "fan_in_fan_out", "init_lora_weights", "rank_pattern", "alpha_pattern",
                  "exclude_modules", "layer_replication")


def _read_json(directory):
  with open(os.path.join(directory, peft.CONFIG_FILE), encoding="utf-8") as file:
    return json.load(file)


def _config_values(meta):
  """The `_CONFIG_VALUES` of a peft config; a list of target modules in sorted order (peft
  holds them as a set, so it writes them in any order)."""
  values = {key: meta.get(key) for key in _CONFIG_VALUES}
  if isinstance(values["target_modules"], list):
    values["target_modules"] = sorted(values["target_modules"])
  return values


def _reference(fixture=FIXTURE):
  with open(os.path.join(fixture, "reference_logits.json"), encoding="utf-8") as file:
    reference = json.load(file)
  inputs = {key: tf.constant(reference[key], tf.int32)
            for key in ("input_word_ids", "input_mask", "input_type_ids")}
  return inputs, np.array(reference["logits"], np.float32)


class FixtureTest(tf.test.TestCase):
  """peft's own artifact on the embedded default base, loaded once."""
  fixture = FIXTURE
  config = LoRAConfig(r=8, alpha=16, target_modules=("query", "value"))

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = peft.load_peft(cls.fixture)

  def test_reproduces_pefts_logits(self):
    inputs, expected = _reference(self.fixture)
    difference = np.abs(self.model(inputs, training=False).numpy() - expected).max()
    self.assertLess(difference, 1e-5)
    self.assertEqual(saving.the_adapted_bert(self.model).adapter_config, self.config)
    self.assertEqual((self.model.head_config.pooling, self.model.head_config.hidden_layers),
                     ("cls", 0))

  def test_re_export_writes_pefts_files(self):
    """The imported model saves as the tensors peft wrote (names, layouts, values, bit for
    bit) and the config values that change what peft loads."""
    directory = peft.save_peft(self.model, os.path.join(self.create_tempdir().full_path, "out"))
    ours = safetensors_numpy.load_file(os.path.join(directory, peft.WEIGHTS_FILE))
    theirs = safetensors_numpy.load_file(os.path.join(self.fixture, peft.WEIGHTS_FILE))
    self.assertCountEqual(ours, theirs)
    for key, value in theirs.items():
      self.assertEqual(ours[key].dtype, value.dtype, msg=key)
      self.assertAllEqual(ours[key], value, msg=key)
    ours, theirs = _read_json(directory), _read_json(self.fixture)
    self.assertEqual(_config_values(ours), _config_values(theirs))
    self.assertEqual(ours["peft_version"], theirs["peft_version"])


class RoundTripTest(tf.test.TestCase, parameterized.TestCase):
  """Random LoRA models on a tiny base, written by save_peft and read back by load_peft."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()

  def _round_trip(self, config, seed=0):
    model = interop_testing.random_method_model(self.handle, config, pooling="cls",
                                                hidden_layers=0, seed=seed)
    directory = peft.save_peft(model, os.path.join(self.create_tempdir().full_path, "peft"),
                               base_model_name_or_path="tiny-bert")
    loaded = peft.load_peft(directory, base_handle=self.handle)
    inputs = interop_testing.tiny_inputs()
    self.assertAllClose(loaded(inputs, training=False), model(inputs, training=False),
                        atol=1e-6, rtol=0)
    self.assertEqual(saving.the_adapted_bert(loaded).adapter_config, config)
    return directory

  def test_query_value_are_written_as_names(self):
    directory = self._round_trip(LoRAConfig(r=4, alpha=8))
    meta = _read_json(directory)
    self.assertEqual(meta["target_modules"], ["query", "value"])
    self.assertEqual((meta["peft_type"], meta["task_type"], meta["r"], meta["lora_alpha"],
                      meta["base_model_name_or_path"]), ("LORA", "SEQ_CLS", 4, 8, "tiny-bert"))

  @parameterized.named_parameters(
      ("leave_out_ffn", LoRAConfig(r=2, alpha=4, target_modules=("intermediate", "output"),
                                   leave_out=(0,))),
      ("leave_out_last_layer", LoRAConfig(target_modules=("value",), leave_out=(1,))),
      ("attention_output", LoRAConfig(r=4, alpha=4, target_modules=(
          "key", "attention_output", "intermediate", "output"))),
      ("pooler_leave_out", LoRAConfig(r=2, target_modules=("value", "output", "pooler"),
                                      leave_out=(1,))))
  def test_other_modules_and_left_out_layers_are_written_as_a_regex(self, config):
    """Module names beyond the attention's (whose last part "dense" would also match the
    pooler) and left-out layers: peft's regex over full module names, which peft matches
    whole against each module's name; the pooler's only when it is a target."""
    directory = self._round_trip(config, seed=1)
    pattern = _read_json(directory)["target_modules"]
    self.assertIsInstance(pattern, str)
    every_module = set(peft.module_names(LoRAConfig(target_modules=(
        "query", "key", "value", "attention_output", "intermediate", "output", "pooler")), 2))
    expected = set(peft.module_names(config, 2))
    self.assertEqual({module for module in every_module if re.fullmatch(pattern, module)},
                     expected)
    tensors = safetensors_numpy.load_file(os.path.join(directory, peft.WEIGHTS_FILE))
    self.assertEqual({name[len("base_model.model."):].rsplit(".lora_", 1)[0]
                      for name in tensors if ".lora_" in name}, expected)

  def test_rslora_round_trips(self):
    directory = self._round_trip(LoRAConfig(r=4, alpha=6, use_rslora=True,
                                            target_modules=("query", "key", "value")), seed=2)
    self.assertTrue(_read_json(directory)["use_rslora"])

  def test_models_peft_cannot_hold_are_refused(self):
    directory = os.path.join(self.create_tempdir().full_path, "peft")
    two_layer_head = interop_testing.random_method_model(self.handle, LoRAConfig())
    with self.assertRaisesRegex(peft.PeftError, "pooling='cls', hidden_layers=0"):
      peft.save_peft(two_layer_head, directory, base_model_name_or_path="tiny-bert")
    self.assertFalse(os.path.exists(directory))


class BadInputTest(tf.test.TestCase, parameterized.TestCase):
  """peft artifacts this library cannot run: one clear error naming the option or file."""

  def _copy(self, edit_config=None, edit_tensors=None):
    directory = os.path.join(self.create_tempdir().full_path, "lora")
    shutil.copytree(FIXTURE, directory)
    if edit_config:
      meta = _read_json(directory)
      edit_config(meta)
      with open(os.path.join(directory, peft.CONFIG_FILE), "w", encoding="utf-8") as file:
        json.dump(meta, file)
    if edit_tensors:
      path = os.path.join(directory, peft.WEIGHTS_FILE)
      tensors = safetensors_numpy.load_file(path)
      edit_tensors(tensors)
      safetensors_numpy.save_file(tensors, path, {"format": "pt"})
    return directory

  def _assert_refused(self, directory, message):
    with self.assertRaisesRegex(peft.PeftError, message) as raised:
      peft.load_peft(directory, base_handle=hub_testing.tiny_hub_handle())
    self.assertNotIn("\n", str(raised.exception))  # One line.
    self.assertIsNone(raised.exception.__cause__)  # Not a chained traceback.
    return raised.exception

  @parameterized.named_parameters(
      ("ia3", dict(peft_type="IA3"), "is a peft 'IA3' adapter; LoRA .* is supported"),
      ("causal_lm", dict(task_type="CAUSAL_LM"), "adapts a 'CAUSAL_LM' model; sequence "
       "classification .* is supported"),
      ("dora_without_magnitudes", dict(use_dora=True),
       "says use_dora=True but holds no DoRA magnitude .*beside 'base_model"),
      ("bias", dict(bias="all"), "peft's bias='all'"),
      ("rank_pattern", dict(rank_pattern={"query": 4}), "peft's rank_pattern="),
      ("no_rank", dict(r=None), "cannot be reproduced"),
      ("untargeted_module", dict(target_modules=["query"]),
       r"layer.0.attention.self.value.lora_A.weight', but its config's target_modules=\['query'\].*peft would "
       "ignore the tensor"),
      ("untransformed_layer", dict(layers_to_transform=[0, 1, 2, 3, 4]),
       r"layer.5.*layers_to_transform=\[0, 1, 2, 3, 4\]"),
      ("another_base", {}, "has LoRA in layer 5; the base has 2 layers. Pass its own base"))
  def test_unsupported_options_are_named(self, values, message):
    self._assert_refused(self._copy(edit_config=lambda meta: meta.update(values)), message)

  def test_missing_classifier_is_named(self):
    def drop_classifier(tensors):
      del tensors["base_model.model.classifier.weight"]
      del tensors["base_model.model.classifier.bias"]
    self._assert_refused(self._copy(edit_tensors=drop_classifier),
                         r"holds no classifier .*modules_to_save=\['classifier'\]")

  def test_lora_outside_the_blocks_is_named(self):
    def add_embeddings(tensors):
      tensors["base_model.model.bert.embeddings.word_embeddings.lora_A.weight"] = np.zeros(
          [8, 384], np.float32)
    self._assert_refused(self._copy(edit_tensors=add_embeddings),
                         "'base_model.model.bert.embeddings.word_embeddings.lora_A.weight'.*"
                         "not LoRA on BERT's encoder blocks, its pooler or the classifier")

  def test_a_pooler_tensor_its_config_does_not_wrap_is_named(self):
    """The fixture's target_modules=["query", "value"] do not match `bert.pooler.dense`:
    peft would ignore LoRA tensors there."""
    def add_pooler(tensors):
      tensors["base_model.model.bert.pooler.dense.lora_A.weight"] = np.zeros([8, 384],
                                                                             np.float32)
    self._assert_refused(self._copy(edit_tensors=add_pooler),
                         "'base_model.model.bert.pooler.dense.lora_A.weight', but its config's "
                         r"target_modules=\['query', 'value'\].*does not wrap that module")

  def test_truncated_weights_name_the_file(self):
    directory = self._copy()
    path = os.path.join(directory, peft.WEIGHTS_FILE)
    with open(path, "rb") as file:
      data = file.read()
    with open(path, "wb") as file:
      file.write(data[:len(data) // 3])
    self._assert_refused(directory, "adapter_model.safetensors' is incomplete or corrupt "
                         r"\([\d,]+ bytes; ")

  def test_missing_files_are_named(self):
    directory = self._copy()
    os.remove(os.path.join(directory, peft.WEIGHTS_FILE))
    self._assert_refused(directory, "has no adapter_model.safetensors")
    os.remove(os.path.join(directory, peft.CONFIG_FILE))
    self._assert_refused(directory, "has no adapter_config.json")


class DoRAFixtureTest(FixtureTest):
  """peft's DoRA artifact (`use_dora=True`, magnitudes `lora_magnitude_vector`): read to its
  logits and written back as peft's tensors, by `FixtureTest`'s tests."""
  fixture = DORA_FIXTURE
  config = LoRAConfig(r=8, alpha=16, target_modules=("query", "value"), use_dora=True)


class PoolerFixtureTest(FixtureTest):
  """peft's LoRA on every dense layer, the pooler's included (`target_modules=["query",
  "key", "value", "dense"]`): read to its logits and written back as peft's tensors and
  target names, by `FixtureTest`'s tests."""
  fixture = POOLER_FIXTURE
  config = LoRAConfig(r=4, alpha=8, target_modules=(
      "query", "key", "value", "attention_output", "intermediate", "output", "pooler"))


class DoRATest(tf.test.TestCase):
  """DoRA models on the tiny base: round trips, and what peft cannot hold or read."""

  def test_round_trip_keeps_the_magnitudes(self):
    handle = hub_testing.tiny_hub_handle()
    config = LoRAConfig(r=2, alpha=4, target_modules=("key", "intermediate"), use_dora=True)
    model = interop_testing.random_method_model(handle, config, pooling="cls",
                                                hidden_layers=0)
    directory = peft.save_peft(model, os.path.join(self.create_tempdir().full_path, "peft"),
                               base_model_name_or_path="tiny-bert")
    self.assertTrue(_read_json(directory)["use_dora"])
    tensors = safetensors_numpy.load_file(os.path.join(directory, peft.WEIGHTS_FILE))
    self.assertEqual(tensors["base_model.model.bert.encoder.layer.1.intermediate.dense."
                             "lora_magnitude_vector"].shape, (32,))
    loaded = peft.load_peft(directory, base_handle=handle)
    inputs = interop_testing.tiny_inputs()
    self.assertAllClose(loaded(inputs, training=False), model(inputs, training=False),
                        atol=1e-6, rtol=0)
    self.assertEqual(saving.the_adapted_bert(loaded).adapter_config, config)

  def test_adapterhub_s_dora_is_refused_naming_the_variant(self):
    model = interop_testing.random_method_model(
        hub_testing.tiny_hub_handle(),
        LoRAConfig(use_dora=True, dora_variant="adapterhub"), pooling="cls", hidden_layers=0)
    directory = os.path.join(self.create_tempdir().full_path, "peft")
    with self.assertRaisesRegex(peft.PeftError, "dora_variant='adapterhub', which peft does "
                                "not compute.*save_adapterhub"):
      peft.save_peft(model, directory, base_model_name_or_path="tiny-bert")
    self.assertFalse(os.path.exists(directory))

  def test_magnitudes_without_use_dora_are_refused(self):
    directory = os.path.join(self.create_tempdir().full_path, "dora")
    shutil.copytree(DORA_FIXTURE, directory)
    meta = _read_json(directory)
    meta["use_dora"] = False
    with open(os.path.join(directory, peft.CONFIG_FILE), "w", encoding="utf-8") as file:
      json.dump(meta, file)
    with self.assertRaisesRegex(peft.PeftError, "holds DoRA's 'base_model.*"
                                "lora_magnitude_vector', but its config says use_dora=False"):
      peft.load_peft(directory, base_handle=hub_testing.tiny_hub_handle())


if __name__ == "__main__":
  tf.test.main()

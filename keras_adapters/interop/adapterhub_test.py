"""Tests for reading and writing AdapterHub artifacts."""

import json
import os
import shutil
import uuid

from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.layers import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import saving

# Shared with the other interop tests, the conversion CLI's and the round-trip benchmarks.
from keras_adapters.interop.testing import FIXTURES  # pylint: disable=g-importing-member
from keras_adapters.interop.testing import random_task_model  # pylint: disable=g-importing-member
from keras_adapters.interop.testing import reference_inputs  # pylint: disable=g-importing-member
from keras_adapters.interop.testing import TOLERANCE  # pylint: disable=g-importing-member
from keras_adapters.interop.testing import tiny_inputs  # pylint: disable=g-importing-member


class FixtureTest(tf.test.TestCase, parameterized.TestCase):
  """AdapterHub's own artifacts on the embedded default base."""

  @parameterized.named_parameters(("houlsby", "houlsby"), ("pfeiffer", "pfeiffer"))
  def test_reproduces_adapterhubs_logits(self, fixture):
    model = adapterhub.load_adapterhub(os.path.join(FIXTURES, fixture))
    inputs, expected = reference_inputs(fixture)
    logits = model(inputs, training=False)
    self.assertLess(np.abs(logits.numpy() - expected).max(), TOLERANCE)
    self.assertEqual(model.head_config.label_names, ("LABEL_0", "LABEL_1", "LABEL_2"))
    if fixture == "houlsby":
      self.re_export_writes_adapterhubs_files(model, fixture)

  def re_export_writes_adapterhubs_files(self, model, fixture):
    """Saving the imported model writes AdapterHub's tensors (names, layouts, values) and its
    config values: the export is what AdapterHub itself wrote."""
    directory = adapterhub.save_adapterhub(
        model, os.path.join(self.create_tempdir().full_path, "out"))
    original = os.path.join(FIXTURES, fixture)
    for filename in (adapterhub.WEIGHTS_FILE, adapterhub.HEAD_WEIGHTS_FILE):
      ours = safetensors_numpy.load_file(os.path.join(directory, filename))
      theirs = safetensors_numpy.load_file(os.path.join(original, filename))
      self.assertCountEqual(ours, theirs)
      for key, value in theirs.items():
        self.assertAllEqual(ours[key], value, msg=key)
    for filename in (adapterhub.CONFIG_FILE, adapterhub.HEAD_CONFIG_FILE):
      with open(os.path.join(directory, filename), encoding="utf-8") as file:
        ours = json.load(file)
      with open(os.path.join(original, filename), encoding="utf-8") as file:
        theirs = json.load(file)
      if filename == adapterhub.HEAD_CONFIG_FILE:
        # AdapterHub's null dropout_prob is the base's hidden dropout, 0.1.
        theirs["config"]["dropout_prob"] = 0.1
      self.assertEqual(ours, theirs)


  def test_reads_and_writes_on_any_tensorflow_file_system(self):
    """AdapterHub's artifact copied to gs:// (here ram://) loads with its logits; saving to
    a URL writes AdapterHub's files there."""
    remote = f"ram://adapterhub_test/{uuid.uuid4().hex}"
    for filename in tf.io.gfile.listdir(os.path.join(FIXTURES, "houlsby")):
      tf.io.gfile.makedirs(os.path.join(remote, "houlsby"))
      tf.io.gfile.copy(os.path.join(FIXTURES, "houlsby", filename),
                       os.path.join(remote, "houlsby", filename))
    model = adapterhub.load_adapterhub(os.path.join(remote, "houlsby"))
    inputs, expected = reference_inputs("houlsby")
    logits = model(inputs, training=False)
    self.assertLess(np.abs(logits.numpy() - expected).max(), TOLERANCE)
    written = adapterhub.save_adapterhub(model, os.path.join(remote, "out"))
    self.assertContainsSubset(
        [adapterhub.CONFIG_FILE, adapterhub.WEIGHTS_FILE, adapterhub.HEAD_CONFIG_FILE,
         adapterhub.HEAD_WEIGHTS_FILE], tf.io.gfile.listdir(written))
    self.assertAllClose(adapterhub.load_adapterhub(written)(inputs, training=False), logits,
                        atol=1e-6, rtol=0)


class LoRAFamilyFixtureTest(tf.test.TestCase, parameterized.TestCase):
  """AdapterHub's own LoRAConfig (plain and with use_dora) and IA3Config artifacts on the
  embedded default base, each loaded once."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.models = {fixture: adapterhub.load_adapterhub(os.path.join(FIXTURES, fixture))
                  for fixture in ("lora", "ia3", "dora")}

  @parameterized.named_parameters(
      ("lora", "lora", "LoRAConfig", dict(r=8, alpha=8, use_rslora=False,
                                          target_modules=("query", "value"), leave_out=())),
      ("ia3", "ia3", "IA3Config", dict(target_modules=("key", "value", "intermediate"),
                                       feedforward_modules=(), leave_out=())),
      ("dora", "dora", "LoRAConfig", dict(r=4, alpha=8, use_dora=True,
                                          dora_variant="adapterhub",
                                          target_modules=("query", "key", "value"))))
  def test_reproduces_adapterhubs_logits(self, fixture, config_type, fields):
    model = self.models[fixture]
    inputs, expected = reference_inputs(fixture)
    difference = np.abs(model(inputs, training=False).numpy() - expected).max()
    self.assertLess(difference, 1e-5)
    bert = saving.the_adapted_bert(model)
    config = bert.adapter_config
    self.assertEqual(type(config).__name__, config_type)
    self.assertEqual({field: getattr(config, field) for field in fields}, fields)
    self.assertEqual(model.head_config.label_names, ("LABEL_0", "LABEL_1", "LABEL_2"))

  @parameterized.named_parameters(("lora", "lora"), ("ia3", "ia3"), ("dora", "dora"))
  def test_re_export_writes_adapterhubs_files(self, fixture):
    """The imported LoRA, (IA)^3 or DoRA model saves as the tensors AdapterHub wrote (names,
    layouts, values, bit for bit) and the config values it recorded."""
    directory = adapterhub.save_adapterhub(
        self.models[fixture], os.path.join(self.create_tempdir().full_path, "out"))
    original = os.path.join(FIXTURES, fixture)
    for filename in (adapterhub.WEIGHTS_FILE, adapterhub.HEAD_WEIGHTS_FILE):
      ours = safetensors_numpy.load_file(os.path.join(directory, filename))
      theirs = safetensors_numpy.load_file(os.path.join(original, filename))
      self.assertCountEqual(ours, theirs)
      for key, value in theirs.items():
        self.assertEqual(ours[key].dtype, value.dtype, msg=key)
        self.assertAllEqual(ours[key], value, msg=key)
    for filename in (adapterhub.CONFIG_FILE, adapterhub.HEAD_CONFIG_FILE):
      with open(os.path.join(directory, filename), encoding="utf-8") as file:
        ours = json.load(file)
      with open(os.path.join(original, filename), encoding="utf-8") as file:
        theirs = json.load(file)
      if filename == adapterhub.HEAD_CONFIG_FILE:
        # AdapterHub's null dropout_prob is the base's hidden dropout, 0.1.
        theirs["config"]["dropout_prob"] = 0.1
      self.assertEqual(ours, theirs)


class RoundTripTest(tf.test.TestCase, parameterized.TestCase):
  """Export then import, on a tiny random base."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()

  @parameterized.named_parameters(*testing.PLACEMENT_VARIANTS.items())
  def test_export_then_import_gives_the_same_model(self, options):
    """Through AdapterHub's format and through this library's artifacts, each placement
    comes back with its options and its logits."""
    model = random_task_model(self.handle, options, pooling="cls")
    root = self.create_tempdir().full_path
    directory = adapterhub.save_adapterhub(model, os.path.join(root, "ah"),
                                           model_name="tiny-bert")
    loaded = adapterhub.load_adapterhub(directory, base_handle=self.handle)
    inputs = tiny_inputs()
    expected = model(inputs)
    self.assertAllClose(loaded(inputs), expected, atol=1e-6, rtol=0)
    bert = [m for m in loaded.submodules if isinstance(m, adapted_bert.AdaptedBert)][0]
    self.assertEqual(bert.adapter_configs["task"].adapter_options(),
                     {**adapter_config.AdapterConfig().adapter_options(), **options})
    rebuilt = saving.load_task_model(saving.save_adapters(loaded, os.path.join(root, "ours")))
    self.assertAllClose(rebuilt(inputs), expected, atol=1e-6, rtol=0)

  def test_changed_layer_norms_are_refused_or_written_beside(self):
    model = random_task_model(self.handle, {})
    bert = [m for m in model.submodules if isinstance(m, adapted_bert.AdaptedBert)][0]
    norm = bert.adapter_weights()["transformer/layer_0/output_layer_norm/gamma"]
    norm.assign(norm + 0.5)
    directory = os.path.join(self.create_tempdir().full_path, "ah")
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "LayerNorm.*output_layer_norm.*layer_norms='file'"):
      adapterhub.save_adapterhub(model, directory, model_name="tiny-bert")
    self.assertFalse(os.path.exists(directory))
    adapterhub.save_adapterhub(model, directory, model_name="tiny-bert", layer_norms="file")
    norms = safetensors_numpy.load_file(os.path.join(directory, adapterhub.LAYER_NORMS_FILE))
    self.assertAllEqual(norms["bert.encoder.layer.0.output.LayerNorm.weight"], norm.numpy())
    self.assertIn("bert.embeddings.LayerNorm.bias", norms)
    self.assertTrue(os.path.isfile(os.path.join(directory, adapterhub.LAYER_NORMS_README)))

  def test_models_without_an_adapterhub_equivalent_are_refused(self):
    directory = os.path.join(self.create_tempdir().full_path, "ah")
    with self.assertRaisesRegex(adapterhub.AdapterHubError, "first token.*pooling"):
      adapterhub.save_adapterhub(random_task_model(self.handle, {}, pooling="mean"), directory,
                                 model_name="tiny-bert")
    full = classifier.build_classifier(
        adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="full"), 2)
    with self.assertRaisesRegex(adapterhub.AdapterHubError, "tuning='full'"):
      adapterhub.save_adapterhub(full, directory, model_name="tiny-bert")


class BadInputTest(tf.test.TestCase, parameterized.TestCase):
  """Each artifact AdapterHub can write but this library cannot run is one clear error."""

  def _copy(self, edit_config=None, files=()):
    directory = os.path.join(self.create_tempdir().full_path, "copy")
    shutil.copytree(os.path.join(FIXTURES, "pfeiffer"), directory)
    if edit_config:
      path = os.path.join(directory, adapterhub.CONFIG_FILE)
      with open(path, encoding="utf-8") as file:
        meta = json.load(file)
      edit_config(meta)
      with open(path, "w", encoding="utf-8") as file:
        json.dump(meta, file)
    for name in files:
      with open(os.path.join(directory, name), "wb") as file:
        file.write(b"\x80\x04pickle")
    return directory

  def test_pickled_weights_are_refused_naming_safetensors(self):
    directory = self._copy(files=["pytorch_adapter.bin"])
    os.remove(os.path.join(directory, adapterhub.WEIGHTS_FILE))
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                r"pickled \['pytorch_adapter.bin'\].*use_safetensors=True"):
      adapterhub.load_adapterhub(directory, base_handle=hub_testing.tiny_hub_handle())

  @parameterized.named_parameters(
      ("compacter", lambda m: m["config"].update(phm_layer=True), "phm_layer=True"),
      ("invertible", lambda m: m["config"].update(inv_adapter="nice"), "inv_adapter='nice'"),
      # LoRA is read now (adapterhub_lora); AdapterHub's ConfigUnion is not.
      ("config_union", lambda m: m.update(config=dict(architecture="union", configs=[])),
       "'union'"),
      ("prefix", lambda m: m.update(config=dict(architecture="prefix_tuning")),
       "'prefix_tuning'"),
      ("learned_scaling", lambda m: m["config"].update(scaling="learned"), "scaling='learned'"),
      ("activation", lambda m: m["config"].update(non_linearity="leakyrelu"), "leakyrelu"),
      ("other_model", lambda m: m.update(model_type="roberta"), "'roberta'"),
      ("wider_base", lambda m: m.update(hidden_size=768), "hidden size 768"))
  def test_unsupported_options_are_named(self, edit, message):
    directory = self._copy(edit)
    with self.assertRaisesRegex(adapterhub.AdapterHubError, message):
      adapterhub.load_adapterhub(directory, base_handle=hub_testing.tiny_hub_handle())

  def test_fusion_and_missing_head_are_named(self):
    directory = self._copy()
    with open(os.path.join(directory, "adapter_fusion_config.json"), "w") as file:
      file.write("{}")
    with self.assertRaisesRegex(adapterhub.AdapterHubError, "AdapterFusion"):
      adapterhub.load_adapterhub(directory)
    directory = self._copy()
    os.remove(os.path.join(directory, adapterhub.HEAD_CONFIG_FILE))
    with self.assertRaisesRegex(adapterhub.AdapterHubError, "with_head=True"):
      adapterhub.load_adapterhub(directory)


if __name__ == "__main__":
  tf.test.main()

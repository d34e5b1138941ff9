"""peft and AdapterHub artifacts on Keras 3: the fixtures peft and AdapterHub wrote themselves
(`interop/testdata`) load onto the embedded default as a keras-hub backbone and give those
libraries' logits, and save back as the tensors they wrote."""

import json
import os
import shutil
import subprocess
import textwrap

from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

import keras
import keras_hub

from keras_adapters.utils import warm_python
import keras_adapters as ka
from keras_adapters import keras3 as kak
from keras_adapters.hub import default_model
from keras_adapters.interop import adapterhub_format
from keras_adapters.interop import peft_format
from keras_adapters.keras3 import cross_stack_testing
from keras_adapters.keras3 import testing
from keras_adapters.utils import errors

# The logits the PyTorch libraries computed, within float32 rounding over six layers.
TOLERANCE = 1e-5
_TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "interop", "testdata")
_PEFT = os.path.join(_TESTDATA, "peft")
_ADAPTERHUB = os.path.join(_TESTDATA, "adapterhub")


def _reference(fixture):
  """The fixture's token ids as a keras-hub backbone's inputs, and the PyTorch logits."""
  with open(os.path.join(fixture, "reference_logits.json"), encoding="utf-8") as file:
    reference = json.load(file)
  inputs = {"token_ids": np.array(reference["input_word_ids"], "int32"),
            "segment_ids": np.array(reference["input_type_ids"], "int32"),
            "padding_mask": np.array(reference["input_mask"], "int32")}
  return inputs, np.array(reference["logits"], np.float32)


def _default_backbone():
  """The embedded default as a keras-hub backbone with its exact GELU, converted as
  `kak.from_tf_hub()` converts it but without probing activations: one per model."""
  handle = default_model.default_hub_handle()
  backbone = cross_stack_testing.backbone_of_hub_encoder(handle)
  backbone.tf_hub_handle = handle
  return backbone


def _tensors(folder, filename):
  return safetensors_numpy.load_file(os.path.join(folder, filename))


def _edited_copy(fixture, folder, config_file, edit):
  """A copy of `fixture` in `folder` whose JSON `config_file` is replaced by `edit(config)`."""
  copy = os.path.join(folder, os.path.basename(fixture))
  shutil.copytree(fixture, copy)
  path = os.path.join(copy, config_file)
  with open(path, encoding="utf-8") as file:
    config = json.load(file)
  with open(path, "w", encoding="utf-8") as file:
    json.dump(edit(config), file)
  return copy


class PeftFixtureTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters("lora", "dora", "lora_pooler")
  def test_reproduces_pefts_logits_and_saves_its_tensors(self, name):
    """On `from_tf_hub()`'s backbone (no backbone given), as a user loads it."""
    fixture = os.path.join(_PEFT, name)
    model = kak.load_peft(fixture)
    inputs, expected = _reference(fixture)
    self.assertAllClose(model(inputs, training=False), expected, atol=TOLERANCE, rtol=0)
    self.assertEqual(model.head_config["pooling"], "cls")
    directory = kak.save_peft(model, os.path.join(self.create_tempdir().full_path, "out"))
    ours = _tensors(directory, peft_format.WEIGHTS_FILE)
    theirs = _tensors(fixture, peft_format.WEIGHTS_FILE)
    self.assertCountEqual(ours, theirs)
    for tensor, value in theirs.items():
      np.testing.assert_array_equal(ours[tensor], value, err_msg=tensor)


class AdapterHubFixtureTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters("houlsby", "pfeiffer", "lora", "ia3", "dora")
  def test_reproduces_adapterhubs_logits_and_saves_its_tensors(self, name):
    fixture = os.path.join(_ADAPTERHUB, name)
    model = kak.load_adapterhub(fixture, _default_backbone())
    inputs, expected = _reference(fixture)
    self.assertAllClose(model(inputs, training=False), expected, atol=TOLERANCE, rtol=0)
    with open(os.path.join(fixture, adapterhub_format.CONFIG_FILE), encoding="utf-8") as file:
      self.assertEqual(model.adapter_name, json.load(file)["name"])
    directory = kak.save_adapterhub(model, os.path.join(self.create_tempdir().full_path, "out"))
    for filename in (adapterhub_format.WEIGHTS_FILE, adapterhub_format.HEAD_WEIGHTS_FILE):
      ours, theirs = _tensors(directory, filename), _tensors(fixture, filename)
      self.assertCountEqual(ours, theirs)
      for tensor, value in theirs.items():
        np.testing.assert_allclose(ours[tensor], value, rtol=1e-7, atol=0, err_msg=tensor)

  def test_parallel_adapters_give_the_keras2_readers_logits(self):
    """AdapterHub's Houlsby fixture with its config made parallel (`ParBnConfig`'s options):
    no PyTorch logits exist for it, so Keras 3 is held to the Keras 2 reader's."""
    fixture = _edited_copy(
        os.path.join(_ADAPTERHUB, "houlsby"), self.create_tempdir().full_path,
        adapterhub_format.CONFIG_FILE,
        lambda meta: dict(meta, config=dict(meta["config"], is_parallel=True, scaling=4.0)))
    inputs, houlsby_logits = _reference(fixture)
    expected = ka.load_adapterhub(fixture)(
        dict(input_word_ids=inputs["token_ids"], input_type_ids=inputs["segment_ids"],
             input_mask=inputs["padding_mask"]), training=False).numpy()
    self.assertNotAllClose(expected, houlsby_logits, atol=1e-3)
    model = kak.load_adapterhub(fixture, _default_backbone())
    self.assertAllClose(model(inputs, training=False), expected, atol=TOLERANCE, rtol=0)


class KerasHubBackboneTest(tf.test.TestCase):
  """What the loaders and writers refuse on keras-hub backbones, on the tiny random one."""

  def test_a_backbone_with_the_approximate_gelu_is_refused_for_the_default(self):
    backbone = testing.tiny_backbone()  # keras-hub's BertBackbone: tanh-approximate GELU.
    with self.assertRaisesRegex(errors.UsageError, "exact GELU.*kak.from_tf_hub"):
      kak.load_adapterhub(os.path.join(_ADAPTERHUB, "pfeiffer"), backbone)

  def test_another_base_is_named_in_the_refusal(self):
    fixture = _edited_copy(os.path.join(_PEFT, "lora"), self.create_tempdir().full_path,
                           peft_format.CONFIG_FILE,
                           lambda meta: dict(meta, base_model_name_or_path="bert-base-uncased"))
    with self.assertRaisesRegex(peft_format.PeftError, "bert-base-uncased.*backbone="):
      kak.load_peft(fixture)

  def test_save_peft_refuses_what_peft_cannot_load(self):
    folder = os.path.join(self.create_tempdir().full_path, "out")
    ia3 = kak.build_classifier(kak.adapt(testing.tiny_backbone(), kak.IA3Config()), 2)
    with self.assertRaisesRegex(peft_format.PeftError, "writes LoRAConfig adapters.*IA3Config"):
      kak.save_peft(ia3, folder, base_model_name_or_path="tiny")
    mean = kak.build_classifier(kak.adapt(testing.tiny_backbone(), kak.LoRAConfig()), 2,
                                pooling="mean")
    with self.assertRaisesRegex(peft_format.PeftError, "pooling='cls', hidden_layers=0"):
      kak.save_peft(mean, folder, base_model_name_or_path="tiny")
    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig())
    merged = kak.build_classifier(backbone, 2)
    kak.merge(backbone)
    with self.assertRaisesRegex(peft_format.PeftError, "merged into its base"):
      kak.save_peft(merged, folder, base_model_name_or_path="tiny")
    self.assertFalse(os.path.exists(folder))

  def test_a_keras_hub_classifier_round_trips_through_peft(self):
    """A `BertTextClassifier` with LoRA saves as peft's files, which load back onto the same
    base to the same logits."""
    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig(r=2, target_modules=(
        "query", "value", "intermediate")))
    testing.randomize([layer for layer in backbone._flatten_layers()  # pylint: disable=protected-access
                       if type(layer).__name__ == "MethodDelta"])
    classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=3,
                                                     preprocessor=None)
    inputs = testing.tiny_inputs()
    expected = classifier(inputs, training=False)
    directory = kak.save_peft(classifier, os.path.join(self.create_tempdir().full_path, "out"),
                              base_model_name_or_path="tiny-bert")
    model = kak.load_peft(directory, testing.tiny_backbone())
    self.assertAllClose(model(inputs, training=False), expected, atol=1e-6, rtol=0)

  def test_adapters_that_trained_layer_norms_need_layer_norms_file(self):
    backbone = kak.adapt(testing.tiny_backbone(), kak.AdapterConfig(adapter_size=4))
    model = kak.build_classifier(backbone, 2, pooling="first_token")
    norm = backbone.transformer_layers[0]._self_attention_layer_norm  # pylint: disable=protected-access
    norm.gamma.assign(norm.gamma + 0.5)
    folder = os.path.join(self.create_tempdir().full_path, "out")
    with self.assertRaisesRegex(adapterhub_format.AdapterHubError, "layer_norms='file'"):
      kak.save_adapterhub(model, folder, model_name="tiny-bert")
    self.assertFalse(os.path.exists(folder))
    kak.save_adapterhub(model, folder, model_name="tiny-bert", layer_norms="file")
    norms = _tensors(folder, adapterhub_format.LAYER_NORMS_FILE)
    np.testing.assert_array_equal(
        norms["bert.encoder.layer.0.attention.output.LayerNorm.weight"], keras.ops.convert_to_numpy(norm.gamma))
    self.assertLen(norms, 2 + 2 * 2 * 2)  # The embedding LayerNorm and each block's two.


# Saves a random-weight task of each format on the tiny backbone and loads it back onto a
# fresh one: the largest logit difference by format, on the backend the process runs.
_ROUND_TRIPS = textwrap.dedent("""
    import json, os, sys, tempfile
    import keras, numpy as np
    from keras_adapters import keras3 as kak
    from keras_adapters.keras3 import testing
    inputs, found = testing.tiny_inputs(), {"backend": keras.backend.backend()}
    for name, config, save, load, options in (
        ("peft", kak.LoRAConfig(r=2), kak.save_peft, kak.load_peft,
         dict(base_model_name_or_path="tiny")),
        ("peft_dora", kak.LoRAConfig(r=2, use_dora=True), kak.save_peft, kak.load_peft,
         dict(base_model_name_or_path="tiny")),
        ("adapterhub_dora", kak.LoRAConfig(r=2, use_dora=True, dora_variant="adapterhub"),
         kak.save_adapterhub, kak.load_adapterhub, dict(model_name="tiny")),
        ("adapterhub", kak.AdapterConfig(adapter_size=4), kak.save_adapterhub,
         kak.load_adapterhub, dict(model_name="tiny", layer_norms="file"))):
      backbone = kak.adapt(testing.tiny_backbone(), config)
      model = kak.build_classifier(backbone, 3)
      testing.randomize([layer for layer in backbone._flatten_layers()
                         if type(layer).__name__ in ("MethodDelta", "BottleneckAdapter")])
      testing.randomize([model.get_layer("logits")])
      folder = save(model, os.path.join(tempfile.mkdtemp(), name), **options)
      loaded = load(folder, testing.tiny_backbone())
      found[name] = float(np.abs(keras.ops.convert_to_numpy(loaded(inputs))
                                 - keras.ops.convert_to_numpy(model(inputs))).max())
    print(json.dumps(found))
    """)


class JaxRoundTripTest(tf.test.TestCase):
  """Both formats save and load on JAX, DoRA included, in a subprocess
  (`KERAS_BACKEND=jax`)."""

  def test_tasks_round_trip_on_jax(self):
    result = subprocess.run(warm_python.command("-c", _ROUND_TRIPS), capture_output=True,
                            text=True, env=testing.jax_environ(), timeout=600,
                            check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    found = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(found.pop("backend"), "jax")
    self.assertEqual(set(found), {"peft", "peft_dora", "adapterhub", "adapterhub_dora"})
    for name, difference in found.items():
      self.assertLess(difference, 1e-6, name)


if __name__ == "__main__":
  tf.test.main()

"""End to end: `experiments/convert_adapterhub.py` both ways, then the converted artifacts
loaded with `load_task_model` and served with `export_multitask`.

AdapterHub's own artifacts (the fixtures) run on the embedded default base; the multi-task
serving of every placement runs on the tiny random encoder of `keras_adapters.hub.testing`.
"""

import json
import os
import shutil

from absl import app
from absl import flags
from absl.testing import flagsaver
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from experiments import convert_adapterhub
from keras_adapters.hub import adapter_artifact
from keras_adapters.serving import multitask_export
from keras_adapters.serving import task_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import testing as interop_testing
from keras_adapters.interop import peft
from keras_adapters.layers import testing
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing

FLAGS = flags.FLAGS


def _convert(**flag_values):
  with flagsaver.flagsaver(**flag_values):
    convert_adapterhub.main(["convert_adapterhub"])


class ConvertAdapterHubTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # One random artifact of this library, only ever read (every conversion of it below is
    # refused or writes elsewhere): building and saving it once serves the tests that need one.
    root = os.path.join(tf.compat.v1.test.get_temp_dir(), "convert_adapterhub_test")
    shutil.rmtree(root, ignore_errors=True)
    cls.artifact = model_testing.save_random_task_artifact(
        os.path.join(root, "artifact"), hub_testing.tiny_hub_handle(),
        hub_testing.tiny_preprocess_handle())

  def test_fixtures_convert_both_ways_exactly(self):
    """AdapterHub's artifacts become artifacts whose task models give AdapterHub's logits
    (to 1e-4), and convert back to AdapterHub's own tensors."""
    for fixture in ("houlsby", "pfeiffer"):
      root = self.create_tempdir().full_path
      artifact = os.path.join(root, "artifact")
      _convert(from_adapterhub=os.path.join(interop_testing.FIXTURES, fixture),
               to_artifact=artifact)
      model = saving.load_task_model(artifact)
      inputs, expected = interop_testing.reference_inputs(fixture)
      self.assertLess(np.abs(model(inputs, training=False).numpy() - expected).max(),
                      interop_testing.TOLERANCE, msg=fixture)
      if fixture == "pfeiffer":
        back = os.path.join(root, "adapterhub")
        _convert(from_artifact=artifact, to_adapterhub=back)
        for filename in (adapterhub.WEIGHTS_FILE, adapterhub.HEAD_WEIGHTS_FILE):
          ours = safetensors_numpy.load_file(os.path.join(back, filename))
          theirs = safetensors_numpy.load_file(
              os.path.join(interop_testing.FIXTURES, fixture, filename))
          self.assertCountEqual(ours, theirs)
          for key, value in theirs.items():
            self.assertAllEqual(ours[key], value, msg=key)

  def test_lora_ia3_and_peft_fixtures_convert_both_ways_exactly(self):
    """AdapterHub's LoRA and (IA)³ artifacts and peft's LoRA artifact become artifacts whose
    task models give the PyTorch library's logits (to 1e-5), and convert back to the same
    tensors."""
    peft_fixture = os.path.join(os.path.dirname(interop_testing.FIXTURES), "peft", "lora")
    cases = [("lora", os.path.join(interop_testing.FIXTURES, "lora"), "adapterhub",
              adapterhub.WEIGHTS_FILE),
             ("ia3", os.path.join(interop_testing.FIXTURES, "ia3"), "adapterhub",
              adapterhub.WEIGHTS_FILE),
             ("peft", peft_fixture, "peft", peft.WEIGHTS_FILE)]
    for name, source, library, weights_file in cases:
      root = self.create_tempdir().full_path
      artifact = os.path.join(root, "artifact")
      _convert(**{f"from_{library}": source, "to_artifact": artifact})
      model = saving.load_task_model(artifact)
      inputs, expected = interop_testing.reference_inputs(source)
      self.assertLess(np.abs(model(inputs, training=False).numpy() - expected).max(), 1e-5,
                      msg=name)
      back = os.path.join(root, "back")
      _convert(**{"from_artifact": artifact, f"to_{library}": back})
      ours = safetensors_numpy.load_file(os.path.join(back, weights_file))
      theirs = safetensors_numpy.load_file(os.path.join(source, weights_file))
      self.assertCountEqual(ours, theirs, msg=name)
      for key, value in theirs.items():
        self.assertAllEqual(ours[key], value, msg=key)

  def test_placements_serve_through_one_multitask_savedmodel(self):
    """A task per placement (AdapterHub's three presets and the combinations that set every
    other option), each with a two-layer head on the first token (one converted from
    AdapterHub by the CLI, the others saved here), served together from one multi-task
    SavedModel: each task's signature answers as its own model."""
    root = self.create_tempdir().full_path
    handle = hub_testing.tiny_hub_handle()
    preprocessing = adapter_artifact.PreprocessingConfig(
        hub_testing.tiny_preprocess_handle(), ("text",), 16)
    artifacts, models = {}, {}
    for seed, name in enumerate(testing.PLACEMENT_VARIANTS):
      options = testing.PLACEMENT_VARIANTS[name]
      models[name] = interop_testing.random_task_model(handle, options, seed=seed)
      artifacts[name] = os.path.join(root, name)
      if name == "own_layer_norms_post_add":
        source = adapterhub.save_adapterhub(models[name], os.path.join(root, "adapterhub"),
                                            model_name="tiny-bert")
        _convert(from_adapterhub=source, to_artifact=artifacts[name], base_handle=handle,
                 base_preprocess_handle=preprocessing.handle, seq_length=preprocessing.seq_length)
      else:
        saving.save_adapters(models[name], artifacts[name], preprocessing=preprocessing,
                             label_names=["a", "b", "c"])
    served = tf.saved_model.load(multitask_export.export_multitask(
        handle, artifacts, os.path.join(root, "multitask")))
    texts = tf.constant(["w1 w2 w3", "w4 w5 w6 w7", ""])
    inputs = task_export.pack_texts(hub_testing.tiny_preprocessor(), [texts], 16)
    for name, model in models.items():
      self.assertAllClose(served.signatures[name](text=texts)["probabilities"],
                          tf.nn.softmax(model(inputs, training=False)), atol=1e-5, rtol=0,
                          msg=name)

  def test_an_artifact_given_as_adapterhub_names_the_right_flag(self):
    """This library's own artifact given to --from_adapterhub is refused with the flag that
    converts it (--from_artifact), not with an AdapterHub file it lacks."""
    root = self.create_tempdir().full_path
    artifact = self.artifact
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "an adapter artifact of this library, not an AdapterHub "
                                "adapter: load it with keras_adapters.load_task_model, or "
                                "convert it with `python experiments/convert_adapterhub.py "
                                f"--from_artifact={artifact} --to_adapterhub=<folder>`"):
      _convert(from_adapterhub=artifact, to_artifact=os.path.join(root, "out"))

  def test_a_conversion_never_replaces_other_files_or_its_source(self):
    """Into a folder of the user's files or of another kind of adapter, every target is
    refused before any work unless --overwrite, which writes only the adapter's own files;
    into its own source folder, always."""
    root = self.create_tempdir().full_path
    artifact = self.artifact
    users = os.path.join(root, "users")
    os.makedirs(users)
    for name in ("notes.txt", "results.csv"):
      with open(os.path.join(users, name), "w", encoding="utf-8") as f:
        f.write("mine")
    peft_folder = os.path.join(root, "peft")
    os.makedirs(peft_folder)
    with open(os.path.join(peft_folder, peft.CONFIG_FILE), "w", encoding="utf-8") as f:
      json.dump({"peft_type": "LORA", "r": 8}, f)
    for flag_values, target in ((dict(from_artifact=artifact, to_peft=users), users),
                                (dict(from_artifact=artifact, to_adapterhub=users), users),
                                (dict(from_artifact=artifact, to_adapterhub=peft_folder),
                                 peft_folder),
                                (dict(from_peft=peft_folder, to_artifact=users), users)):
      before = {name: open(os.path.join(target, name), "rb").read()
                for name in os.listdir(target)}
      with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                  f"'{target}' holds (other files|a peft adapter), not .*"
                                  "overwrite=True \\(--overwrite on the command line\\)"):
        _convert(**flag_values)
      self.assertEqual({name: open(os.path.join(target, name), "rb").read()
                        for name in os.listdir(target)}, before, msg=flag_values)
    for overwrite in (False, True):
      with self.assertRaisesRegex(app.UsageError, f"--to_artifact={peft_folder} is the folder "
                                  "being converted: writing there would destroy the source"):
        _convert(from_peft=peft_folder, to_artifact=peft_folder, overwrite=overwrite)
    self.assertEqual(os.listdir(peft_folder), [peft.CONFIG_FILE])

  def test_one_conversion_must_be_given(self):
    for flag_values in (dict(from_adapterhub="somewhere"),
                        dict(from_peft="a", from_adapterhub="b", to_artifact="c"),
                        dict(from_artifact="a", to_peft="b", to_adapterhub="c")):
      with self.assertRaisesRegex(app.UsageError, "Give one conversion"):
        _convert(**flag_values)


if __name__ == "__main__":
  tf.test.main()

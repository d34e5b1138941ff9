"""Saving never deletes a user's files: `save_adapters`, `save_peft` and `save_adapterhub`
into a folder that holds other files, or another kind of adapter, are refused unless
`overwrite=True`, which writes only their own files; a run whose export folders hold
something else is refused before it trains.

`save_adapters` itself is tested in `models/saving_test` and `hub/adapter_artifact_test`
(refusal, `overwrite=True`, replacing an artifact); here it is checked on a trained model of
the tiny random encoder, and through `run_task`.
"""

import os

import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import peft
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing


class UserFilesTest(tf.test.TestCase):

  def test_save_adapters_keeps_a_users_folder_unless_told_to_overwrite(self):
    model = classifier.build_classifier(
        adapted_bert.AdaptedBert(hub_testing.tiny_hub_handle(), adapter_size=4), 3)
    folder = self.create_tempdir().full_path
    notes = os.path.join(folder, "notes.txt")
    with open(notes, "w", encoding="utf-8") as f:
      f.write("mine")
    with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError,
                                "holds other files, not an adapter artifact.*"
                                "pass overwrite=True"):
      saving.save_adapters(model, folder)
    self.assertEqual(os.listdir(folder), ["notes.txt"])
    saving.save_adapters(model, folder, overwrite=True)
    saving.save_adapters(model, folder)  # An artifact is replaced without asking.
    with open(notes, encoding="utf-8") as f:
      self.assertEqual(f.read(), "mine")  # Beside it, the user's file stays.
    self.assertEqual(adapter_artifact.folder_kind(folder), adapter_artifact.ARTIFACT)

  def test_each_writer_keeps_a_folder_of_another_kind_unless_told(self):
    """save_peft, save_adapterhub and save_adapters refuse a folder of other files or of
    another kind of adapter (the same path given to the wrong writer); with overwrite=True
    they write only their own files, and the user's stay."""
    model = classifier.build_classifier(
        adapted_bert.AdaptedBert(hub_testing.tiny_hub_handle(),
                                 adapter_config=LoRAConfig(r=2)), 3, pooling="cls")
    root = self.create_tempdir().full_path
    writers = {
        adapter_artifact.PEFT: lambda folder, **kwargs: peft.save_peft(
            model, folder, base_model_name_or_path="tiny", **kwargs),
        adapter_artifact.ADAPTERHUB: lambda folder, **kwargs: adapterhub.save_adapterhub(
            model, folder, model_name="tiny", **kwargs),
        adapter_artifact.ARTIFACT: lambda folder, **kwargs: saving.save_adapters(
            model, folder, **kwargs)}
    errors = {adapter_artifact.PEFT: peft.PeftError,
              adapter_artifact.ADAPTERHUB: adapterhub.AdapterHubError,
              adapter_artifact.ARTIFACT: adapter_artifact.AdapterArtifactError}
    for kind, write in writers.items():
      write(os.path.join(root, kind))
      self.assertEqual(adapter_artifact.folder_kind(os.path.join(root, kind)), kind)
    for kind, write in writers.items():
      for other in writers:
        if other == kind:
          continue
        folder = os.path.join(root, other)
        before = {name: open(os.path.join(folder, name), "rb").read()
                  for name in os.listdir(folder)}
        with self.assertRaisesRegex(errors[kind], f"'{folder}' holds .*, not .*; writing there "
                                    "would replace its files.*overwrite=True"):
          write(folder)
        self.assertEqual({name: open(os.path.join(folder, name), "rb").read()
                          for name in os.listdir(folder)}, before)
      mine = os.path.join(root, f"notes_then_{kind}")
      os.makedirs(mine)
      with open(os.path.join(mine, "notes.txt"), "w", encoding="utf-8") as f:
        f.write("mine")
      with self.assertRaisesRegex(errors[kind], "holds other files"):
        write(mine)
      write(mine, overwrite=True)
      self.assertIn("notes.txt", os.listdir(mine))
      self.assertEqual(adapter_artifact.folder_kind(mine), kind)

  def test_a_run_does_not_train_when_its_export_would_replace_a_users_folder(self):
    spec, splits = testing.colour_task()
    root = self.create_tempdir().full_path
    export_dir = os.path.join(root, "export")
    os.makedirs(os.path.join(export_dir, "adapters"))
    with open(os.path.join(export_dir, "adapters", "notes.txt"), "w", encoding="utf-8"):
      pass
    model_dir = os.path.join(root, "run")
    with self.assertRaisesRegex(ValueError, f"export_dir='{export_dir}' holds a folder adapters/ "
                                "that is not an export; exporting would replace it"):
      classification.run_task(spec, splits, testing.run_config(), model_dir,
                           export_dir=export_dir)
    self.assertEqual(os.listdir(os.path.join(export_dir, "adapters")), ["notes.txt"])
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()

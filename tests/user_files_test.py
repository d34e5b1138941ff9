"""Saving never deletes a user's files: `save_adapters` into a non-empty folder that is not an
artifact is refused unless `overwrite=True`, and a run whose export folders hold something
else is refused before it trains.

`save_adapters` itself is tested in `models/saving_test` and `hub/adapter_artifact_test`
(refusal, `overwrite=True`, replacing an artifact); here it is checked on a trained model of
the tiny random encoder, and through `run_task`.
"""

import os

import tensorflow as tf

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing as hub_testing
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
                                "is a non-empty folder that is not an adapter artifact.*"
                                "pass overwrite=True"):
      saving.save_adapters(model, folder)
    self.assertEqual(os.listdir(folder), ["notes.txt"])
    saving.save_adapters(model, folder, overwrite=True)
    self.assertFalse(os.path.exists(notes))
    saving.save_adapters(model, folder)  # An artifact is replaced without asking.

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

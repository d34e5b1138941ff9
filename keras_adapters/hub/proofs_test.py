"""Tests for proofs: records named by a digest of a SavedModel's files, and its variables
read from its checkpoint."""

import os
import shutil
from unittest import mock

import tensorflow as tf

from keras_adapters import version
from keras_adapters.hub import proofs
from keras_adapters.hub import saved_model_facts
from keras_adapters.hub import testing


class CheckpointVariablesTest(tf.test.TestCase):

  def test_every_variable_a_load_restores_with_its_name_and_value(self):
    """On the Model Garden's exports (the masked-LM head and `do_lower_case` included), the
    checkpoint gives each variable a load restores: by its name, with its value."""
    root = self.create_tempdir().full_path
    for name in ("legacy_exact_gelu_with_mlm", "bert_sentencepiece_copy_pooler"):
      with self.subTest(variant=name):
        handle = testing.export_model_garden_variant(name, root)
        restored = {node.name.removesuffix(":0"): node.numpy() for node in
                    saved_model_facts.tracked_objects(tf.saved_model.load(handle))
                    if isinstance(node, tf.Variable)}
        read = proofs.checkpoint_variables(handle)
        self.assertCountEqual([name for name, _ in read], restored)
        for variable_name, value in read:
          self.assertAllEqual(value, restored[variable_name], msg=variable_name)


class KeyTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.export = os.path.join(self.create_tempdir().full_path, "encoder")
    shutil.copytree(testing.tiny_hub_handle(), self.export)
    self.digest = proofs.key(self.export, "hub_encoder")

  def test_the_same_files_anywhere_have_the_same_key(self):
    copy = os.path.join(self.create_tempdir().full_path, "copy")
    shutil.copytree(self.export, copy)
    self.assertEqual(proofs.key(copy, "hub_encoder"), self.digest)

  def test_a_changed_byte_an_added_file_or_another_reader_has_another_key(self):
    self.assertNotEqual(proofs.key(self.export, "keras3_tf_hub_bert"), self.digest)
    data = tf.io.gfile.glob(os.path.join(self.export, "variables", "variables.data-*"))[0]
    with open(data, "r+b") as f:
      first = f.read(1)
      f.seek(0)
      f.write(bytes([first[0] ^ 1]))
    changed = proofs.key(self.export, "hub_encoder")
    self.assertNotEqual(changed, self.digest)
    with open(os.path.join(self.export, "assets", "extra.txt"), "w", encoding="utf-8") as f:
      f.write("x")
    self.assertNotIn(proofs.key(self.export, "hub_encoder"), (self.digest, changed))

  def test_another_version_of_the_library_or_of_tensorflow_has_another_key(self):
    with mock.patch.object(version, "__version__", "0.0.0"):
      self.assertNotEqual(proofs.key(self.export, "hub_encoder"), self.digest)
    with mock.patch.object(tf, "__version__", "0.0.0"):
      self.assertNotEqual(proofs.key(self.export, "hub_encoder"), self.digest)


class RecordsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    self.enter_context(mock.patch.dict(os.environ, {proofs.SETTING: self.folder}))

  def test_a_record_is_recalled_as_written_and_none_before(self):
    self.assertIsNone(proofs.recall("a" * 64))
    record = dict(config=dict(hidden_size=16, activation="gelu"), parity=1.5e-7, tokenizer=None)
    proofs.remember("a" * 64, record)
    self.assertEqual(proofs.recall("a" * 64), record)
    self.assertEqual(os.listdir(self.folder), ["a" * 64 + ".json"])

  def test_a_record_that_is_not_a_json_object_is_no_record(self):
    for text in ("{not json", "[1, 2]"):
      with open(os.path.join(self.folder, "b" * 64 + ".json"), "w", encoding="utf-8") as f:
        f.write(text)
      self.assertIsNone(proofs.recall("b" * 64), msg=text)

  def test_a_folder_that_cannot_be_written_keeps_nothing_and_says_nothing(self):
    blocker = os.path.join(self.folder, "a_file")
    with open(blocker, "w", encoding="utf-8") as f:
      f.write("")
    with mock.patch.dict(os.environ, {proofs.SETTING: os.path.join(blocker, "proofs")}):
      proofs.remember("c" * 64, dict(parity=0.0))
      self.assertIsNone(proofs.recall("c" * 64))

  def test_without_the_setting_the_records_are_in_the_cache(self):
    with mock.patch.dict(os.environ, {proofs.SETTING: "", "KERAS_ADAPTERS_CACHE": "/c"}):
      self.assertEqual(proofs.folder(), os.path.join("/c", "proofs"))


if __name__ == "__main__":
  tf.test.main()

"""keras-hub LoRA files are read and written by layer name with shape checks: files of
keras-hub's own `save_lora_weights` and of `save_keras_hub_lora` load to the same outputs, and
a file of another architecture or rank is refused naming the first mismatch."""

import os

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.keras3 import testing
from keras_adapters.utils import errors


def lora_backbone(seed=0, rank=2, **sizes):
  """A tiny backbone with keras-hub's LoRA of `rank`, its LoRA factors random."""
  keras.utils.set_random_seed(seed)
  backbone = keras_hub.models.BertBackbone(**dict(testing.TINY_BACKBONE, **sizes), dropout=0.0)
  backbone.enable_lora(rank)
  rng = np.random.RandomState(seed + 5)
  for layer in backbone._flatten_layers():  # pylint: disable=protected-access
    if getattr(layer, "lora_enabled", False):
      for factor in (layer.lora_kernel_a, layer.lora_kernel_b):
        factor.assign(rng.normal(scale=0.3, size=factor.shape).astype("float32"))
  return backbone


def fresh_backbone(seed=0, **sizes):
  keras.utils.set_random_seed(seed)
  return keras_hub.models.BertBackbone(**dict(testing.TINY_BACKBONE, **sizes), dropout=0.0)


class KerasHubLoraTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.inputs = testing.tiny_inputs()
    self.trained = lora_backbone()
    self.expected = testing.sequence_output(self.trained, self.inputs)
    self.folder = self.create_tempdir().full_path

  def test_our_file_loads_by_name_and_keras_hub_reads_it(self):
    path = kak.save_keras_hub_lora(self.trained, os.path.join(self.folder, "task.lora.h5"))
    loaded = fresh_backbone()
    kak.load_keras_hub_lora(loaded, path)
    self.assertAllClose(testing.sequence_output(loaded, self.inputs), self.expected, atol=1e-6)
    by_keras_hub = fresh_backbone()
    by_keras_hub.load_lora_weights(path)
    self.assertAllClose(testing.sequence_output(by_keras_hub, self.inputs), self.expected,
                        atol=1e-6)

  def test_a_file_of_keras_hub_loads_with_its_positions_checked(self):
    path = os.path.join(self.folder, "keras_hub.lora.h5")
    self.trained.save_lora_weights(path)
    loaded = fresh_backbone()
    kak.load_keras_hub_lora(loaded, path)
    self.assertAllClose(testing.sequence_output(loaded, self.inputs), self.expected, atol=1e-6)

  def test_files_of_another_architecture_or_rank_are_refused_before_any_change(self):
    ours = kak.save_keras_hub_lora(self.trained, os.path.join(self.folder, "ours.lora.h5"))
    theirs = os.path.join(self.folder, "theirs.lora.h5")
    self.trained.save_lora_weights(theirs)
    cases = [
        (ours, dict(num_layers=3), "holds no LoRA for layer 'transformer_layer_2/"),
        (theirs, dict(num_layers=3), "holds no LoRA for layer 'transformer_layer_2/"),
        (ours, dict(hidden_dim=32, intermediate_dim=64), r"of shapes \[16, 2, 2\]"),
        (theirs, dict(num_heads=4), r"of shapes \[16, 2, 2\]"),
    ]
    for path, sizes, message in cases:
      backbone = fresh_backbone(**sizes)
      with self.assertRaisesRegex(errors.UsageError, message):
        kak.load_keras_hub_lora(backbone, path)
      self.assertFalse(getattr(backbone, "_lora_enabled_layers", None), (path, sizes))
    other_rank = fresh_backbone()
    other_rank.enable_lora(4)
    with self.assertRaisesRegex(errors.UsageError, "rank 2; the backbone's LoRA has rank 4"):
      kak.load_keras_hub_lora(other_rank, ours)
    with self.assertRaisesRegex(errors.UsageError, "not a keras-hub LoRA file"):
      with open(os.path.join(self.folder, "bad.lora.h5"), "w", encoding="utf-8") as file:
        file.write("not hdf5")
      kak.load_keras_hub_lora(fresh_backbone(), os.path.join(self.folder, "bad.lora.h5"))


if __name__ == "__main__":
  tf.test.main()

"""The paper's guarantees: a frozen shared base, and a new task never changes an old one."""

import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

import keras_adapters as ka
from keras_adapters.hub import testing

_SEQ_LENGTH = 8


class TaskIsolationTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = os.path.join(tf.compat.v1.test.get_temp_dir(), "task_isolation_test")
    os.makedirs(root, exist_ok=True)
    cls.handle = testing.tiny_hub_handle()
    cls.preprocessor = testing.tiny_preprocessor(_SEQ_LENGTH)

  def _train(self, num_classes, seed):
    keras.utils.set_random_seed(seed)
    bert = ka.AdaptedBert(self.handle, adapter_size=4)
    model = ka.build_classifier(bert, num_classes)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    words = np.array(testing.TINY_WORDS)
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(words, 4)) for _ in range(32)]
    inputs = self.preprocessor(tf.constant(texts))
    labels = rng.integers(0, num_classes, size=32)
    model.fit(inputs, labels, batch_size=8, epochs=2, verbose=0)
    return bert, model, inputs

  def test_training_leaves_the_base_bitwise_unchanged(self):
    """Every frozen encoder variable and the Hub SavedModel on disk keep their exact bytes."""
    disk_before = testing.folder_digest(self.handle)
    bert = ka.AdaptedBert(self.handle, adapter_size=4)
    frozen_before = {v.name: v.numpy().copy() for v in bert.non_trainable_weights}
    trainable_before = [v.numpy().copy() for v in bert.trainable_weights]
    model = ka.build_classifier(bert, 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs = self.preprocessor(tf.constant(["w1 w2", "w3 w4 w5"] * 8))
    model.fit(inputs, np.array([0, 1] * 8), batch_size=4, epochs=1, verbose=0)
    self.assertNotEmpty(frozen_before)
    for variable in bert.non_trainable_weights:
      self.assertTrue(np.array_equal(variable.numpy(), frozen_before[variable.name]),
                      variable.name)
    moved = [not np.array_equal(v.numpy(), b)
             for v, b in zip(bert.trainable_weights, trainable_before)]
    self.assertTrue(all(moved), "every adapter and LayerNorm variable should have trained")
    self.assertEqual(testing.folder_digest(self.handle), disk_before)

  def test_training_task_b_leaves_task_a_unchanged(self):
    """Task A's artifact, export and outputs are bitwise identical after task B is trained."""
    root = self.create_tempdir().full_path
    _, model_a, inputs_a = self._train(num_classes=3, seed=1)
    ka.save_adapters(model_a, os.path.join(root, "a_adapters"))
    ka.export_task(model_a, self.preprocessor, os.path.join(root, "a_export"),
                   seq_length=_SEQ_LENGTH, label_names=["x", "y", "z"])
    digests = {name: testing.folder_digest(os.path.join(root, name))
               for name in ("a_adapters", "a_export")}
    outputs_a = model_a(inputs_a).numpy()

    _, model_b, _ = self._train(num_classes=2, seed=2)
    ka.save_adapters(model_b, os.path.join(root, "b_adapters"))

    for name, digest in digests.items():
      self.assertEqual(testing.folder_digest(os.path.join(root, name)), digest, name)
    self.assertTrue(np.array_equal(model_a(inputs_a).numpy(), outputs_a))
    reloaded = ka.build_classifier(ka.AdaptedBert(self.handle, adapter_size=4), 3)
    ka.load_adapters(reloaded, os.path.join(root, "a_adapters"))
    self.assertTrue(np.array_equal(reloaded(inputs_a).numpy(), outputs_a))


if __name__ == "__main__":
  tf.test.main()

"""Exports a no-BERT classifier as a SavedModel: strings in, probabilities out."""

from typing import Sequence

import tensorflow as tf
import tf_keras as keras

from keras_adapters.utils import atomic_io


class _Classifier(tf.Module):

  def __init__(self, model: keras.Model, label_names: Sequence[str]):
    super().__init__(name="classifier")
    self.model = model
    # Saved with the model so a server can map class ids back to names without our code.
    self.label_names = tf.Variable(list(label_names), dtype=tf.string, trainable=False,
                                   name="label_names")

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
  def __call__(self, text):
    return {"probabilities": tf.nn.softmax(self.model(text, training=False), axis=-1)}


def export_classifier(model: keras.Model, export_dir: str, label_names: Sequence[str]) -> str:
  """Writes a SavedModel serving `model` on raw text.

  Its `serving_default` signature takes a string `text` `[batch]` and returns `probabilities`
  `[batch, classes]`; `__call__` does the same for `tf.saved_model.load` and
  `hub.KerasLayer`; `label_names` holds the class names. The text embedding travels inside,
  so serving needs TensorFlow and tensorflow-text only.

  Args:
    model: A trained model from `deep_and_wide.build_classifier`.
    export_dir: Folder to write, replaced atomically.
    label_names: Class names in logit order.

  Returns:
    `export_dir`.
  """
  module = _Classifier(model, label_names)
  with atomic_io.atomic_directory(export_dir) as staging:
    # The function, not its concrete function: one made concrete before saving is traced
    # again by the save.
    tf.saved_model.save(module, staging, signatures={"serving_default": module.__call__})
  return export_dir

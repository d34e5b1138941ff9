"""Saves a Keras BERT encoder as a TF Hub-format SavedModel."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import atomic_io


def save_hub_encoder(encoder, export_dir):
  """Exports `encoder` with the TF Hub BERT encoder interface.

  The SavedModel maps the dict `input_word_ids`, `input_mask`, `input_type_ids` (int32
  `[batch, seq_length]`) to `sequence_output`, `pooled_output`, `encoder_outputs` and
  `default`, with `training` traced both ways, as the Model Garden's TF Hub exports do. It
  loads with `hub.KerasLayer(export_dir)` or `tf.saved_model.load(export_dir)` and needs no
  code of this package.

  Args:
    encoder: An `AdaptedBertEncoder`; its variables keep their Model Garden names.
    export_dir: Folder to write; replaced atomically if it exists.

  Returns:
    `export_dir`.
  """
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  model = keras.Model(inputs, encoder(inputs), name="bert_encoder")
  with atomic_io.atomic_directory(export_dir) as staging:
    model.save(staging, include_optimizer=False, save_format="tf")
  return export_dir

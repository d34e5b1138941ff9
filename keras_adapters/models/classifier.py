"""The task model of the paper's experiments: an encoder plus a classification head."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.networks import adapted_bert_encoder


def build_classifier(encoder, num_classes, dropout_rate=0.1, name="classifier"):
  """Puts a dropout + dense head on the pooled output of `encoder`.

  Args:
    encoder: A layer mapping the TF Hub BERT input dict to its output dict, such as
      `AdaptedBert` (or `hub.KerasLayer` of an encoder).
    num_classes: Number of classes; 1 for a regression task (one score).
    dropout_rate: Dropout before the head while training.
    name: Model name.

  Returns:
    A `keras.Model` from the BERT input dict to logits `[batch, num_classes]`.
  """
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  pooled = encoder(inputs)["pooled_output"]
  pooled = keras.layers.Dropout(dropout_rate, name="head_dropout")(pooled)
  logits = keras.layers.Dense(
      num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      name="logits")(pooled)
  return keras.Model(inputs, logits, name=name)

"""The task model of the paper's experiments: an encoder plus a classification head."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.models import adapted_bert
from keras_adapters.networks import adapted_bert_encoder


POOLINGS = ("cls", "mean")


def build_classifier(encoder, num_classes, dropout_rate=0.1, pooling="cls",
                     name="classifier"):
  """Puts a dropout + dense head on a pooled representation of `encoder`'s output.

  Args:
    encoder: A layer mapping the TF Hub BERT input dict to its output dict, such as
      `AdaptedBert` (or `hub.KerasLayer` of an encoder).
    num_classes: Number of classes; 1 for a regression task (one score).
    dropout_rate: Dropout before the head while training.
    pooling: `"cls"`: BERT's `pooled_output` (the paper's head); `"mean"`: the mean of
      `sequence_output` over real tokens, what sentence-embedding models such as the default
      all-MiniLM-L6-v2 were trained to produce (their pooler was never trained). With
      `"mean"`, an `AdaptedBert`'s pooler is frozen: it gets no gradient, so it must not count
      as trained.
    name: Model name.

  Returns:
    A `keras.Model` from the BERT input dict to logits `[batch, num_classes]`.
  """
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  if pooling not in POOLINGS:
    raise ValueError(f"Unknown pooling {pooling!r}; choose one of {list(POOLINGS)}.")
  if pooling == "mean" and isinstance(encoder, adapted_bert.AdaptedBert):
    encoder.encoder.pooler_transform.trainable = False
  outputs = encoder(inputs)
  if pooling == "cls":
    pooled = outputs["pooled_output"]
  else:
    mask = tf.cast(inputs["input_mask"], outputs["sequence_output"].dtype)[:, :, tf.newaxis]
    pooled = (tf.reduce_sum(outputs["sequence_output"] * mask, axis=1)
              / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0))
  pooled = keras.layers.Dropout(dropout_rate, name="head_dropout")(pooled)
  logits = keras.layers.Dense(
      num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      name="logits")(pooled)
  return keras.Model(inputs, logits, name=name)

"""The task model of the paper's experiments: an encoder plus a classification head."""

import dataclasses
import numbers
from typing import Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from keras_adapters.models import adapted_bert
from keras_adapters.networks import adapted_bert_encoder


POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class HeadConfig:
  """What `build_classifier` put on the encoder, as recorded in an adapter artifact.

  Attributes:
    num_classes: Logits of the head; 1 for a regression task (one score).
    pooling: `"cls"` or `"mean"` (see `build_classifier`).
    dropout_rate: Dropout before the head while training.
    label_names: Class names in logit order, once known (`save_adapters(label_names=...)`).
    kind: The head's kind, `"classifier"`.
  """
  num_classes: int
  pooling: str = "cls"
  dropout_rate: float = 0.1
  label_names: Optional[Tuple[str, ...]] = None
  kind: str = "classifier"


def build_classifier(encoder, num_classes, dropout_rate=0.1, pooling="cls",
                     name="classifier"):
  """Puts a dropout + dense head on a pooled representation of `encoder`'s output.

  Args:
    encoder: A layer mapping the TF Hub BERT input dict to its output dict, such as
      `AdaptedBert` (or `hub.KerasLayer` of an encoder). An `AdaptedBert` serves the model
      with its adapter set active now, whatever set is active later.
    num_classes: Number of classes; 1 for a regression task (one score).
    dropout_rate: Dropout before the head while training.
    pooling: `"cls"`: BERT's `pooled_output` (the paper's head); `"mean"`: the mean of
      `sequence_output` over real tokens, what sentence-embedding models such as the default
      all-MiniLM-L6-v2 were trained to produce (their pooler was never trained). With
      `"mean"`, an `AdaptedBert`'s pooler is frozen: it gets no gradient, so it must not count
      as trained.
    name: Model name.

  Returns:
    A `keras.Model` from the BERT input dict to logits `[batch, num_classes]`. Its
    `head_config` (a `HeadConfig`) describes the head and its `adapter_name` is the adapter
    set it serves (`None` for an encoder other than `AdaptedBert`).
  """
  if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or (
      num_classes < 1):
    raise ValueError(f"num_classes={num_classes!r}: give the number of classes (at least 2), "
                     "or 1 for a regression task's single score.")
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  if pooling not in POOLINGS:
    raise ValueError(f"Unknown pooling {pooling!r}; choose one of {list(POOLINGS)}.")
  adapter_name = None
  if isinstance(encoder, adapted_bert.AdaptedBert):
    if pooling == "mean":
      encoder.encoder.pooler_transform.trainable = False
    # Recorded in the model's graph, so the model keeps this set when another is activated.
    adapter_name = encoder.active_adapter
    outputs = encoder(inputs, adapter_name=adapter_name)
  else:
    outputs = encoder(inputs)
  if pooling == "cls":
    pooled = outputs["pooled_output"]
  else:
    pooled = adapted_bert_encoder.masked_mean(outputs["sequence_output"], inputs["input_mask"])
  pooled = keras.layers.Dropout(dropout_rate, name="head_dropout")(pooled)
  logits = keras.layers.Dense(
      num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      name="logits")(pooled)
  model = keras.Model(inputs, logits, name=name)
  model.head_config = HeadConfig(num_classes, pooling, dropout_rate)
  model.adapter_name = adapter_name
  return model

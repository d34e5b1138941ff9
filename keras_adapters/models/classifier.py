"""The task model of the paper's experiments: an encoder plus a classification head."""

import dataclasses
import numbers
from typing import Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from keras_adapters.models import adapted_bert
from keras_adapters.networks import adapted_bert_encoder


POOLINGS = ("cls", "mean", "first_token")


@dataclasses.dataclass(frozen=True)
class HeadConfig:
  """What `build_classifier` put on the encoder, as recorded in an adapter artifact.

  Attributes:
    num_classes: Logits of the head; 1 for a regression task (one score).
    pooling: `"cls"`, `"mean"` or `"first_token"` (see `build_classifier`).
    dropout_rate: Dropout before each of the head's dense layers while training.
    label_names: Class names in logit order, once known (`save_adapters(label_names=...)`).
    kind: The head's kind, `"classifier"`.
    hidden_layers: Dense layers of the hidden size before the logits (AdapterHub's
      classification heads have `layers - 1` of them).
    hidden_activation: Their activation.
  """
  num_classes: int
  pooling: str = "cls"
  dropout_rate: float = 0.1
  label_names: Optional[Tuple[str, ...]] = None
  kind: str = "classifier"
  hidden_layers: int = 0
  hidden_activation: str = "tanh"


def build_classifier(encoder, num_classes, dropout_rate=0.1, pooling="cls",
                     name="classifier", hidden_layers=0, hidden_activation="tanh"):
  """Puts a dropout + dense head on a pooled representation of `encoder`'s output.

  Args:
    encoder: A layer mapping the TF Hub BERT input dict to its output dict, such as
      `AdaptedBert` (or `hub.KerasLayer` of an encoder). An `AdaptedBert` serves the model
      with its adapter set active now, whatever set is active later.
    num_classes: Number of classes; 1 for a regression task (one score).
    dropout_rate: Dropout before the head while training.
    pooling: `"cls"`: BERT's `pooled_output` (the paper's head); `"mean"`: the mean of
      `sequence_output` over real tokens, what sentence-embedding models such as the default
      all-MiniLM-L6-v2 were trained to produce (their pooler was never trained);
      `"first_token"`: the first token's `sequence_output` without the pooler (AdapterHub's
      heads with `use_pooler=False`). With these two, an `AdaptedBert`'s pooler is frozen: it
      gets no gradient, so it must not count as trained.
    name: Model name.
    hidden_layers: Dropout + dense (hidden size) + `hidden_activation` layers before the
      logits' dropout + dense, as AdapterHub's classification heads of `layers=2` have one.
    hidden_activation: Activation of the hidden layers, a Keras activation name.

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
  if isinstance(hidden_layers, bool) or not isinstance(hidden_layers, int) or hidden_layers < 0:
    raise ValueError(f"hidden_layers={hidden_layers!r}: give a number of layers >= 0.")
  if isinstance(encoder, adapted_bert.AdaptedBert):
    if pooling != "cls":
      encoder.encoder.pooler_transform.trainable = False
    # Recorded in the model's graph, so the model keeps this set when another is activated.
    adapter_name = encoder.active_adapter
    outputs = encoder(inputs, adapter_name=adapter_name)
  else:
    outputs = encoder(inputs)
  pooled = pool(outputs, inputs["input_mask"], pooling)
  for index in range(hidden_layers):
    pooled = keras.layers.Dropout(dropout_rate, name=f"head_dropout_{index}")(pooled)
    pooled = keras.layers.Dense(
        pooled.shape[-1], activation=hidden_activation, name=f"head_hidden_{index}",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02))(pooled)
  pooled = keras.layers.Dropout(dropout_rate, name="head_dropout")(pooled)
  # Logits in float32 under mixed precision too, as the Model Garden's heads: the softmax and
  # loss on them need float32, and exports serve them.
  logits = keras.layers.Dense(
      num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      dtype="float32", name="logits")(pooled)
  model = keras.Model(inputs, logits, name=name)
  model.head_config = HeadConfig(num_classes, pooling, dropout_rate,
                                 hidden_layers=hidden_layers,
                                 hidden_activation=hidden_activation)
  model.adapter_name = adapter_name
  return model


def pool(outputs, input_mask, pooling):
  """The representation a head reads from an encoder's output dict, by `pooling`."""
  if pooling == "cls":
    return outputs["pooled_output"]
  if pooling == "first_token":
    return outputs["sequence_output"][:, 0]
  return adapted_bert_encoder.masked_mean(outputs["sequence_output"], input_mask)

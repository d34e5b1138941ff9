"""The task model of the paper's experiments: an encoder plus a classification head."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier_head
from keras_adapters.networks import adapted_bert_encoder

# Defined with the head both stacks share; named here too, where they were first.
POOLINGS = classifier_head.POOLINGS
HeadConfig = classifier_head.HeadConfig


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
  classifier_head.check_head(num_classes, pooling, hidden_layers)
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  adapter_name = None
  if isinstance(encoder, adapted_bert.AdaptedBert):
    if pooling != "cls":
      encoder.encoder.pooler_transform.trainable = False
    # Recorded in the model's graph, so the model keeps this set when another is activated.
    adapter_name = encoder.active_adapter
    outputs = encoder(inputs, adapter_name=adapter_name)
  else:
    outputs = encoder(inputs)
  pooled = classifier_head.pool(outputs, pooling, lambda sequence: (
      adapted_bert_encoder.masked_mean(sequence, inputs["input_mask"])))
  logits = classifier_head.logits(keras, pooled, num_classes, dropout_rate, hidden_layers,
                                  hidden_activation)
  model = keras.Model(inputs, logits, name=name)
  model.head_config = HeadConfig(num_classes, pooling, dropout_rate,
                                 hidden_layers=hidden_layers,
                                 hidden_activation=hidden_activation)
  model.adapter_name = adapter_name
  return model


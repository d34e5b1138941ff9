"""The extractive question-answering model: an encoder plus the Model Garden's span head."""

import tensorflow as tf
import tf_keras as keras
from official.nlp.modeling import networks

from keras_adapters.models import adapted_bert
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision

# The logit of padding positions: no softmax gives them weight, so a window's logits do not
# depend on how far its batch is padded.
MASKED_LOGIT = -1e4


def build_span_labeler(encoder, name="span_labeler"):
  """Puts a start/end span head on `encoder`'s `sequence_output`, as BERT does for SQuAD.

  The head is the Model Garden's `networks.SpanLabeling` (one dense layer giving a start and
  an end logit per token), on every token of the sequence output; padding positions get
  `MASKED_LOGIT`. With an `AdaptedBert`, the pooler, which the head never reads, is frozen so
  that `top_k` and `full` count only what gets gradients.

  Example:
  ```python
  encoder = keras_adapters.AdaptedBert(keras_adapters.default_hub_handle(), adapter_size=64)
  model = keras_adapters.build_span_labeler(encoder)
  outputs = model(inputs)  # {"start_logits": [batch, seq], "end_logits": [batch, seq]}
  ```

  Args:
    encoder: A layer mapping the TF Hub BERT input dict to its output dict, such as
      `AdaptedBert` (or `hub.KerasLayer` of an encoder).
    name: Model name.

  Returns:
    A `keras.Model` from the BERT input dict to `start_logits` and `end_logits`, float32
    `[batch, seq_length]`. Its `adapter_name` is the `AdaptedBert` adapter set it serves
    (`None` for another encoder); `save_adapters` saves that set and the head.
  """
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  adapter_name = None
  if isinstance(encoder, adapted_bert.AdaptedBert):
    encoder.encoder.pooler_transform.trainable = False
    # Recorded in the model's graph, as `build_classifier` does: the model keeps serving this
    # adapter set when another one is activated.
    adapter_name = encoder.active_adapter
    sequence_output = encoder(inputs, adapter_name=adapter_name)["sequence_output"]
  else:
    sequence_output = encoder(inputs)["sequence_output"]
  # Logits in float32 under mixed precision too, as the classifier's: the Model Garden's head
  # takes no dtype for its dense layer and creates it in the global policy, so it is built
  # under float32.
  with precision.policy_scope("float32"):
    span_labeling = networks.SpanLabeling(
        input_width=sequence_output.shape[-1],
        initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        name="span_labeling")
  start_logits, end_logits = span_labeling(sequence_output)
  real = tf.cast(inputs["input_mask"], tf.bool)
  outputs = {key: tf.where(real, logits, MASKED_LOGIT)
             for key, logits in (("start_logits", start_logits), ("end_logits", end_logits))}
  model = keras.Model(inputs, outputs, name=name)
  model.adapter_name = adapter_name
  return model


def span_loss(labels, outputs):
  """Per-window loss: the mean of the start and end positions' softmax cross-entropies.

  Args:
    labels: int `[batch, 2]`, the answer's start and end token positions.
    outputs: The span labeler's output dict.

  Returns:
    float32 `[batch]`.
  """
  labels = tf.cast(labels, tf.int32)
  losses = [tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, i], outputs[key])
            for i, key in enumerate(("start_logits", "end_logits"))]
  return (losses[0] + losses[1]) / 2.0

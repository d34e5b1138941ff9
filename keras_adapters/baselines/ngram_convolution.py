"""The convolution branch of the search space (Table 5, knobs 5-11) as a Keras layer."""

import tensorflow as tf
import tf_keras as keras

from keras_adapters.baselines import activations


@keras.utils.register_keras_serializable(package="keras_adapters")
class NgramConvolution(keras.layers.Layer):
  """Convolutions over token embeddings, max-pooled over each text's tokens.

  One convolution per n-gram length 1 ... `max_ngram`, each with `filters` filters, is
  applied to the (dropped-out) token embeddings, then `activation`, then a max over the
  text's real tokens (padding excluded; a text without tokens gives zeros), then optional
  batch normalisation of the pooled features and dropout.

  Example:
    ```
    layer = NgramConvolution(filters=64, max_ngram=3)
    layer([token_embeddings, token_mask])   # [batch, 3 * 64]
    ```
  """

  def __init__(self, filters: int, max_ngram: int, activation: str = "relu",
               batch_norm: bool = False, dropout: float = 0.0,
               embedding_dropout: float = 0.0, regularization: float = 0.0, **kwargs):
    """Stores the configuration.

    Args:
      filters: Filters per n-gram length (knob 10).
      max_ngram: Longest n-gram (knob 8).
      activation: A name from `activations.ACTIVATIONS` (knob 6).
      batch_norm: Whether to batch-normalise the pooled features (knob 7).
      dropout: Dropout rate on the pooled features (knob 9).
      embedding_dropout: Dropout rate on the token embeddings (knob 11).
      regularization: L2 weight on the kernels (the deep tower's, knob 18).
      **kwargs: Layer arguments.
    """
    super().__init__(**kwargs)
    self.filters = filters
    self.max_ngram = max_ngram
    self.activation = activation
    self.batch_norm = batch_norm
    self.dropout = dropout
    self.embedding_dropout = embedding_dropout
    self.regularization = regularization

  def build(self, input_shape):
    self._embedding_dropout = keras.layers.Dropout(self.embedding_dropout,
                                                   name="embedding_dropout")
    self._convolutions = [
        keras.layers.Conv1D(self.filters, width, padding="same",
                            activation=activations.get(self.activation),
                            kernel_regularizer=keras.regularizers.l2(self.regularization),
                            name=f"conv_{width}")
        for width in range(1, self.max_ngram + 1)]
    self._batch_norm = (keras.layers.BatchNormalization(name="batch_norm")
                        if self.batch_norm else None)
    self._dropout = keras.layers.Dropout(self.dropout, name="dropout")
    super().build(input_shape)

  def call(self, inputs, training=None):
    embeddings, mask = inputs
    # A batch whose texts all lack tokens still needs one step to convolve.
    missing = tf.maximum(1 - tf.shape(mask)[1], 0)
    embeddings = tf.pad(embeddings, [[0, 0], [0, missing], [0, 0]])
    mask = tf.pad(mask, [[0, 0], [0, missing]])[..., tf.newaxis]
    embeddings = self._embedding_dropout(embeddings, training=training)
    pooled = []
    for convolution in self._convolutions:
      features = tf.where(mask, convolution(embeddings), embeddings.dtype.min)
      pooled.append(tf.reduce_max(features, axis=1))
    has_tokens = tf.reduce_any(mask, axis=1)
    features = tf.where(has_tokens, tf.concat(pooled, axis=-1), 0.0)
    if self._batch_norm is not None:
      features = self._batch_norm(features, training=training)
    return self._dropout(features, training=training)

  def get_config(self):
    config = super().get_config()
    config.update(filters=self.filters, max_ngram=self.max_ngram, activation=self.activation,
                  batch_norm=self.batch_norm, dropout=self.dropout,
                  embedding_dropout=self.embedding_dropout,
                  regularization=self.regularization)
    return config

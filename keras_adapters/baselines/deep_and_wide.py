"""One configuration of the no-BERT search space as a deep-and-wide tf_keras model.

  text -> TextNormalization (knobs 3, 4) -+-> hub.KerasLayer embedding (knobs 1, 2)
                                          |     -> sentence embedding, or NgramConvolution
                                          |        over its token embeddings (knobs 5-11)
                                          |     -> hidden layers (knobs 12-16) -> deep logits
                                          +-> WideTower (hashed word n-grams) -> wide logits
  logits = deep logits + wide logits

As in TensorFlow's canned deep-and-wide estimators, the deep tower trains with Adagrad and the
wide tower with FTRL, each with its own learning rate (knobs 17, 19) and L2 weight (knobs 18,
20); the embedding itself is not regularised.
"""

import math
from typing import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras as keras

from keras_adapters.baselines import activations
from keras_adapters.baselines import embeddings
from keras_adapters.baselines import hub_text_embedding
from keras_adapters.baselines import ngram_convolution
from keras_adapters.baselines import search_space
from keras_adapters.baselines import text_normalization
from keras_adapters.baselines import wide_tower

TEXT_INPUT = "text"
_WIDE = "wide_tower"


class DeepAndWideModel(keras.Model):
  """A functional model whose wide tower trains with its own optimiser.

  `compile(deep_optimizer, wide_optimizer, ...)`: every trainable variable outside the layer
  named "wide_tower" is the deep tower's.
  """

  def compile(self, deep_optimizer, wide_optimizer, **kwargs):  # pylint: disable=arguments-differ
    super().compile(optimizer=deep_optimizer, **kwargs)
    self.wide_optimizer = wide_optimizer

  def train_step(self, data):
    x, y = data
    with tf.GradientTape() as tape:
      logits = self(x, training=True)
      loss = self.compute_loss(x, y, logits)
    wide = self.get_layer(_WIDE).trainable_variables
    wide_ids = {id(v) for v in wide}
    deep = [v for v in self.trainable_variables if id(v) not in wide_ids]
    gradients = tape.gradient(loss, deep + wide)
    self.optimizer.apply_gradients(zip(gradients[:len(deep)], deep))
    self.wide_optimizer.apply_gradients(zip(gradients[len(deep):], wide))
    return self.compute_metrics(x, y, logits, sample_weight=None)


def build_classifier(config: search_space.TrialConfig, num_classes: int) -> DeepAndWideModel:
  """Builds and compiles the model of one configuration.

  Args:
    config: The configuration.
    num_classes: Number of classes.

  Returns:
    The compiled model: strings `[batch]` in, logits `[batch, num_classes]` out.
  """
  texts = keras.Input(shape=(), dtype=tf.string, name=TEXT_INPUT)
  normalized = text_normalization.TextNormalization(
      config.lower_case, config.remove_non_alphanumeric, name="normalization")(texts)
  embedding = hub.KerasLayer(
      embeddings.embedding_handle(config.embedding), trainable=config.fine_tune_embedding,
      arguments=dict(per_token=True) if config.use_convolution else None, name="embedding")
  deep_l2 = keras.regularizers.l2(config.deep_regularization)
  if config.use_convolution:
    outputs = embedding(normalized)
    x = ngram_convolution.NgramConvolution(
        config.conv_filters, config.conv_max_ngram, config.conv_activation,
        config.conv_batch_norm, config.conv_dropout, config.conv_embedding_dropout,
        config.deep_regularization, name="convolution")(
            [outputs[hub_text_embedding.TOKEN_EMBEDDINGS],
             outputs[hub_text_embedding.TOKEN_MASK]])
  else:
    x = embedding(normalized)
  for i in range(config.num_hidden_layers):
    x = keras.layers.Dense(config.hidden_size, kernel_regularizer=deep_l2,
                           name=f"hidden_{i}")(x)
    if config.hidden_normalization == "batch_norm":
      x = keras.layers.BatchNormalization(name=f"batch_norm_{i}")(x)
    elif config.hidden_normalization == "layer_norm":
      x = keras.layers.LayerNormalization(name=f"layer_norm_{i}")(x)
    x = keras.layers.Activation(activations.get(config.hidden_activation),
                                name=f"activation_{i}")(x)
    x = keras.layers.Dropout(config.hidden_dropout, name=f"dropout_{i}")(x)
  deep_logits = keras.layers.Dense(num_classes, kernel_regularizer=deep_l2,
                                   name="deep_logits")(x)
  wide_logits = wide_tower.WideTower(num_classes, regularization=config.wide_regularization,
                                     name=_WIDE)(normalized)
  logits = keras.layers.Add(name="logits")([deep_logits, wide_logits])
  model = DeepAndWideModel(texts, logits, name="no_bert_classifier")
  model.compile(
      deep_optimizer=keras.optimizers.Adagrad(config.deep_learning_rate),
      wide_optimizer=keras.optimizers.Ftrl(config.wide_learning_rate),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  return model


def steps_for(epochs: float, num_examples: int, batch_size: int) -> int:
  """Training steps of `epochs` passes over `num_examples` in batches of `batch_size`."""
  return int(round(epochs * math.ceil(num_examples / batch_size)))


def train(model: keras.Model, texts: Sequence[str], labels: np.ndarray, *, steps: int,
          batch_size: int, seed: int, verbose: int = 0) -> float:
  """Trains `steps` steps on batches of shuffled examples; returns the mean loss.

  Raises:
    FloatingPointError: If the loss became NaN or infinite (too large a learning rate).
  """
  if steps <= 0:
    return float("nan")
  dataset = (tf.data.Dataset.from_tensor_slices((list(texts), labels.astype(np.int32)))
             .shuffle(len(texts), seed=seed, reshuffle_each_iteration=True).repeat()
             .batch(batch_size).take(steps).prefetch(tf.data.AUTOTUNE))
  history = model.fit(dataset, epochs=1, verbose=verbose,
                      callbacks=[keras.callbacks.TerminateOnNaN()])
  loss = history.history["loss"][-1]
  if not math.isfinite(loss):
    raise FloatingPointError(
        f"The training loss became {loss}: this configuration diverged (learning rates too "
        "large for it).")
  return loss


def predict_classes(model: keras.Model, texts: Sequence[str], batch_size: int) -> np.ndarray:
  """The model's class ids for `texts`."""
  logits = model.predict(tf.constant(list(texts)), batch_size=batch_size, verbose=0)
  return np.argmax(logits, axis=-1)

"""The wide tower of the deep-and-wide model: a linear model over hashed word n-grams."""

import tensorflow as tf
import tensorflow_text as text
import tf_keras as keras

DEFAULT_NUM_BUCKETS = 2**18


@keras.utils.register_keras_serializable(package="keras_adapters")
class WideTower(keras.layers.Layer):
  """Class logits linear in the counts of a text's word n-grams.

  Texts are split on whitespace; every n-gram of 1 ... `max_ngram` words is hashed into one
  of `num_buckets` buckets (TF's feature-column hashing), and the logits are a bias plus the
  sum of the buckets' weight rows: a linear model over sparse n-gram count features. Its
  weights train with their own optimiser, learning rate and L2 weight (Table 5, knobs 19
  and 20), beside the deep tower.

  Example:
    ```
    WideTower(num_classes=3)(tf.constant(["great flight", "lost my bag"]))  # [2, 3]
    ```
  """

  def __init__(self, num_classes: int, num_buckets: int = DEFAULT_NUM_BUCKETS,
               max_ngram: int = 2, regularization: float = 0.0, **kwargs):
    """Stores the configuration.

    Args:
      num_classes: Number of logits.
      num_buckets: Hash buckets of the n-grams.
      max_ngram: Longest n-gram, in words.
      regularization: L2 weight on the n-gram weights.
      **kwargs: Layer arguments.
    """
    super().__init__(**kwargs)
    self.num_classes = num_classes
    self.num_buckets = num_buckets
    self.max_ngram = max_ngram
    self.regularization = regularization

  def build(self, input_shape):
    self.kernel = self.add_weight(
        "kernel", [self.num_buckets, self.num_classes], initializer="zeros",
        regularizer=keras.regularizers.l2(self.regularization))
    self.bias = self.add_weight("bias", [self.num_classes], initializer="zeros")
    super().build(input_shape)

  def call(self, texts):
    words = tf.strings.split(texts)
    ngrams = tf.concat(
        [words] + [text.ngrams(words, n, reduction_type=text.Reduction.STRING_JOIN)
                   for n in range(2, self.max_ngram + 1)], axis=1)
    buckets = tf.strings.to_hash_bucket_fast(ngrams, self.num_buckets)
    return tf.reduce_sum(tf.gather(self.kernel, buckets), axis=1) + self.bias

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, num_buckets=self.num_buckets,
                  max_ngram=self.max_ngram, regularization=self.regularization)
    return config

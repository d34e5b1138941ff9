"""Text normalisation knobs of the search space (Table 5, knobs 3 and 4) as a Keras layer."""

import tensorflow as tf
import tf_keras as keras


@keras.utils.register_keras_serializable(package="keras_adapters")
class TextNormalization(keras.layers.Layer):
  """Optionally lowercases texts and replaces non-alphanumeric characters with spaces.

  Letters and digits of every script count as alphanumeric.

  Example:
    ```
    TextNormalization(lower_case=True, remove_non_alphanumeric=True)(
        tf.constant(["Great flight!! :)"]))   # ["great flight     "]
    ```
  """

  def __init__(self, lower_case: bool = False, remove_non_alphanumeric: bool = False,
               **kwargs):
    super().__init__(trainable=False, **kwargs)
    self.lower_case = lower_case
    self.remove_non_alphanumeric = remove_non_alphanumeric

  def call(self, texts):
    if self.lower_case:
      texts = tf.strings.lower(texts, encoding="utf-8")
    if self.remove_non_alphanumeric:
      texts = tf.strings.regex_replace(texts, r"[^\pL\pN\s]", " ")
    return texts

  def get_config(self):
    config = super().get_config()
    # The constructor sets it: passed again, from_config would fail.
    del config["trainable"]
    config.update(lower_case=self.lower_case,
                  remove_non_alphanumeric=self.remove_non_alphanumeric)
    return config

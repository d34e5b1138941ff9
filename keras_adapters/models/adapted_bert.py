"""`AdaptedBert`: a TF Hub BERT encoder rebuilt in Keras with Houlsby adapters inside."""

import os

import tf_keras as keras

from keras_adapters.hub import hub_encoder
from keras_adapters.models import tuning as tuning_lib
from keras_adapters.networks import adapted_bert_encoder


@keras.utils.register_keras_serializable(package="keras_adapters")
class AdaptedBert(keras.layers.Layer):
  """A frozen TF Hub BERT encoder with trainable bottleneck adapters.

  Loads the encoder SavedModel at `handle`, infers its configuration from the variable
  shapes, rebuilds it as an `AdaptedBertEncoder` with two adapters per block, copies every Hub
  variable in by name, and sets what trains by `tuning`. Called on the TF Hub BERT input dict
  it returns the TF Hub BERT output dict, so it drops in where `hub.KerasLayer(handle)` was.

  Example:
  ```python
  encoder = keras_adapters.AdaptedBert(keras_adapters.default_hub_handle(), adapter_size=64)
  inputs = {k: keras.Input([None], dtype=tf.int32, name=k) for k in keras_adapters.INPUT_KEYS}
  logits = keras.layers.Dense(3)(encoder(inputs)["pooled_output"])
  model = keras.Model(inputs, logits)
  keras_adapters.print_trainable_parameters(model)
  ```

  Args:
    handle: TF Hub handle (URL) or local path of a BERT encoder SavedModel.
    adapter_size: Adapter bottleneck `m`, a positive integer, or `None` for no adapters (the
      `layer_norm`, `top_k` and `full` baselines).
    tuning: What trains: `"adapters"` (adapters + LayerNorms, the paper), `"layer_norm"`,
      `"top_k"` or `"full"`. A head on top always trains.
    top_k: Number of top blocks that train with `tuning="top_k"`.
    adapter_activation: Nonlinearity inside the adapters (ReLU in the paper).
    adapter_init_stddev: Standard deviation of the adapters' truncated-normal initial
      projections; `0` makes every adapter an exact identity.
    activation: Feed-forward activation of the base, which weights cannot reveal: `"gelu"`
      (exact, as the Model Garden exports) or `"gelu_approximate"`.
    dropout_rate: Dropout on embeddings and sub-layer outputs while training.
    attention_dropout_rate: Dropout on attention probabilities while training.
    layer_norm_epsilon: LayerNorm epsilon of the base.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self,
               handle,
               adapter_size=64,
               tuning="adapters",
               top_k=None,
               adapter_activation="relu",
               adapter_init_stddev=1e-2,
               activation="gelu",
               dropout_rate=0.1,
               attention_dropout_rate=0.1,
               layer_norm_epsilon=1e-12,
               **kwargs):
    super().__init__(**kwargs)
    if adapter_size is not None and (isinstance(adapter_size, bool)
                                     or not isinstance(adapter_size, int) or adapter_size <= 0):
      raise ValueError(
          f"adapter_size must be a positive integer (the paper uses 2 to 256), or None for "
          f"no adapters; got {adapter_size!r}.")
    self.handle = os.fspath(handle)
    self.adapter_size = adapter_size
    self.tuning = tuning
    self.top_k = top_k
    self.adapter_activation = adapter_activation
    self.adapter_init_stddev = adapter_init_stddev
    self.activation = activation
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon

    hub_weights = hub_encoder.read_hub_encoder(self.handle)
    tuning_lib.validate_tuning(tuning, top_k, hub_weights.config["num_layers"],
                               adapter_size is not None)
    self.base_fingerprint = hub_weights.fingerprint
    self.encoder = adapted_bert_encoder.AdaptedBertEncoder(
        **hub_weights.config,
        activation=activation,
        dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        layer_norm_epsilon=layer_norm_epsilon,
        adapter_size=adapter_size,
        adapter_activation=adapter_activation,
        adapter_init_stddev=adapter_init_stddev,
        name="bert_encoder")
    # Variables are created and filled now, eagerly, so a model built from this layer starts
    # from the Hub weights whatever graph context it is later called in.
    hub_encoder.copy_weights(self.encoder, hub_weights)
    tuning_lib.apply_tuning(self.encoder, tuning, top_k)

  def call(self, inputs, training=None):
    return self.encoder(inputs, training=training)

  def get_config(self):
    config = super().get_config()
    config.update({
        "handle": self.handle,
        "adapter_size": self.adapter_size,
        "tuning": self.tuning,
        "top_k": self.top_k,
        "adapter_activation": self.adapter_activation,
        "adapter_init_stddev": self.adapter_init_stddev,
        "activation": self.activation,
        "dropout_rate": self.dropout_rate,
        "attention_dropout_rate": self.attention_dropout_rate,
        "layer_norm_epsilon": self.layer_norm_epsilon,
    })
    return config

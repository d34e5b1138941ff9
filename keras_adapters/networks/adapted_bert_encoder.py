"""A BERT encoder network with Houlsby adapters, laid out like the Model Garden BertEncoder."""

import re

import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter_set
from keras_adapters.layers import dropout
from keras_adapters.layers import layer_norm as layer_norm_lib
from keras_adapters.methods import projection_delta
from keras_adapters.methods import registry

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def masked_mean(sequence_output, input_mask):
  """The mean of `sequence_output` `[batch, seq, hidden]` over the real tokens of each row."""
  mask = tf.cast(input_mask, sequence_output.dtype)[:, :, tf.newaxis]
  return (tf.reduce_sum(sequence_output * mask, axis=1)
          / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0))


@keras.utils.register_keras_serializable(package="keras_adapters")
class AdaptedBertEncoder(keras.layers.Layer):
  """BERT encoder that takes and returns the TF Hub BERT dictionaries.

  Inputs are `input_word_ids`, `input_mask` and `input_type_ids`, int32 `[batch, seq_length]`;
  outputs are `sequence_output` `[batch, seq_length, hidden]`, `pooled_output` `[batch, hidden]`
  (a tanh projection of the first token), `encoder_outputs` (one sequence output per layer) and
  `default` (= `pooled_output`), as TF Hub BERT encoders return.

  Sub-layers carry the Model Garden names (`word_embeddings`, `position_embedding`,
  `type_embeddings`, `embeddings/layer_norm`, `embedding_projection` (only when the embedding
  width differs from the hidden size), `transformer/layer_<i>`, `pooler_transform`), which
  `hub_variable_map()` turns into the variable names a TF Hub export uses. A call may replace
  the encoder's own adapters and LayerNorms by another set's (`adapters=EncoderAdapters(...)`),
  so one base serves several tasks.

  Under a mixed-precision policy (`dtype=`, or Keras' global policy) every sub-layer computes
  in the policy's dtype except the LayerNorms, the attention softmax and the pooler, which
  compute in float32; variables and outputs are float32.

  Example:
  >>> encoder = AdaptedBertEncoder(vocab_size=100, hidden_size=32, num_layers=2,
  ...                              num_attention_heads=2, intermediate_size=64, adapter_size=8)
  >>> ids = tf.ones([2, 6], tf.int32)
  >>> encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))[
  ...     "pooled_output"].shape
  TensorShape([2, 32])

  Args:
    vocab_size: Number of wordpieces.
    hidden_size: Width `d` of every layer.
    num_layers: Number of Transformer blocks.
    num_attention_heads: Attention heads per block.
    intermediate_size: Feed-forward inner width.
    max_sequence_length: Number of learned position embeddings.
    type_vocab_size: Number of segment (token type) ids.
    embedding_width: Width of the embeddings, projected to `hidden_size` after their
      LayerNorm when it differs (the Model Garden's factorised embeddings); `None` means
      `hidden_size`.
    activation: Feed-forward activation, `"gelu"` (exact) or `"gelu_approximate"` (tanh).
    dropout_rate: Dropout on embeddings and sub-layer outputs.
    attention_dropout_rate: Dropout on attention probabilities.
    layer_norm_epsilon: LayerNorm epsilon.
    recompute_attention: When the attention probabilities are recomputed in the backward
      pass instead of kept, trading step time for memory
      (`self_attention.RECOMPUTE_CHOICES`): "auto" from
      `self_attention.RECOMPUTE_FROM_LENGTH` tokens, "always" or "never".
    adapter_size: Adapter bottleneck `m` in every block, or `None` for plain BERT.
    adapter_activation: Nonlinearity inside the adapters.
    adapter_init_stddev: Standard deviation of the adapters' initial projections.
    adapter_leave_out: Indices of the blocks that get no adapters.
    adapter_options: A dict of AdapterHub options (`adapter.ADAPTER_OPTIONS`): which
      sub-layers get adapters and how they join them; Houlsby's placement by default.
    projection_deltas: Methods that change the blocks' projections (LoRA, (IA)³), a list of
      `{"method", "leave_out", "targets": {projection: options}}` as a method config's
      `delta_specs()` gives them; the target `"pooler"` changes the pooler's projection
      (before its tanh), whatever `leave_out` says.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_layers=12,
               num_attention_heads=12,
               intermediate_size=3072,
               max_sequence_length=512,
               type_vocab_size=2,
               embedding_width=None,
               activation="gelu",
               dropout_rate=0.1,
               attention_dropout_rate=0.1,
               layer_norm_epsilon=1e-12,
               recompute_attention="auto",
               adapter_size=None,
               adapter_activation="relu",
               adapter_init_stddev=1e-2,
               adapter_leave_out=(),
               adapter_options=None,
               projection_deltas=(),
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_layers = num_layers
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.max_sequence_length = max_sequence_length
    self.type_vocab_size = type_vocab_size
    self.embedding_width = embedding_width or hidden_size
    self.activation = activation
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.recompute_attention = recompute_attention
    self.adapter_size = adapter_size
    self.adapter_activation = adapter_activation
    self.adapter_init_stddev = adapter_init_stddev
    self.adapter_leave_out = tuple(adapter_leave_out)
    self.adapter_options = dict(adapter_options or {})
    self.projection_deltas = [dict(spec) for spec in projection_deltas or ()]

    # Sub-layers compute in the encoder's policy, so that an encoder given `dtype=` (the Hub
    # parity probe's float32) computes in it whatever the global policy. As in the Model
    # Garden, the LayerNorms compute in float32 under mixed precision, and so does the
    # pooler, the last dense layer: every output is float32, as a TF Hub encoder's.
    policy = self.dtype_policy
    self.word_embeddings = keras.layers.Embedding(
        vocab_size, self.embedding_width, dtype=policy, name="word_embeddings")
    self.position_embedding = keras.layers.Embedding(
        max_sequence_length, self.embedding_width, dtype=policy, name="position_embedding")
    self.type_embeddings = keras.layers.Embedding(
        type_vocab_size, self.embedding_width, dtype=policy, name="type_embeddings")
    self.embedding_layer_norm = layer_norm_lib.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="embeddings/layer_norm")
    self.embedding_dropout = dropout.Dropout(dropout_rate, dtype=policy)
    self.embedding_projection = (
        keras.layers.Dense(hidden_size, dtype=policy, name="embedding_projection")
        if self.embedding_width != hidden_size else None)
    self.transformer_layers = [
        adapted_transformer_block.AdaptedTransformerBlock(
            num_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            activation=activation,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            layer_norm_epsilon=layer_norm_epsilon,
            recompute_attention=recompute_attention,
            adapter_size=None if i in self.adapter_leave_out else adapter_size,
            adapter_activation=adapter_activation,
            adapter_init_stddev=adapter_init_stddev,
            adapter_options=self.adapter_options,
            projection_deltas=[
                dict(method=spec["method"], targets={
                    target: options for target, options in spec["targets"].items()
                    if target != projection_delta.POOLER})
                for spec in self.projection_deltas if i not in spec.get("leave_out", ())],
            dtype=policy,
            name=f"transformer/layer_{i}") for i in range(num_layers)
    ]
    self.pooler_transform = keras.layers.Dense(
        hidden_size, activation="tanh", dtype="float32", name="pooler_transform")
    # Changes to the pooler's projection (LoRA or (IA)³ with target "pooler"), in float32 as
    # the pooler; named `pooler_transform/<method>`, so their weights' keys are
    # `pooler_transform/lora/lora_a`, ...
    self.pooler_deltas = [
        registry.get(spec["method"]).layer_class(
            target=projection_delta.POOLER, units=hidden_size, dtype="float32",
            name=f"pooler_transform/{spec['method']}",
            **spec["targets"][projection_delta.POOLER])
        for spec in self.projection_deltas if projection_delta.POOLER in spec["targets"]]

  def build(self, input_shape):
    """Creates every weight without computing anything, in the order a call reaches the
    sub-layers (so a seeded build draws the same initial weights) and each in the name scope
    a call gives it (".../word_embeddings/embeddings")."""
    embedded = tf.TensorShape([None, None, self.embedding_width])
    hidden = tf.TensorShape([None, None, self.hidden_size])
    pooled = tf.TensorShape([None, self.hidden_size])
    for layer, shape in ((self.word_embeddings, tf.TensorShape([None, None])),
                         (self.position_embedding, tf.TensorShape([None])),
                         (self.type_embeddings, tf.TensorShape([None, None])),
                         (self.embedding_layer_norm, embedded),
                         (self.embedding_projection, embedded),
                         *((block, hidden) for block in self.transformer_layers),
                         (self.pooler_transform, pooled),
                         *((delta, pooled) for delta in self.pooler_deltas)):
      if layer is not None:
        with tf.name_scope(layer.name):
          layer.build(shape)
    super().build(input_shape)

  def call(self, inputs, training=None, adapters=None):
    # `None` for a block: its own adapters.
    embedding_layer_norm, block_adapters, pooler_changes = (
        (self.embedding_layer_norm, [None] * self.num_layers, self.pooler_deltas)
        if adapters is None else adapters)
    word_ids, mask, type_ids = _checked_inputs(inputs)
    seq_length = tf.shape(word_ids)[1]
    length_check = tf.debugging.assert_less_equal(
        seq_length, self.max_sequence_length,
        message=f"Sequences are longer than the encoder's {self.max_sequence_length} "
        "position embeddings: truncate them (max_seq_length).")
    # In a graph nothing orders the check before the lookup, which would fail first
    # with an index error that names no fix.
    with tf.control_dependencies([length_check]):
      positions = tf.range(seq_length)
    embeddings = (self.word_embeddings(word_ids)
                  + self.position_embedding(positions)[tf.newaxis]
                  + self.type_embeddings(type_ids))
    x = self.embedding_dropout(embedding_layer_norm(embeddings), training=training)
    if self.embedding_projection is not None:
      x = self.embedding_projection(x)

    # [batch, 1, seq]: each query attends to the unpadded keys; broadcasts over queries.
    attention_mask = tf.cast(mask[:, tf.newaxis, :], tf.bool)
    encoder_outputs = []
    for block, adapters_of_block in zip(self.transformer_layers, block_adapters):
      x = block(x, attention_mask=attention_mask, training=training, adapters=adapters_of_block)
      encoder_outputs.append(x)
    pooled = self._pool(x[:, 0, :], pooler_changes, training)
    return dict(sequence_output=x, pooled_output=pooled, encoder_outputs=encoder_outputs,
                default=pooled)

  def _pool(self, first_token, changes, training):
    """The pooler, `tanh(first_token · W + b)`, with `changes` to its projection."""
    if not changes:
      return self.pooler_transform(first_token)
    kernel, bias = self.pooler_transform.kernel, self.pooler_transform.bias
    project = projection_delta.Projection(
        lambda inputs: tf.matmul(tf.cast(inputs, kernel.dtype), kernel) + bias, kernel, bias)
    return tf.tanh(projection_delta.apply_projection(
        changes, tf.cast(first_token, kernel.dtype), project, training))

  def own_adapters(self):
    """The encoder's own adapters, LayerNorms and projection changes, as an
    `EncoderAdapters`."""
    return adapter_set.EncoderAdapters(
        self.embedding_layer_norm,
        tuple(block.own_adapters() for block in self.transformer_layers),
        tuple(self.pooler_deltas))

  @property
  def adapters(self):
    """All adapter layers, bottom block first."""
    return [a for block in self.transformer_layers for a in block.adapters]

  @property
  def projection_layers(self):
    """All method layers that change projections (LoRA, (IA)³), bottom block first, the
    pooler's last."""
    return [layer for block in self.transformer_layers
            for layer in block.projection_layers] + list(self.pooler_deltas)

  @property
  def layer_norms(self):
    """Every LayerNorm, the embedding one included."""
    return [self.embedding_layer_norm] + [
        norm for block in self.transformer_layers
        for norm in (block.self_attention_layer_norm, block.output_layer_norm)]

  def hub_variable_map(self):
    """Maps TF Hub (Model Garden) variable names to this encoder's base variables.

    Adapters are not part of the map: a Hub encoder has none.

    Returns:
      A dict from names such as `transformer/layer_0/self_attention/query/kernel` to variables.
    """
    if not self.built:
      # As a first call builds it, in its name scope, but without running the encoder.
      with tf.name_scope(self.name):
        self.build({key: tf.TensorShape([None, None]) for key in INPUT_KEYS})
    adapter_ids = {id(w) for module in self.adapters + self.projection_layers
                   for w in module.weights}
    return {canonical_variable_name(w.name): w for w in self.weights
            if id(w) not in adapter_ids}

  def get_config(self):
    config = super().get_config()
    config.update({
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "num_layers": self.num_layers,
        "num_attention_heads": self.num_attention_heads,
        "intermediate_size": self.intermediate_size,
        "max_sequence_length": self.max_sequence_length,
        "type_vocab_size": self.type_vocab_size,
        "embedding_width": self.embedding_width,
        "activation": self.activation,
        "dropout_rate": self.dropout_rate,
        "attention_dropout_rate": self.attention_dropout_rate,
        "layer_norm_epsilon": self.layer_norm_epsilon,
        "recompute_attention": self.recompute_attention,
        "adapter_size": self.adapter_size,
        "adapter_activation": self.adapter_activation,
        "adapter_init_stddev": self.adapter_init_stddev,
        "adapter_leave_out": self.adapter_leave_out,
        "adapter_options": self.adapter_options,
        "projection_deltas": self.projection_deltas,
    })
    return config


def canonical_variable_name(name):
  """The Model Garden name of a variable, whatever scopes enclose it.

  TF Hub exports and rebuilt encoders prefix names differently (`bert_encoder/...`, a Keras
  model's name, none at all); everything from the first Model Garden root on is the same.

  Args:
    name: A variable name such as `model/bert/transformer/layer_0/output/kernel:0`.

  Returns:
    The name from its Model Garden root on, without `:0`, e.g.
    `transformer/layer_0/output/kernel`; the name unchanged (less `:0`) if it has no root.
  """
  name = name.split(":")[0]
  match = _ROOT_PATTERN.search(name)
  return name[match.start(1):] if match else name


_ROOT_PATTERN = re.compile(
    r"(?:^|/)((?:word_embeddings|position_embedding|type_embeddings|embeddings/layer_norm|"
    r"embedding_projection|transformer/layer_\d+|pooler_transform)/)")


def dummy_inputs(batch_size=1, seq_length=2):
  """A tiny valid input dict of ones (`batch_size` × `seq_length` ids, all unpadded)."""
  ids = tf.ones([batch_size, seq_length], tf.int32)
  return dict(input_word_ids=ids, input_mask=ids, input_type_ids=tf.zeros_like(ids))


def _checked_inputs(inputs):
  """Returns (word_ids, mask, type_ids) as int32, or raises a clear error."""
  if not isinstance(inputs, dict) or any(key not in inputs for key in INPUT_KEYS):
    got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
    raise ValueError(
        f"The BERT encoder takes a dict with keys {list(INPUT_KEYS)}, got {got}. Tokenize "
        "text with the matching TF Hub preprocessing model to get them.")
  tensors = []
  for key in INPUT_KEYS:
    tensor = tf.convert_to_tensor(inputs[key])
    if not tensor.dtype.is_integer:
      raise TypeError(
          f"Encoder input {key!r} must hold integer ids, got dtype {tensor.dtype.name}. "
          "Cast it to int32 or produce it with the preprocessing model.")
    if tensor.shape.rank is not None and tensor.shape.rank != 2:
      raise ValueError(
          f"Encoder input {key!r} must have shape [batch, seq_length], got {tensor.shape}.")
    tensors.append(tf.cast(tensor, tf.int32))
  return tensors

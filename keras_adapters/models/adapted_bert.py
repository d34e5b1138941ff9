"""`AdaptedBert`: a TF Hub BERT encoder rebuilt in Keras with Houlsby adapters inside."""

import contextlib
import dataclasses
import functools
import os
import re

from absl import logging
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import hub_encoder
from keras_adapters.layers import adapted_transformer_block
from keras_adapters.layers import adapter_set as adapter_set_lib
from keras_adapters.layers import task_routing
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.models import tuning as tuning_lib
from keras_adapters.networks import adapted_bert_encoder

DEFAULT_ADAPTER_NAME = "default"

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@keras.utils.register_keras_serializable(package="keras_adapters")
class AdaptedBert(keras.layers.Layer):
  """A frozen TF Hub BERT encoder with trainable bottleneck adapters, one set per task.

  Loads the encoder SavedModel at `handle`, infers its configuration from the variable
  shapes, rebuilds it as an `AdaptedBertEncoder` with two adapters per block, copies every Hub
  variable in by name, and sets what trains by `tuning`. Called on the TF Hub BERT input dict
  it returns the TF Hub BERT output dict, so it drops in where `hub.KerasLayer(handle)` was.
  It follows Keras' mixed-precision policy (`mixed_bfloat16`, `mixed_float16`) as
  `AdaptedBertEncoder` does, with float32 variables and outputs; the parity check against the
  Hub model runs in float32 whatever the policy.

  Several tasks can share the one frozen base, each with its own named adapter set (adapters
  and LayerNorms), with the calls peft and AdapterHub users know: `add_adapter`,
  `set_adapter`, `train_adapter`, `disable_adapter()`, `delete_adapter`. The set built with
  the layer (`adapter_name`, "default") lives in the encoder's own blocks, with Model Garden
  names; added sets live beside it and start from the base's LayerNorm values. A call uses the
  active set, or the one it names (`adapter_name=`): `build_classifier` binds each task model
  to the set active when it was built, so training one task never touches another's.

  Example:
  ```python
  encoder = keras_adapters.AdaptedBert(keras_adapters.default_hub_handle(), adapter_size=64)
  inputs = {k: keras.Input([None], dtype=tf.int32, name=k) for k in keras_adapters.INPUT_KEYS}
  logits = keras.layers.Dense(3)(encoder(inputs)["pooled_output"])
  model = keras.Model(inputs, logits)
  keras_adapters.print_trainable_parameters(model)

  encoder.add_adapter("news", keras_adapters.AdapterConfig(adapter_size=32))
  encoder.train_adapter("news")        # only the news set (and a news head) trains now
  news_model = keras_adapters.build_classifier(encoder, 5)
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
    activation: Feed-forward activation of the base. `None` (the default) takes what the
      SavedModel records and parity with the Hub model proves (the Model Garden's "gelu" is
      `"gelu_approximate"`, tanh; `"gelu"` here is exact); a value that differs is an error.
    dropout_rate: Dropout on embeddings and sub-layer outputs while training.
    attention_dropout_rate: Dropout on attention probabilities while training.
    layer_norm_epsilon: LayerNorm epsilon of the base; `None` takes the SavedModel's, and a
      value that differs is an error.
    recompute_attention: When the attention probabilities are recomputed in the backward
      pass instead of kept, which saves most of a training step's memory at long sequences
      for a slower step; the gradients are the same. "auto": from 512 tokens
      (`self_attention.RECOMPUTE_FROM_LENGTH`) of static length; inputs of unknown length
      (`keras.Input([None])`, batches padded to their longest example) keep the
      probabilities, so pass "always" for long ones (the CLIs decide by `--max_seq_length`).
      "always" or "never".
    adapter_config: An `AdapterConfig`, `LoRAConfig` or `IA3Config` (or its `to_dict()`)
      for the first adapter set; an `AdapterConfig` goes in
      place of `adapter_size`, `tuning`, `top_k`, `adapter_activation` and
      `adapter_init_stddev`, which must then be left at their defaults or agree with it.
    adapter_name: Name of the first adapter set.
    **kwargs: Standard `keras.layers.Layer` arguments such as `name`.
  """

  def __init__(self,
               handle,
               adapter_size=64,
               tuning="adapters",
               top_k=None,
               adapter_activation="relu",
               adapter_init_stddev=1e-2,
               activation=None,
               dropout_rate=0.1,
               attention_dropout_rate=0.1,
               layer_norm_epsilon=None,
               recompute_attention="auto",
               adapter_config=None,
               adapter_name=DEFAULT_ADAPTER_NAME,
               **kwargs):
    super().__init__(**kwargs)
    config = _first_adapter_config(
        adapter_config, adapter_size=adapter_size, tuning=tuning, top_k=top_k,
        adapter_activation=adapter_activation, adapter_init_stddev=adapter_init_stddev)
    _check_name(adapter_name)
    self.handle = os.fspath(handle)
    hub_weights = hub_encoder.read_hub_encoder(self.handle)
    _check_base_facts(self.handle, hub_weights.config, activation=activation,
                      layer_norm_epsilon=layer_norm_epsilon)
    self.adapter_config = config
    self.adapter_name = adapter_name
    self.adapter_size = getattr(config, "adapter_size", None)
    self.tuning = config.tuning
    self.top_k = config.top_k
    self.adapter_activation = getattr(config, "activation", adapter_activation)
    self.adapter_init_stddev = getattr(config, "init_stddev", adapter_init_stddev)
    self.activation = hub_weights.config["activation"]
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.layer_norm_epsilon = hub_weights.config["layer_norm_epsilon"]
    self.recompute_attention = recompute_attention

    config.validate_for(hub_weights.config["num_layers"])
    self.base_fingerprint = hub_weights.fingerprint
    self.encoder = adapted_bert_encoder.AdaptedBertEncoder(
        **hub_weights.config,
        dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        recompute_attention=recompute_attention,
        adapter_size=config.bottleneck_size(hub_weights.config["hidden_size"]),
        adapter_activation=self.adapter_activation,
        adapter_init_stddev=self.adapter_init_stddev,
        adapter_leave_out=config.leave_out,
        adapter_options=config.adapter_options(),
        projection_deltas=config.delta_specs(),
        dtype=self.dtype_policy,
        name="bert_encoder")
    # Variables are created and filled now, eagerly, so a model built from this layer starts
    # from the Hub weights whatever graph context it is later called in.
    hub_encoder.copy_weights(self.encoder, hub_weights)
    # Method layers that start from the base's weights (DoRA's magnitudes) read them now.
    for block in self.encoder.transformer_layers:
      for target, layers in block.deltas.items():
        for layer in layers:
          layer.start_from(*block.projection_variables(target))
    for layer in self.encoder.pooler_deltas:
      layer.start_from(self.encoder.pooler_transform.kernel, self.encoder.pooler_transform.bias)
    # What the base's text must be tokenized with, for exporters to check a preprocessor by.
    self.encoder.hub_tokenizer = hub_weights.tokenizer
    # The base's LayerNorms, kept apart from the set that trains them in place: the plain base
    # (`disable_adapter`) computes with them and every added set starts from them.
    self._base_layer_norms = {
        key: variable.numpy() for key, variable in adapter_set_lib.adapter_weights_by_key(
            self.encoder.own_adapters()).items() if adapter_set_lib.is_base_layer_norm(key)}
    # Sets other than the encoder's own, by name; the configs of all, in order of addition.
    self._adapter_sets = {}
    self._adapter_configs = {adapter_name: config}
    self._own_adapter_name = adapter_name
    self._active_adapter = adapter_name
    self._adapters_disabled = False
    # Set by `keras_adapters.merge`: the LoRA and (IA)^3 layers are folded into the base.
    self.merged = False
    self._warned_merged_training = False
    tuning_lib.apply_tuning(self.encoder, config.tuning, config.top_k,
                            train_layer_norms=config.train_layer_norms,
                            layer_norms_frozen_below=config.layer_norms_frozen_below)

  @property
  def adapter_configs(self):
    """Adapter set name → its `AdapterConfig`, in the order the sets were added."""
    return dict(self._adapter_configs)

  @property
  def base_layer_norms(self):
    """The base's own LayerNorm values (NumPy), by `adapter_weights` keys."""
    return dict(self._base_layer_norms)

  @property
  def active_adapter(self):
    """The set a call uses when it names none (`None` once every set is deleted)."""
    return self._active_adapter

  def add_adapter(self, name, config=None):
    """Adds an adapter set, frozen and inactive, beside the others on the shared base.

    Its adapters start as `config` says and its LayerNorms from the base's values. Use
    `train_adapter(name)` to train it and `set_adapter(name)` to use it.

    Args:
      name: A new set name (letters, digits, `_`, `.`, `-`).
      config: Its `AdapterConfig`; default `AdapterConfig()` (m=64, the paper's tuning).
        Sets that share a base must leave it frozen: `tuning="adapters"` or `"layer_norm"`.
    """
    config = config or adapter_config_lib.AdapterConfig()
    _check_name(name)
    if config.delta_specs() or self.adapter_configs and any(
        c.delta_specs() for c in self._adapter_configs.values()):
      raise ValueError(
          f"add_adapter({name!r}): LoRA and (IA)^3 sets cannot yet share a base with other "
          "sets; build one AdaptedBert per LoRA or (IA)^3 task (export_task serves each).")
    if name in self._adapter_configs:
      raise ValueError(f"An adapter set named {name!r} exists already; delete_adapter({name!r}) "
                       "first or pick another name.")
    config.validate_for(self.encoder.num_layers)
    base_trainers = [n for n, c in {**self._adapter_configs, name: config}.items()
                     if c.trains_base]
    if base_trainers:
      raise ValueError(
          f"Adapter sets {base_trainers} train the base (tuning 'top_k' or 'full'), so it "
          "cannot be shared: every set on one base needs tuning='adapters' or 'layer_norm'.")
    adapter_set = adapter_set_lib.AdapterSet(
        self.encoder.num_layers, adapter_size=config.bottleneck_size(self.encoder.hidden_size),
        activation=config.activation, init_stddev=config.init_stddev,
        leave_out=config.leave_out, layer_norm_epsilon=self.layer_norm_epsilon,
        embedding_width=self.encoder.embedding_width,
        adapter_options=config.adapter_options(),
        dtype=self.dtype_policy,
        name=f"adapter_set_{name}")
    adapter_set.build((None, None, self.encoder.hidden_size))
    weights = adapter_set_lib.adapter_weights_by_key(adapter_set.encoder_adapters())
    for key, value in self._base_layer_norms.items():
      weights[key].assign(value)
    adapter_set.trainable = False
    self._adapter_sets[name] = adapter_set
    self._adapter_configs[name] = config

  def set_adapter(self, name):
    """Makes `name` the set that calls use when they name none (peft's `set_adapter`)."""
    self._check_exists(name)
    self._active_adapter = name

  def train_adapter(self, name):
    """Activates `name` and makes exactly what its tuning trains trainable (AdapterHub's
    `train_adapter`): every other set and, for the paper's tuning, the whole base stay frozen.
    """
    self.set_adapter(name)
    for other in self._adapter_sets.values():
      other.trainable = False
    config = self._adapter_configs[name]
    adapter_set = self._adapter_sets.get(name)
    if adapter_set is not None:
      adapter_set.trainable = True
    tuning_lib.apply_tuning(
        self.encoder, config.tuning, config.top_k,
        adapter_set=adapter_set.encoder_adapters() if adapter_set is not None else None,
        train_layer_norms=config.train_layer_norms,
        layer_norms_frozen_below=config.layer_norms_frozen_below)

  @contextlib.contextmanager
  def disable_adapter(self):
    """A context in which every call of this layer computes the plain base encoder: no
    adapters, the base's LayerNorms (peft's `disable_adapter`).

    Keras models read it when a call is traced: call the model (`model(x)`) or trace a new
    function inside the context, not a `predict` function traced before it.
    """
    previous, self._adapters_disabled = self._adapters_disabled, True
    try:
      yield
    finally:
      self._adapters_disabled = previous

  def delete_adapter(self, name):
    """Removes the set `name`; if it was active, the first remaining set becomes active."""
    self._check_exists(name)
    if name == self._own_adapter_name:
      # The encoder's own set: its blocks keep no adapters, no changes to their projections
      # (LoRA, (IA)^3) and their LayerNorms the base's.
      for block in self.encoder.transformer_layers:
        block.attention_adapter = block.feedforward_adapter = None
        block.deltas = {}
      self.encoder.pooler_deltas = []
      own = adapter_set_lib.adapter_weights_by_key(self.encoder.own_adapters())
      for key, value in self._base_layer_norms.items():
        own[key].assign(value)
      for layer in self.encoder.layer_norms:
        layer.trainable = False
      self._own_adapter_name = None
    else:
      del self._adapter_sets[name]
    del self._adapter_configs[name]
    if self._active_adapter == name:
      self._active_adapter = next(iter(self._adapter_configs), None)

  def drop_adapters(self, layers, adapter_name=None):
    """AdapterDrop (Rücklé et al. 2021): removes a set's adapters from the blocks `layers`.

    Dropping the adapters of the first k blocks speeds up inference at some cost in accuracy;
    the blocks' LayerNorms stay the set's. The set's config then leaves those blocks out, so
    an artifact saved afterwards rebuilds the dropped model.

    Args:
      layers: Block indices, e.g. `range(k)`.
      adapter_name: The set; default the active one.
    """
    name = adapter_name or self._active_adapter
    self._check_exists(name)
    layers = sorted(set(layers))
    outside = [i for i in layers if not 0 <= i < self.encoder.num_layers]
    if outside:
      raise ValueError(f"drop_adapters: layers {outside} do not exist; the encoder has layers "
                       f"0..{self.encoder.num_layers - 1}.")
    if name == self._own_adapter_name:
      for index in layers:
        block = self.encoder.transformer_layers[index]
        block.attention_adapter = block.feedforward_adapter = None
        # A LoRA or (IA)^3 set's config leaves the blocks out of its projections too.
        block.deltas = {}
    else:
      self._adapter_sets[name].drop_adapters(layers)
    config = self._adapter_configs[name]
    self._adapter_configs[name] = dataclasses.replace(
        config, leave_out=tuple(config.leave_out) + tuple(layers))

  def adapter_weights(self, adapter_name=None):
    """A set's adapters and LayerNorms by stable keys (`adapter_weights_by_key`)."""
    return adapter_set_lib.adapter_weights_by_key(self._encoder_adapters(adapter_name))

  def _encoder_adapters(self, name):
    """The set `name` (default: the active one) as an `EncoderAdapters` of layers."""
    name = name or self._active_adapter
    self._check_exists(name)
    if name == self._own_adapter_name:
      return self.encoder.own_adapters()
    return self._adapter_sets[name].encoder_adapters()

  def _plain_base_adapters(self):
    """No adapters and the base's LayerNorms, as constants."""
    norm = functools.partial(task_routing.layer_norm, epsilon=self.layer_norm_epsilon)

    def base_norm(prefix):
      return functools.partial(norm, gamma=tf.constant(self._base_layer_norms[f"{prefix}/gamma"]),
                               beta=tf.constant(self._base_layer_norms[f"{prefix}/beta"]))

    return adapter_set_lib.EncoderAdapters(
        base_norm("embeddings/layer_norm"),
        tuple(adapted_transformer_block.BlockAdapters(
            None, base_norm(f"transformer/layer_{i}/self_attention_layer_norm"),
            None, base_norm(f"transformer/layer_{i}/output_layer_norm"))
              for i in range(self.encoder.num_layers)))

  def _check_exists(self, name):
    if name not in self._adapter_configs:
      raise ValueError(
          f"No adapter set named {name!r}; this AdaptedBert has {list(self._adapter_configs)}"
          + ("" if self._adapter_configs else ": add one with add_adapter(name, config)") + ".")

  # Everything below is graph code with Python control flow on Python values only: converting
  # it with AutoGraph (Keras does so for every layer it calls) changes nothing and took about
  # half of the first model build's time.
  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None, adapter_name=None):
    if training and self.merged and not self._warned_merged_training:
      # As with peft's merge_and_unload, no adapter is left to train; say so once, as the
      # user may have meant to train them further.
      self._warned_merged_training = True
      logging.warning(
          "Training a model whose LoRA or (IA)^3 layers were merged into its base "
          "(keras_adapters.merge): they are part of the frozen base now and no longer "
          "train (the head still does). To train them further, train before merging, or "
          "rebuild the model from its saved adapters (load_task_model).")
    if self._adapters_disabled:
      adapters = self._plain_base_adapters()
    else:
      name = adapter_name or self._active_adapter
      self._check_exists(name)
      adapters = None if name == self._own_adapter_name else self._encoder_adapters(name)
    return self.encoder(inputs, training=training, adapters=adapters)

  def get_config(self):
    config = super().get_config()
    if isinstance(self.adapter_config, adapter_config_lib.AdapterConfig):
      # A method's config (LoRA, (IA)^3) stands alone: the bottleneck arguments keep their
      # defaults.
      config.update({
          "adapter_size": self.adapter_size,
          "tuning": self.tuning,
          "top_k": self.top_k,
          "adapter_activation": self.adapter_activation,
          "adapter_init_stddev": self.adapter_init_stddev,
      })
    config.update({
        "handle": self.handle,
        "activation": self.activation,
        "dropout_rate": self.dropout_rate,
        "attention_dropout_rate": self.attention_dropout_rate,
        "layer_norm_epsilon": self.layer_norm_epsilon,
        "recompute_attention": self.recompute_attention,
        "adapter_config": self.adapter_config.to_dict(),
        "adapter_name": self.adapter_name,
    })
    return config


# AdaptedBert's adapter arguments and the AdapterConfig fields they set.
_CONFIG_FIELDS = dict(adapter_size="adapter_size", tuning="tuning", top_k="top_k",
                      adapter_activation="activation", adapter_init_stddev="init_stddev")


def _first_adapter_config(adapter_config, **arguments):
  """The `AdapterConfig` of the first set, from `adapter_config` or the separate arguments."""
  if adapter_config is None:
    return adapter_config_lib.AdapterConfig(
        **{_CONFIG_FIELDS[name]: value for name, value in arguments.items()})
  adapter_config = adapter_config_lib.check_set_config(adapter_config)
  defaults = adapter_config_lib.AdapterConfig()
  # A method's config (LoRA, (IA)^3) has no bottleneck settings: the arguments' defaults.
  conflicting = {
      name: value for name, value in arguments.items()
      if value not in (getattr(defaults, _CONFIG_FIELDS[name]),
                       getattr(adapter_config, _CONFIG_FIELDS[name],
                               getattr(defaults, _CONFIG_FIELDS[name])))}
  if conflicting:
    raise ValueError(
        f"AdaptedBert got adapter_config={adapter_config} and the conflicting arguments "
        f"{conflicting}: pass the adapter settings either in adapter_config= or as "
        "arguments.")
  return adapter_config


def _check_base_facts(handle, base_config, **asked):
  """Refuses an activation or epsilon other than the one the Hub model was proven to have."""
  differing = {name: (value, base_config[name]) for name, value in asked.items()
               if value is not None and value != base_config[name]}
  if differing:
    said = ", ".join(f"{name}={value!r} (the base has {actual!r})"
                     for name, (value, actual) in differing.items())
    raise ValueError(
        f"AdaptedBert({handle!r}) got {said}. The base's activation and LayerNorm epsilon are "
        "read from its SavedModel and proven against the Hub model: leave them unset (None).")


def _check_name(name):
  if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
    raise ValueError(
        f"Adapter set names are letters, digits, '_', '.' and '-' (not starting with '.' or "
        f"'-'), got {name!r}.")

"""What the interop tests, the conversion CLI's tests and the round-trip benchmarks share: the
artifacts AdapterHub and peft wrote themselves (`testdata/`), their reference logits, and task
models whose trained weights are random and far from their initial values."""

import json
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.layers import adapter_set
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier

# Written by AdapterHub (`adapters` 1.3.0) itself on all-MiniLM-L6-v2; see testdata/README.md.
FIXTURES = os.path.join(os.path.dirname(__file__), "testdata", "adapterhub")
TOLERANCE = 1e-4


def reference_inputs(fixture):
  """The token ids of a fixture's `reference_logits.json`, and the PyTorch library's logits
  for them; `fixture`: the name of an AdapterHub fixture, or any fixture folder's path."""
  with open(os.path.join(FIXTURES, fixture, "reference_logits.json"), encoding="utf-8") as file:
    reference = json.load(file)
  inputs = {key: tf.constant(reference[key], tf.int32)
            for key in ("input_word_ids", "input_mask", "input_type_ids")}
  return inputs, np.array(reference["logits"], np.float32)


def random_task_model(handle, options, *, pooling="first_token", hidden_layers=1, seed=0):
  """A tiny task model whose bottleneck adapters (AdapterHub placement `options`) and head
  (not LayerNorms) are random, far from init."""
  return random_method_model(
      handle, adapter_config.AdapterConfig(reduction_factor=4, activation="swish",
                                           leave_out=(1,), **options),
      pooling=pooling, hidden_layers=hidden_layers, seed=seed)


def random_method_model(handle, config, *, pooling="first_token", hidden_layers=1, seed=0,
                        std=0.3):
  """A task model of a method's config whose trained weights (LoRA factors with B not zero,
  (IA)^3 scales 1 + noise, adapters) and head are random; the base's LayerNorms stay the
  base's."""
  keras.utils.set_random_seed(seed)
  bert = adapted_bert.AdaptedBert(handle, adapter_config=config, adapter_name="task")
  model = classifier.build_classifier(bert, 3, pooling=pooling, hidden_layers=hidden_layers,
                                      hidden_activation="tanh")
  norms = {id(v) for k, v in bert.adapter_weights().items() if adapter_set.is_base_layer_norm(k)}
  rng = np.random.default_rng(seed)
  for variable in model.trainable_variables:
    if id(variable) not in norms:
      noise = rng.normal(scale=std, size=variable.shape)
      variable.assign(1 + noise if "/ia3/scale" in variable.name else noise)
  return model


def tiny_inputs():
  """Two short sequences of the tiny random encoder's vocabulary, one padded."""
  ids = tf.constant([[2, 5, 7, 9, 3, 0], [2, 11, 3, 0, 0, 0]])
  return dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
              input_type_ids=tf.zeros_like(ids))

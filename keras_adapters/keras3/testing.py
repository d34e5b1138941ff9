"""Tiny random keras-hub backbones for fast Keras 3 tests, on whichever backend is active."""

import os

import numpy as np

import keras
import keras_hub

from keras_adapters.keras3 import layers

# The Keras 2 tests' tiny encoder (`hub.testing.TINY_CONFIG`) in keras-hub's terms: the same
# block shapes, so both stacks train the same number of parameters for one config.
TINY_BACKBONE = dict(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16,
                     intermediate_dim=32, max_sequence_length=16)

def jax_environ():
  """This process's environment for a child on Keras 3 with JAX: `KERAS_BACKEND=jax`, and no
  Keras 2 chosen (`TF_USE_LEGACY_KERAS` unset)."""
  environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  return dict(environ, KERAS_BACKEND="jax")


def tiny_backbone(seed=0, dropout=0.0):
  """A random-weight `BertBackbone` of `TINY_BACKBONE` (no dropout, for exact comparisons)."""
  keras.utils.set_random_seed(seed)
  return keras_hub.models.BertBackbone(**TINY_BACKBONE, dropout=dropout)


def tiny_backbones(seed=0, names=None):
  """One random-weight backbone of `TINY_BACKBONE`'s block shapes of each kind `adapt` takes,
  by its `backbones.ADAPTABLE` name (no dropout); with `names`, of those kinds only (each one
  the same as among all)."""
  sizes = {key: value for key, value in TINY_BACKBONE.items() if key != "vocabulary_size"}
  vocabulary_size = TINY_BACKBONE["vocabulary_size"]
  makers = {
      "BertBackbone": keras_hub.models.BertBackbone,
      "RobertaBackbone": keras_hub.models.RobertaBackbone,
      "XLMRobertaBackbone": keras_hub.models.XLMRobertaBackbone,
      "DistilBertBackbone": keras_hub.models.DistilBertBackbone,
      "ElectraBackbone": lambda **kwargs: keras_hub.models.ElectraBackbone(
          vocab_size=kwargs.pop("vocabulary_size"), embedding_dim=kwargs["hidden_dim"],
          **kwargs),
  }
  found = {}
  for name in makers if names is None else names:
    make = makers[name]
    keras.utils.set_random_seed(seed)
    found[name] = make(vocabulary_size=vocabulary_size, dropout=0.0, **sizes)
  return found


def inputs_for(backbone, inputs):
  """`inputs` (`tiny_inputs()`) less those `backbone` does not take (RoBERTa's segments)."""
  return {tensor.name: inputs[tensor.name] for tensor in backbone.inputs}


def tiny_inputs(batch_size=3, seq_length=8, seed=1):
  """A batch of token ids, segment ids and a padding mask (the last two tokens of the
  second example padded)."""
  rng = np.random.RandomState(seed)
  padding_mask = np.ones([batch_size, seq_length], "int32")
  padding_mask[1, -2:] = 0
  return {"token_ids": rng.randint(1, TINY_BACKBONE["vocabulary_size"],
                                   [batch_size, seq_length]).astype("int32"),
          "segment_ids": np.zeros([batch_size, seq_length], "int32"),
          "padding_mask": padding_mask}


def sequence_output(backbone, inputs):
  """The backbone's sequence output for `inputs`, as NumPy (an eager call, no tracing)."""
  outputs = backbone(inputs)
  # BERT and ELECTRA return a dict with the pooled output; RoBERTa and DistilBERT the sequence.
  return keras.ops.convert_to_numpy(
      outputs["sequence_output"] if isinstance(outputs, dict) else outputs)


def all_outputs(backbone, inputs):
  """The backbone's outputs for `inputs` as one flat NumPy vector: the sequence output and,
  where the backbone has one (BERT, ELECTRA), the pooled output."""
  outputs = backbone(inputs)
  outputs = outputs.values() if isinstance(outputs, dict) else [outputs]
  return np.concatenate([keras.ops.convert_to_numpy(output).ravel() for output in outputs])


def randomize(layers, seed=2, scale=0.3):
  """Gives every weight of `layers` random values around its own (ones stay near one), so
  that a method's layers change the output."""
  rng = np.random.RandomState(seed)
  for layer in layers:
    for weight in layer.weights:
      value = keras.ops.convert_to_numpy(weight)
      weight.assign(value + rng.normal(scale=scale, size=value.shape).astype(value.dtype))


def report_configs():
  """One config of each method `adapt` takes, with every projection or placement option the
  Keras 3 path supports in use somewhere."""
  from keras_adapters import keras3 as kak  # pylint: disable=g-import-not-at-top
  return {
      "houlsby": kak.AdapterConfig(adapter_size=4),
      "pfeiffer": kak.AdapterConfig(mh_adapter=False, original_ln_before=True,
                                    reduction_factor=4),
      "adapters_own_norms": kak.AdapterConfig(reduction_factor=4, ln_before=True,
                                              ln_after=True, mh_adapter=False, scaling=2.0,
                                              activation="gelu", leave_out=(0,)),
      "parallel": kak.AdapterConfig(is_parallel=True, scaling=4.0, reduction_factor=4,
                                    ln_after=True),
      "lora": kak.LoRAConfig(r=2, alpha=4.0, target_modules=(
          "query", "key", "value", "attention_output", "intermediate", "output")),
      # Dropout on: peft's DoRA then computes the base's share from the dropped input.
      "dora": kak.LoRAConfig(r=2, alpha=4.0, dropout=0.1, use_dora=True,
                             target_modules=("query", "value", "intermediate")),
      "dora_adapterhub": kak.LoRAConfig(r=2, use_dora=True, dora_variant="adapterhub",
                                        target_modules=("key", "attention_output", "output")),
      "ia3": kak.IA3Config(train_layer_norms=True),
      # BERT's pooler alone: its change shows in the pooled output only.
      "lora_pooler": kak.LoRAConfig(r=2, target_modules=("pooler",)),
  }


def method_report(configs=None):
  """What each config does to a tiny backbone, as JSON-ready numbers: the same on every
  backend (`KERAS_BACKEND`) where the Keras 3 path is right.

  For each config: `trainable` (the parameters that train), `start_change` (how far the
  adapted backbone's outputs (`all_outputs`) start from the base's: 0 up to float rounding, or the
  adapters' small start), for LoRA (DoRA too) and (IA)³ `adapted_change` (how far random,
  trained-like method layers move it) and `merge_change` (how far merging them then moves
  it), and from one step of a `BertTextClassifier` on the adapted backbone: `fit_loss`,
  `base_changed` and `trained_changed` (the largest change to a weight of the backbone that
  does not train, and that does).
  """
  from keras_adapters import keras3 as kak  # pylint: disable=g-import-not-at-top
  inputs = tiny_inputs()
  report = {}
  base = None
  for name, config in (configs or report_configs()).items():
    backbone = tiny_backbone()
    # Every config starts from the same seeded backbone: its outputs are computed once (were
    # they not the same, each `start_change` would show it).
    if base is None:
      base = all_outputs(backbone, inputs)
    kak.adapt(backbone, config)
    entry = dict(trainable=int(sum(np.prod(w.shape) for w in backbone.trainable_weights)),
                 start_change=float(np.abs(all_outputs(backbone, inputs) - base).max()))
    frozen = [(w, keras.ops.convert_to_numpy(w)) for w in backbone.non_trainable_weights]
    trained = [(w, keras.ops.convert_to_numpy(w)) for w in backbone.trainable_weights]
    classifier = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=2,
                                                     preprocessor=None)
    # Eagerly, to keep the tests short: `adapt_test` traces one task's `fit` as users do.
    classifier.compile(optimizer="adam", run_eagerly=True,
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = classifier.fit(inputs, np.array([0, 1, 0]), epochs=1, verbose=0)
    entry["fit_loss"] = float(history.history["loss"][0])
    entry["base_changed"] = max(float(np.abs(keras.ops.convert_to_numpy(w) - value).max())
                                for w, value in frozen)
    entry["trained_changed"] = max(float(np.abs(keras.ops.convert_to_numpy(w) - value).max())
                                   for w, value in trained)
    if not isinstance(config, kak.AdapterConfig):
      randomize([layer for layer in backbone._flatten_layers()  # pylint: disable=protected-access
                 if isinstance(layer, layers.MethodDelta)])
      adapted = all_outputs(backbone, inputs)
      entry["adapted_change"] = float(np.abs(adapted - base).max())
      kak.merge(backbone)
      entry["merge_change"] = float(np.abs(all_outputs(backbone, inputs) - adapted).max())
    report[name] = entry
  return report

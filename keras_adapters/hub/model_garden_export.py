"""Exports BERT encoders with the Model Garden's own TF Hub exporter.

`official.nlp.tools.export_tfhub_lib.export_model` is the code that produced the BERTs on TF
Hub and Kaggle. It restores an encoder from a checkpoint and saves it with the TF Hub encoder
interface, its vocab (or SentencePiece model) as an asset, and `do_lower_case`. This module
gives it the checkpoint: an encoder of the given configuration with given weights (a converted
pre-trained model) or seeded random ones (test encoders), so every encoder this library
reads is a genuine Model Garden export.
"""

import os
import tempfile
from typing import Mapping, Optional

import numpy as np
import tensorflow as tf

from official.legacy.bert import configs
from official.modeling import tf_utils
from official.nlp.configs import encoders
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.tools import export_tfhub_lib

from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import atomic_io
from keras_adapters.utils import quiet_logs

# The classification head whose dense layer `copy_pooler_dense_to_encoder` copies into the
# encoder's pooler: the Model Garden's name for BERT's next-sentence head.
_NEXT_SENTENCE = "next_sentence"


def export_encoder(export_dir: str,
                   *,
                   bert_config: Optional[configs.BertConfig] = None,
                   encoder_config: Optional[encoders.EncoderConfig] = None,
                   weights: Optional[Mapping[str, np.ndarray]] = None,
                   seed: int = 0,
                   vocab_file: Optional[str] = None,
                   sp_model_file: Optional[str] = None,
                   do_lower_case: Optional[bool] = None,
                   with_mlm: bool = False,
                   copy_pooler_dense_to_encoder: bool = False,
                   random_stddev: float = 0.3) -> str:
  """Writes a TF Hub BERT encoder SavedModel with `export_tfhub_lib.export_model`.

  Args:
    export_dir: Folder to write, atomically.
    bert_config: A legacy `BertConfig` (`export_tfhub_lib.get_bert_encoder`); exactly one of
      it and `encoder_config`. Its `hidden_act` may be a callable, e.g.
      `tf_keras.activations.gelu` for the exact GELU (the string "gelu" is the Model
      Garden's tanh approximation).
    encoder_config: An `EncoderConfig` (`type="bert"` or `"bert_v2"`).
    weights: Model Garden variable name → value for every encoder variable; `None` draws
      every variable (pretraining heads included) at random from `seed`, far from the
      initialiser's near-zero values so that a misplaced weight shows in the outputs.
    seed: Seed of the random weights.
    vocab_file: The wordpiece vocab, stored as an asset; or
    sp_model_file: the SentencePiece model.
    do_lower_case: Whether the tokenizer lower-cases; stored beside a vocab file.
    with_mlm: Whether to export the `mlm` subobject (masked-LM head) too.
    copy_pooler_dense_to_encoder: Whether the encoder's pooler takes the dense layer of the
      next-sentence head, as the Model Garden does for some TF Hub BERTs.
    random_stddev: Standard deviation of the random weights (LayerNorm scales around 1):
      0.3 makes a misplaced weight show in a tiny test encoder's outputs; a deep, wide
      encoder wants BERT's own 0.02, or its activations saturate.

  Returns:
    `export_dir`.
  """
  encoder = (export_tfhub_lib.get_bert_encoder(bert_config) if bert_config is not None
             else encoders.build_encoder(encoder_config))
  if not encoder.built:
    # A subclassed encoder (BertEncoderV2) creates its variables when first called; a
    # functional one has them, and another call would only trace all its layers again.
    encoder(encoder.inputs)
  if with_mlm or copy_pooler_dense_to_encoder:
    hidden_act = (bert_config.hidden_act if bert_config is not None
                  else encoder_config.get().hidden_activation)
    pretrainer = models.BertPretrainerV2(
        encoder_network=encoder,
        mlm_activation=tf_utils.get_activation(hidden_act),
        classification_heads=[layers.ClassificationHead(
            inner_dim=encoder.get_config()["hidden_size"], num_classes=2,
            name=_NEXT_SENTENCE)] if copy_pooler_dense_to_encoder else None)
    pretrainer(pretrainer.inputs)
    checkpointed, items = pretrainer, pretrainer.checkpoint_items
  else:
    checkpointed, items = encoder, dict(encoder=encoder)
  if weights is None:
    _randomize(checkpointed.weights, seed, random_stddev)
  else:
    _assign(encoder.weights, weights)
  with tempfile.TemporaryDirectory() as checkpoint_dir, \
       atomic_io.atomic_directory(export_dir) as staging, quiet_logs.absl_warnings_only():
    checkpoint = tf.train.Checkpoint(**items).save(os.path.join(checkpoint_dir, "ckpt"))
    export_tfhub_lib.export_model(
        staging, bert_config=bert_config, encoder_config=encoder_config,
        model_checkpoint_path=checkpoint, with_mlm=with_mlm,
        copy_pooler_dense_to_encoder=copy_pooler_dense_to_encoder,
        vocab_file=vocab_file, sp_model_file=sp_model_file, do_lower_case=do_lower_case)
  return export_dir


def _randomize(variables, seed, stddev):
  rng = np.random.default_rng(seed)
  for variable in variables:
    value = rng.normal(0.0, stddev, variable.shape)
    if variable.name.endswith("gamma:0"):
      value += 1.0  # LayerNorm scales around 1, so outputs keep their size.
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))


def _assign(variables, weights):
  by_name = {adapted_bert_encoder.canonical_variable_name(v.name): v for v in variables}
  missing = sorted(set(by_name) - set(weights))
  unused = sorted(set(weights) - set(by_name))
  if missing or unused:
    raise ValueError(
        f"The weights do not fit the Model Garden encoder: no values for {missing}, no place "
        f"for {unused}.")
  for name, variable in by_name.items():
    variable.assign(weights[name])

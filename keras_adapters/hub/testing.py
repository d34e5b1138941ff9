"""Tiny random TF Hub-format BERT encoders for fast tests."""

import atexit
import functools
import hashlib
import os
import shutil
import tempfile

import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import encoder_export
from keras_adapters.hub import preprocessing
from keras_adapters.networks import adapted_bert_encoder

TINY_CONFIG = dict(vocab_size=64, hidden_size=16, num_layers=2, num_attention_heads=2,
                   intermediate_size=32, max_sequence_length=32, type_vocab_size=2)


def save_tiny_hub_encoder(export_dir, seed=0, **config):
  """Writes a randomly initialised BERT encoder in TF Hub format and returns its path.

  Args:
    export_dir: Folder to write.
    seed: Seed of the random weights.
    **config: `AdaptedBertEncoder` arguments overriding `TINY_CONFIG`.
  """
  keras.utils.set_random_seed(seed)
  encoder = adapted_bert_encoder.AdaptedBertEncoder(
      **{**TINY_CONFIG, **config}, adapter_size=None, name="bert_encoder")
  encoder(adapted_bert_encoder.dummy_inputs())
  # Random LayerNorm parameters too, so that a LayerNorm mapped to the wrong place shows.
  for variable in encoder.weights:
    if variable.name.endswith(("gamma:0", "beta:0", "bias:0")):
      variable.assign(keras.random.normal(variable.shape, stddev=0.5, seed=seed)
                      if hasattr(keras, "random") else
                      keras.backend.random_normal(variable.shape, stddev=0.5, seed=seed))
  return encoder_export.save_hub_encoder(encoder, export_dir)


TINY_WORDS = tuple(f"w{i}" for i in range(TINY_CONFIG["vocab_size"] - 4))


def save_tiny_vocab(path):
  """Writes a wordpiece vocab that fits `TINY_CONFIG` (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`,
  then the words `w0`, `w1`, ...) and returns its path."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(("[PAD]", "[UNK]", "[CLS]", "[SEP]") + TINY_WORDS) + "\n")
  return path


def _process_temp_dir(prefix):
  root = tempfile.mkdtemp(prefix=prefix)
  atexit.register(shutil.rmtree, root, ignore_errors=True)
  return root


@functools.lru_cache(maxsize=None)
def tiny_hub_handle(seed=0):
  """A tiny Hub encoder saved once per process and seed; nothing writes to it."""
  return save_tiny_hub_encoder(
      os.path.join(_process_temp_dir("tiny_hub_"), "encoder"), seed=seed)


@functools.lru_cache(maxsize=None)
def tiny_preprocess_handle(seq_length=16):
  """A TF Hub-format preprocessing SavedModel for the tiny vocab, built once per process."""
  root = _process_temp_dir("tiny_preprocess_")
  return preprocessing.build_preprocessing_savedmodel(
      save_tiny_vocab(os.path.join(root, "vocab.txt")), os.path.join(root, "preprocess"),
      default_seq_length=seq_length)


@functools.lru_cache(maxsize=None)
def tiny_preprocessor(seq_length=16):
  """`tiny_preprocess_handle(seq_length)`, loaded once per process."""
  return tf.saved_model.load(tiny_preprocess_handle(seq_length))


def folder_digest(path):
  """SHA-256 over the relative paths and bytes of every file below `path`."""
  digest = hashlib.sha256()
  for root, dirs, files in os.walk(path):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(root, name)
      digest.update(os.path.relpath(full, path).encode())
      with open(full, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


"""Checks that a sequence length and a preprocessing model fit a base encoder, up front.

Otherwise the mismatch surfaces late and obscurely: a sequence length above the encoder's
position embeddings trains, then fails inside TensorFlow on the first long batch, or is
exported into a SavedModel that fails on every input; a vocabulary larger than the encoder's
gives token ids without an embedding, an op error in the middle of a step.
"""

import collections
import itertools
import numbers
import os
from typing import Any, Iterable, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text as tf_text

from keras_adapters.hub import read_cache
from keras_adapters.hub import saved_model_facts
from keras_adapters.utils import errors

# Packing needs room for [CLS] and [SEP].
MIN_SEQ_LENGTH = 2

# Training texts whose tokens give the [UNK] rate: a few hundred measure it to a few percent
# in about a second.
UNKNOWN_RATE_TEXTS = 300
# Text in the language and script of the vocabulary has well under 1% [UNK] tokens (wordpieces
# spell any word of known characters); emoji or a few foreign words reach a few percent. From
# 5% the data or the preprocessing is suspect; above 20%, one token in five is a blank to the
# encoder: the vocabulary is not the data's (another script or language, or a preprocessing
# model that is not the encoder's) and the model learns from what is left.
UNKNOWN_RATE_WARNING = 0.05
UNKNOWN_RATE_ERROR = 0.2
# A run, a GLUE sweep of its tasks or a multi-task export loads one preprocessing model again
# and again: it holds nothing that trains, so the last few loaded are kept
# (`read_cache.cache_key`: one rewritten in place is loaded again).
_PREPROCESSORS_KEPT = 4
_preprocessors = collections.OrderedDict()
# Cuneiform, which no BERT vocabulary holds: a word of it is one [UNK], whatever the tokenizer.
_UNKNOWN_WORD = "\U00012000\U00012001"


def check_seq_length(seq_length: Any, encoder_config: Mapping[str, int],
                     argument: str = "max_seq_length") -> None:
  """Raises a `ValueError` unless `seq_length` is an integer the encoder has positions for.

  Args:
    seq_length: The length examples are packed to.
    encoder_config: The encoder's architecture, with `max_sequence_length` (the number of
      position embeddings), as `hub_encoder.read_hub_encoder(handle).config` gives it.
    argument: The argument's name, for the message.
  """
  if (isinstance(seq_length, bool) or not isinstance(seq_length, numbers.Integral)
      or seq_length < MIN_SEQ_LENGTH):
    raise ValueError(f"{argument}={seq_length!r}: give a whole number of tokens of at least "
                     f"{MIN_SEQ_LENGTH} ([CLS] and [SEP]), e.g. {argument}=128.")
  positions = encoder_config["max_sequence_length"]
  if seq_length > positions:
    raise ValueError(
        f"{argument}={seq_length} is more than the base encoder's {positions} position "
        f"embeddings: give {argument}={positions} or less.")


def load_preprocessor(handle: str, argument: str = "preprocess_handle"):
  """Loads a TF Hub BERT preprocessing model, or raises an error naming `argument`.

  Args:
    handle: A TF Hub handle or the path of a SavedModel folder.
    argument: The argument's name, for messages.

  Returns:
    The loaded model, with `tokenize` and `bert_pack_inputs`.

  Raises:
    FileNotFoundError: A local path that does not exist.
    ValueError: Not a SavedModel, or not a preprocessing model.
  """
  handle = os.fspath(handle)
  if "://" not in handle and not os.path.isdir(handle):
    raise FileNotFoundError(f"{argument}={handle!r} does not exist: pass the folder of a TF "
                            "Hub BERT preprocessing SavedModel, or a TF Hub handle.")
  key = _cache_key(handle)
  if key in _preprocessors:
    _preprocessors.move_to_end(key)
    return _preprocessors[key]
  try:
    preprocessor = hub.load(handle)
  except (OSError, ValueError) as e:
    raise ValueError(f"{argument}={handle!r} cannot be loaded as a SavedModel "
                     f"({(str(e).splitlines() or [''])[0][:200]}): pass the folder of a TF Hub BERT "
                     "preprocessing SavedModel.") from None
  check_preprocessor(preprocessor, handle=handle, argument=argument)
  if key is not None:
    _preprocessors[key] = preprocessor
    while len(_preprocessors) > _PREPROCESSORS_KEPT:
      _preprocessors.popitem(last=False)
  return preprocessor


def _cache_key(handle):
  """`handle`'s key in the loaded preprocessors, or `None` where it is not kept: a model
  loaded inside a distribution strategy's scope or a graph belongs to it."""
  if tf.distribute.has_strategy() or not tf.executing_eagerly():
    return None
  return read_cache.cache_key(handle)


def clear_cache():
  """Forgets every preprocessing model loaded, so that the next `load_preprocessor` loads it
  again."""
  _preprocessors.clear()


def check_preprocessor(preprocessor, encoder_config: Optional[Mapping[str, int]] = None, *,
                       encoder_tokenizer=None,
                       handle: Optional[str] = None,
                       argument: str = "preprocess_handle") -> None:
  """Raises a `ValueError` unless `preprocessor` is a BERT preprocessing model for the encoder.

  Args:
    preprocessor: The loaded model (or any object with `tokenize` and `bert_pack_inputs`).
    encoder_config: The encoder's architecture, with `vocab_size`; `None` skips the
      vocabulary size check.
    encoder_tokenizer: The `hub_encoder.EncoderTokenizer` the encoder ships with (TF Hub
      BERTs carry their vocab and casing); the preprocessor must tokenize with the same
      vocabulary and casing. `None` skips that check.
    handle: Where the preprocessor was loaded from, for the message.
    argument: The argument that named it, for the message.
  """
  name = f"{argument}={handle!r}" if handle else "The preprocessor"
  missing = [method for method in ("tokenize", "bert_pack_inputs")
             if not hasattr(preprocessor, method)]
  if missing:
    raise ValueError(
        f"{name} is not a TF Hub BERT preprocessing model: it has no {' or '.join(missing)}. "
        "Pass the preprocessing model that comes with the encoder (for the embedded one, "
        "keras_adapters.default_preprocess_handle()), not the encoder itself.")
  if encoder_tokenizer is not None:
    _check_same_tokenizer(preprocessor, encoder_tokenizer, name)
  special_tokens = getattr(preprocessor.tokenize, "get_special_tokens_dict", None)
  if encoder_config is None or special_tokens is None:
    return
  vocab_size = int(special_tokens()["vocab_size"])
  if vocab_size > encoder_config["vocab_size"]:
    raise ValueError(
        f"{name} makes token ids up to {vocab_size - 1}, but the base encoder has "
        f"{encoder_config['vocab_size']} token embeddings: ids from "
        f"{encoder_config['vocab_size']} on have none. Pass the preprocessing model built "
        "from the encoder's own vocabulary.")


def _check_same_tokenizer(preprocessor, encoder_tokenizer, name):
  """Refuses a preprocessor whose vocabulary or casing is not the encoder's own."""
  words = _vocabulary_words(encoder_tokenizer)
  if encoder_tokenizer.kind == "wordpiece":
    assets = saved_model_facts.asset_paths(preprocessor)
    same = encoder_tokenizer.digest in {
        saved_model_facts.vocabulary_digest(path, "wordpiece") for path in assets}
  else:
    # A SentencePiece preprocessor holds its model inside the graph, not as an asset: the
    # encoder's model must give the same ids for the encoder's own pieces.
    same = np.array_equal(_ids(preprocessor.tokenize, words),
                          _ids(_sentencepiece(encoder_tokenizer.path).tokenize, words))
  if not same:
    raise ValueError(
        f"{name} tokenizes with another vocabulary than the encoder's own "
        f"{encoder_tokenizer.kind} vocabulary ({encoder_tokenizer.path}): its token ids would "
        "mean other words to the encoder. Pass the preprocessing model that comes with the "
        "encoder, or build one from its vocab "
        "(official.nlp.tools.export_tfhub_lib.export_preprocessing).")
  if encoder_tokenizer.lower_case is None or not words:
    return
  # Words of the vocabulary, upper-cased, come back as the same ids only if it lower-cases.
  lower_case = np.array_equal(_ids(preprocessor.tokenize, words),
                              _ids(preprocessor.tokenize, [w.upper() for w in words]))
  if lower_case != encoder_tokenizer.lower_case:
    said = {True: "lower-cases (uncased)", False: "keeps case (cased)"}
    raise ValueError(
        f"{name} {said[lower_case]} but the encoder was trained "
        f"{'uncased' if encoder_tokenizer.lower_case else 'cased'} (do_lower_case="
        f"{encoder_tokenizer.lower_case}): the model would see text unlike its training text. "
        f"Pass a preprocessing model built with do_lower_case={encoder_tokenizer.lower_case}.")


def _vocabulary_words(encoder_tokenizer, count=50):
  """Up to `count` whole lower-case words of the encoder's vocabulary, to tokenize: only
  words that upper-casing then lower-casing gives back (not the dotless "ı" of BERT's
  multilingual vocabularies, which upper-cases to "I" and so lower-cases to "i")."""
  if encoder_tokenizer.kind == "wordpiece":
    tokens = saved_model_facts.wordpiece_tokens(encoder_tokenizer.path)
  else:
    model = _sentencepiece(encoder_tokenizer.path)
    tokens = [model.id_to_string(i).numpy().decode().lstrip("\u2581")
              for i in range(int(model.vocab_size()))]
  return [token for token in tokens if token.isalnum() and token.islower()
          and token.upper().lower() == token][:count]


def _sentencepiece(path):
  with tf.io.gfile.GFile(path, "rb") as f:
    return tf_text.SentencepieceTokenizer(model=f.read())


def _ids(tokenize, words):
  """The token ids of `words`, one text each, flattened."""
  tokens = tokenize(tf.constant(words))
  return (tokens.flat_values if isinstance(tokens, tf.RaggedTensor) else tokens).numpy()


def check_unknown_tokens(preprocessor, texts: Iterable[str], encoder_config: Mapping[str, int],
                         encoder_tokenizer, *, hub_handle: str,
                         preprocess_handle: str) -> None:
  """Where the encoder records no tokenizer, checks the preprocessor against it and the data.

  `check_preprocessor` compares the vocabularies when the encoder records its own (TF Hub
  BERTs do). An encoder that records none (an older export) leaves what can be seen: the
  [CLS], [SEP], [PAD] and [UNK] ids must have embeddings, and the share of [UNK] tokens in
  the first `UNKNOWN_RATE_TEXTS` training texts is warned about from
  `UNKNOWN_RATE_WARNING` and refused above `UNKNOWN_RATE_ERROR`.

  Args:
    preprocessor: The loaded preprocessing model, checked by `check_preprocessor`.
    texts: The training texts, in order (only the first few hundred are read).
    encoder_config: The encoder's architecture, with `vocab_size`.
    encoder_tokenizer: The encoder's `hub_encoder.EncoderTokenizer`; if any, nothing to do.
    hub_handle: The encoder's handle, for messages.
    preprocess_handle: The preprocessor's handle, for messages.

  Raises:
    errors.UsageError: A special id without an embedding, or too many [UNK] tokens; the
      message names both handles.
  """
  if encoder_tokenizer is not None:
    return
  unknown_id = _single_id(preprocessor.tokenize, _UNKNOWN_WORD)
  special = {name: int(preprocessor.tokenize.get_special_tokens_dict()[key]) for name, key in (
      ("[CLS]", "start_of_sequence_id"), ("[SEP]", "end_of_segment_id"),
      ("[PAD]", "padding_id"))}
  if unknown_id is not None:
    special["[UNK]"] = unknown_id
  beyond = {name: i for name, i in special.items() if i >= encoder_config["vocab_size"]}
  if beyond:
    raise errors.UsageError(
        f"The {', '.join(f'{name} id {i}' for name, i in beyond.items())} of "
        f"preprocess_handle={preprocess_handle!r} have no embedding in "
        f"hub_handle={hub_handle!r}, whose vocabulary has {encoder_config['vocab_size']} "
        "tokens: the preprocessing model is not the encoder's. Pass the one that comes with "
        "the encoder.")
  texts = list(itertools.islice(texts, UNKNOWN_RATE_TEXTS))
  if unknown_id is None or not texts:
    return  # A vocabulary with cuneiform, or bytes for unknown characters: no [UNK] to count.
  ids = _ids(preprocessor.tokenize, texts)
  rate = np.mean(ids == unknown_id) if ids.size else 0.0
  message = (f"{rate:.0%} of the tokens of the first training texts are [UNK] with "
             f"hub_handle={hub_handle!r} and preprocess_handle={preprocess_handle!r}")
  if rate > UNKNOWN_RATE_ERROR:
    raise errors.UsageError(
        f"{message}: the encoder would read them as blanks. The encoder records no vocabulary "
        "to compare with; pass the preprocessing model that comes with it, or an encoder "
        "trained on text in the data's language and script.")
  if rate >= UNKNOWN_RATE_WARNING:
    logging.warning("%s: check that the preprocessing model comes with the encoder and that "
                    "it was trained on text like the data.", message)


def _single_id(tokenize, text):
  """The one token id of `text`, or `None` if it is more than one token."""
  ids = _ids(tokenize, [text])
  return int(ids[0]) if ids.size == 1 else None

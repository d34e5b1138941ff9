"""A TF Hub-format BERT preprocessing model, built locally from a wordpiece vocab.

The TF Model Garden's `official.nlp.tools.export_tfhub_lib`, the code that produced TF Hub's
`bert_en_uncased_preprocess`, builds it; this module checks the inputs first and writes the
SavedModel atomically. The model has TF Hub's preprocessing interface:

  * `preprocessor(strings)` maps a [batch] string tensor to the encoder inputs
    `input_word_ids`, `input_mask` and `input_type_ids`, each int32
    [batch, default_seq_length], laid out as `[CLS] tokens [SEP]` and padded with `[PAD]`.
  * `preprocessor.tokenize(strings)` returns an int32 RaggedTensor
    [batch, (words), (wordpieces)]; `preprocessor.tokenize_with_offsets(strings)` adds each
    wordpiece's start and end byte offsets in its string (what question answering needs to
    map a span of tokens back to the text).
  * `preprocessor.bert_pack_inputs(segments, seq_length=...)` packs one or two tokenized
    segments into the same dict, `[CLS] a [SEP] b [SEP]`, trimming them round-robin.

Saved, it loads with `hub.KerasLayer(export_dir)`, `hub.load` or `tf.saved_model.load` exactly
like the TF Hub model, e.g. `hub.KerasLayer(loaded.bert_pack_inputs,
arguments=dict(seq_length=64))`; the vocab travels inside as an asset.
"""

import os

import tensorflow as tf

from official.nlp.tools import export_tfhub_lib

from keras_adapters.utils import atomic_io
from keras_adapters.utils import quiet_logs

# BERT packing needs these; the Model Garden's tokenizer silently omits a missing one.
_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")


def _check_arguments(vocab_file: str, default_seq_length: int) -> None:
  """Raises a clear error unless `vocab_file` is a BERT vocab with its special tokens and
  `default_seq_length` leaves room for text."""
  if isinstance(default_seq_length, bool) or not isinstance(default_seq_length, int):
    raise ValueError(f"default_seq_length must be an int, got {default_seq_length!r}.")
  if default_seq_length < 3:
    raise ValueError(
        f"default_seq_length={default_seq_length} leaves no room for text beside [CLS] and "
        "[SEP]; use at least 3 (BERT encoders are usually fed 128).")
  if not tf.io.gfile.exists(vocab_file):
    raise FileNotFoundError(
        f"BERT vocab file {vocab_file!r} does not exist; pass the path of the encoder's "
        "vocab.txt (one wordpiece per line).")
  with tf.io.gfile.GFile(vocab_file, "r") as f:
    tokens = set(f.read().splitlines())
  missing = [token for token in _SPECIAL_TOKENS if token not in tokens]
  if missing:
    raise ValueError(
        f"The BERT vocab {vocab_file!r} lacks the special tokens {missing}; BERT packing "
        f"needs {list(_SPECIAL_TOKENS)}. Use the vocab.txt that the encoder was trained with.")


def build_preprocessing_savedmodel(vocab_file: str,
                                   export_dir: str,
                                   *,
                                   lower_case: bool = True,
                                   default_seq_length: int = 128) -> str:
  """Saves a TF Hub-format BERT preprocessing SavedModel.

  The model is written into a temporary sibling folder and renamed into place, so an
  interrupted build never leaves a partial `export_dir` behind.

  Args:
    vocab_file: Path of the encoder's wordpiece `vocab.txt`; copied into the export.
    export_dir: Local folder to create; it must not exist yet.
    lower_case: Whether the encoder is uncased (lowercase and strip accents).
    default_seq_length: Length that calling the loaded model packs to.

  Returns:
    `export_dir`.

  Raises:
    FileExistsError: If `export_dir` already exists.
    FileNotFoundError: If `vocab_file` does not exist.
    ValueError: If the vocab lacks a special token or `default_seq_length` is below 3.
  """
  export_dir = os.path.abspath(export_dir)
  if os.path.exists(export_dir):
    raise FileExistsError(
        f"{export_dir!r} already exists; delete it or choose another export_dir so a "
        "stale preprocessing model is never mixed with a new one.")
  _check_arguments(vocab_file, default_seq_length)
  with atomic_io.atomic_directory(export_dir) as staging, quiet_logs.absl_warnings_only():
    # Without assert ops (as TF Hub's own preprocessors are exported): inside a tf.data
    # map, their control flow makes grappler warn on every input pipeline.
    export_tfhub_lib.export_preprocessing(
        staging, vocab_file=vocab_file, do_lower_case=lower_case,
        tokenize_with_offsets=True, default_seq_length=default_seq_length,
        experimental_disable_assert=True)
  return export_dir

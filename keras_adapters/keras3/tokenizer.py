"""keras-hub's BERT tokenizer and preprocessor from a TF Hub BERT preprocessing model.

The TF Hub preprocessing model (the Model Garden's `export_preprocessing`) carries its
WordPiece vocabulary as an asset; whether it lowercases (and so strips accents, as
TensorFlow Text's BERT tokenizer does with `lower_case`) and the sequence length it packs to
are read by calling it, once per set of files (`hub.proofs`: a later read of the same files,
in any process, restores nothing). keras-hub's `BertTokenizer` on that vocabulary, with those
options, gives the same ids.
"""

import dataclasses
import os

import keras_hub
import numpy as np
import tensorflow as tf

from keras_adapters.hub import proofs
from keras_adapters.hub import read_cache
from keras_adapters.keras3 import tf_hub
from keras_adapters.utils import errors

# The special tokens keras-hub's BertTokenizer looks up by name, by the TF Hub model's key.
_SPECIAL_TOKENS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]",
                   "padding_id": "[PAD]"}


def tokenizer_from_tf_hub(preprocess_handle=None):
  """A keras-hub `BertTokenizer` that splits text into the ids a TF Hub BERT preprocessing
  model gives.

  Example:
  ```python
  tokenizer = kak.tokenizer_from_tf_hub()  # the embedded default's vocabulary
  tokenizer(["Hello, world!"])
  ```

  Args:
    preprocess_handle: A TF Hub BERT preprocessing model with a WordPiece vocabulary: a local
      SavedModel folder, a TF Hub URL, or `None` for the embedded default's.

  Raises:
    UsageError: The handle holds no such model; the message says what to pass.
  """
  return _read(preprocess_handle)[0]


def preprocessor_from_tf_hub(preprocess_handle=None):
  """A keras-hub `BertTextClassifierPreprocessor` that packs text as the TF Hub preprocessing
  model does: the same ids, padding mask and segment ids at its default sequence length.

  Args:
    preprocess_handle: As `tokenizer_from_tf_hub`'s.
  """
  tokenizer, sequence_length = _read(preprocess_handle)
  return keras_hub.models.BertTextClassifierPreprocessor(tokenizer,
                                                         sequence_length=sequence_length)


def _read(handle):
  """(`BertTokenizer`, default sequence length) of the preprocessing model at `handle`."""
  found = _models.get(tf_hub.local_folder(handle, "preprocess"), _read_model)
  return keras_hub.models.BertTokenizer(
      vocabulary=found.vocabulary, lowercase=found.lowercase,
      strip_accents=found.lowercase), found.sequence_length


@dataclasses.dataclass(eq=False)
class _PreprocessingModel:
  """What keras-hub's tokenizer needs of a TF Hub preprocessing model."""
  vocabulary: str
  lowercase: bool
  sequence_length: int


def _read_model(folder):
  """The `_PreprocessingModel` of the SavedModel at `folder`: as an earlier read of the same
  files found it (`proofs`); else restored and checked for keras-hub."""
  digest = proofs.key(folder, "keras3_tf_hub_preprocessing")
  record = proofs.recall(digest)
  if record is not None:
    return _PreprocessingModel(_vocabulary(folder), record["lowercase"],
                               record["sequence_length"])
  found = _restored_model(folder)
  proofs.remember(digest, dict(lowercase=found.lowercase,
                               sequence_length=found.sequence_length))
  return found


def _restored_model(folder):
  """The `_PreprocessingModel` of the SavedModel at `folder`, restored, called and checked."""
  what = "TF Hub BERT preprocessing model"
  folder, loaded = tf_hub.load(folder, "preprocess", what)
  if not (hasattr(loaded, "tokenize") and hasattr(loaded, "bert_pack_inputs")):
    raise errors.UsageError(
        f"{folder!r} is not a {what} (it has no tokenize and bert_pack_inputs); pass the "
        "preprocessing model that goes with the encoder.")
  vocabulary = _vocabulary(folder)
  special = {key: int(value) for key, value in loaded.tokenize.get_special_tokens_dict().items()}
  tokens = _tokens(vocabulary)
  for key, token in _SPECIAL_TOKENS.items():
    if tokens[special[key]] != token:
      raise errors.UsageError(
          f"The vocabulary of {folder!r} has {tokens[special[key]]!r} as its {key}, where "
          f"keras-hub's BertTokenizer needs {token!r}: this preprocessing model cannot be "
          "reproduced with it.")
  # keras-hub's BertTokenizer looks its mask token up by name even where nothing masks.
  if "[MASK]" not in tokens:
    raise errors.UsageError(
        f"The vocabulary of {folder!r} has no '[MASK]' token, which keras-hub's BertTokenizer "
        "requires: use a preprocessing model whose vocabulary has it, or the Keras 2 path "
        "(keras_adapters.AdaptedBert), which does not need it.")
  upper, lower = loaded.tokenize(tf.constant(["A", "a"])).flat_values.numpy()[:2]
  lowercase = bool(upper == lower)
  sequence_length = int(loaded(tf.constant([""]))["input_word_ids"].shape[-1])
  return _PreprocessingModel(vocabulary, lowercase, sequence_length)


# Each task of a run, and every tokenizer of a process, restores a preprocessing model once.
_models = read_cache.ReadCache(lambda model: 0)


def _vocabulary(folder):
  """The path of the model's WordPiece vocabulary asset."""
  assets = os.path.join(folder, "assets")
  files = sorted(os.listdir(assets)) if os.path.isdir(assets) else []
  if files and all(name.endswith(".model") for name in files):
    raise errors.UsageError(
        f"The preprocessing model at {folder!r} tokenizes with SentencePiece ({files[0]}); "
        "kak.tokenizer_from_tf_hub makes keras-hub's WordPiece BertTokenizer, so it takes "
        "WordPiece preprocessing models (a vocab.txt asset) only.")
  texts = [name for name in files if name.endswith(".txt")]
  if len(texts) != 1:
    raise errors.UsageError(
        f"The preprocessing model at {folder!r} should carry one vocabulary file (vocab.txt) "
        f"among its assets; it has {files}.")
  return os.path.join(assets, texts[0])


def _tokens(path):
  with tf.io.gfile.GFile(path) as f:
    return np.array([line.rstrip("\n") for line in f])

"""A TF Hub-format BERT preprocessing model, built locally from a wordpiece vocab.

`BertPreprocessor` reproduces the interface of TF Hub's `bert_en_uncased_preprocess/3`:

  * `preprocessor(strings)` maps a [batch] string tensor to the encoder inputs
    `input_word_ids`, `input_mask` and `input_type_ids`, each int32
    [batch, default_seq_length], laid out as `[CLS] tokens [SEP]` and padded with
    `[PAD]` (id 0 in BERT vocabs).
  * `preprocessor.tokenize(strings)` returns an int32 RaggedTensor
    [batch, (words), (wordpieces)].
  * `preprocessor.bert_pack_inputs(segments, seq_length)` packs a list of 1 to 3
    tokenized segments into the same dict, `[CLS] a [SEP] b [SEP]`, trimming the
    segments round-robin so that each keeps a share of `seq_length`.

The object works in-process as it is, and `build_preprocessing_savedmodel` saves it
as a self-contained SavedModel (the vocab travels as an asset) that loads with
`hub.KerasLayer(export_dir)`, `hub.load` or `tf.saved_model.load`, exactly like the
TF Hub model, e.g. `hub.KerasLayer(loaded.bert_pack_inputs,
arguments=dict(seq_length=64))`.
"""

import os
from typing import Callable, Dict, List, Sequence, Tuple, Union

import tensorflow as tf
import tensorflow_text as text

from keras_adapters.utils import atomic_io

_CLS, _SEP, _PAD, _UNK = "[CLS]", "[SEP]", "[PAD]", "[UNK]"
_SPECIAL_TOKENS = (_CLS, _SEP, _PAD, _UNK)
# TF Hub's BERT preprocessors pack one to three segments.
_MAX_SEGMENTS = 3
# `tokenize` yields [batch, (words), (wordpieces)] (ragged rank 2); callers may also
# pass segments already flattened to [batch, (tokens)] (ragged rank 1).
_SEGMENT_RAGGED_RANKS = (1, 2)

_Segments = Sequence[tf.RaggedTensor]
# (word ids, type ids, validity) of one part of a packed row, each [batch, width].
_Piece = Tuple[tf.Tensor, tf.Tensor, tf.Tensor]


def read_vocab(vocab_file: str) -> List[str]:
  """Reads a wordpiece vocab file with one token per line; the line number is the id.

  Args:
    vocab_file: Path of a BERT `vocab.txt`.

  Returns:
    The tokens in id order.

  Raises:
    FileNotFoundError: If `vocab_file` does not exist.
    ValueError: If the file is empty or lists a token twice.
  """
  if not tf.io.gfile.exists(vocab_file):
    raise FileNotFoundError(
        f"BERT vocab file {vocab_file!r} does not exist; pass the path of the encoder's "
        "vocab.txt (one wordpiece per line).")
  with tf.io.gfile.GFile(vocab_file, "r") as f:
    # Split exactly like tf.lookup.TextFileInitializer so ids agree with the table:
    # on "\n" only, dropping a trailing "\r" and the empty string after the last newline.
    tokens = [line[:-1] if line.endswith("\r") else line for line in f.read().split("\n")]
  if tokens and not tokens[-1]:
    tokens.pop()
  if not tokens:
    raise ValueError(f"BERT vocab file {vocab_file!r} is empty; it needs one token a line.")
  seen = set()
  for token in tokens:
    if token in seen:
      raise ValueError(
          f"BERT vocab file {vocab_file!r} lists {token!r} twice; every line must be a "
          "distinct token because its line number is its id.")
    seen.add(token)
  return tokens


def _special_token_ids(tokens: Sequence[str]) -> Dict[str, int]:
  """Returns the ids of `[CLS]`, `[SEP]`, `[PAD]` and `[UNK]` in a vocab.

  Args:
    tokens: The vocab in id order.

  Returns:
    A dict from each special token to its id.

  Raises:
    ValueError: If the vocab lacks one of the special tokens.
  """
  index = {token: i for i, token in enumerate(tokens)}
  missing = [token for token in _SPECIAL_TOKENS if token not in index]
  if missing:
    raise ValueError(
        f"The BERT vocab lacks the special tokens {missing}; BERT packing needs "
        f"{list(_SPECIAL_TOKENS)}. Use the vocab.txt that the encoder was trained with.")
  return {token: index[token] for token in _SPECIAL_TOKENS}


def _check_default_seq_length(seq_length: int) -> None:
  """Raises unless `seq_length` leaves room for a token beside `[CLS]` and `[SEP]`."""
  if isinstance(seq_length, bool) or not isinstance(seq_length, int):
    raise TypeError(f"default_seq_length must be a Python int, got {seq_length!r}.")
  if seq_length < 3:
    raise ValueError(
        f"default_seq_length={seq_length} leaves no room for text beside [CLS] and [SEP]; "
        "use at least 3 (BERT encoders are usually fed 128).")


class BertPreprocessor(tf.Module):
  """BERT text preprocessing with the interface of TF Hub's BERT preprocessors.

  Usable in-process as is; `build_preprocessing_savedmodel` saves it for TF Hub-style
  loading. Special token ids are read from the vocab, not assumed.
  """

  def __init__(self,
               vocab_file: str,
               *,
               lower_case: bool = True,
               default_seq_length: int = 128,
               name: str = "bert_preprocessor"):
    """Builds the tokenizer and its vocab lookup table.

    Args:
      vocab_file: Path of the encoder's wordpiece `vocab.txt`.
      lower_case: Whether to lowercase and strip accents (uncased models) before
        wordpiece splitting; `False` for cased models.
      default_seq_length: Length that calling the object packs to.
      name: Module name.

    Raises:
      FileNotFoundError: If `vocab_file` does not exist.
      ValueError: If the vocab is unusable or `default_seq_length` is below 3.
      TypeError: If `default_seq_length` is not an int.
    """
    super().__init__(name=name)
    _check_default_seq_length(default_seq_length)
    ids = _special_token_ids(read_vocab(vocab_file))
    self._cls_id, self._sep_id = ids[_CLS], ids[_SEP]
    self._pad_id, self._unk_id = ids[_PAD], ids[_UNK]
    self._default_seq_length = default_seq_length
    # TextFileInitializer tracks the file as a SavedModel asset, so an export carries its
    # own copy of the vocab and loads after the original file is gone.
    initializer = tf.lookup.TextFileInitializer(
        vocab_file,
        key_dtype=tf.string, key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
        value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER)
    self._vocab_table = tf.lookup.StaticHashTable(initializer, default_value=-1)
    self._tokenizer = text.BertTokenizer(
        self._vocab_table, lower_case=lower_case, token_out_type=tf.int64,
        unknown_token=_UNK)
    self._pack_tokens = tf.function(self._pack, autograph=False)
    self.bert_pack_inputs = tf.function(self._bert_pack_inputs_fn(), autograph=False)

  @property
  def default_seq_length(self) -> int:
    return self._default_seq_length

  @property
  def special_token_ids(self) -> Dict[str, int]:
    return {_CLS: self._cls_id, _SEP: self._sep_id, _PAD: self._pad_id, _UNK: self._unk_id}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def __call__(self, strings: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Tokenizes and packs single sentences to `default_seq_length`.

    Args:
      strings: string Tensor [batch].

    Returns:
      A dict with int32 `input_word_ids`, `input_mask` and `input_type_ids`, each
      [batch, default_seq_length].
    """
    # Packing to a Tensor length reuses the one-segment trace of `bert_pack_inputs`;
    # ensure_shape then restores the static length that Keras models see.
    outputs = self._pack_tokens([_flatten_words(self._tokenize(strings))],
                                tf.constant(self._default_seq_length))
    return {key: tf.ensure_shape(value, [None, self._default_seq_length])
            for key, value in outputs.items()}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    """Splits strings into wordpiece ids.

    Args:
      strings: string Tensor [batch].

    Returns:
      int32 RaggedTensor [batch, (words), (wordpieces)].
    """
    return self._tokenize(strings)

  def trace_for_export(self) -> None:
    """Traces `bert_pack_inputs` for every input layout a loaded SavedModel accepts.

    A SavedModel keeps only traced functions, so this covers 1 to 3 segments of either
    ragged rank with `seq_length` as a scalar int32 Tensor (Python ints are converted
    to it when calling the loaded function).
    """
    for ragged_rank in _SEGMENT_RAGGED_RANKS:
      segment = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                    ragged_rank=ragged_rank)
      for num_segments in range(1, _MAX_SEGMENTS + 1):
        self.bert_pack_inputs.get_concrete_function(
            [segment] * num_segments, seq_length=tf.TensorSpec([], tf.int32))

  def _bert_pack_inputs_fn(self) -> Callable[..., Dict[str, tf.Tensor]]:
    """Returns the Python function behind `bert_pack_inputs`.

    It is a closure, not a method, so that `default_seq_length` is a Python default
    that the SavedModel keeps: a loaded model then packs to it when `seq_length` is
    omitted, as TF Hub's preprocessors do.
    """

    def bert_pack_inputs(inputs: _Segments,
                         seq_length: Union[int, tf.Tensor] = self._default_seq_length
                         ) -> Dict[str, tf.Tensor]:
      """Packs tokenized segments into BERT encoder inputs.

      Args:
        inputs: A list of 1 to 3 int32 RaggedTensors, [batch, (words), (wordpieces)]
          as from `tokenize` or [batch, (tokens)].
        seq_length: Length to pack to, a Python int or scalar int32 Tensor (a Tensor
          avoids one trace per distinct length in-process).

      Returns:
        A dict with int32 `input_word_ids`, `input_mask` and `input_type_ids`, each
        [batch, seq_length]. Type ids are 0 for `[CLS]`, the first segment and its
        `[SEP]`, 1 for the second segment and its `[SEP]`, and so on.
      """
      if not isinstance(inputs, (list, tuple)) or not 1 <= len(inputs) <= _MAX_SEGMENTS:
        raise ValueError(
            f"bert_pack_inputs needs a list of 1 to {_MAX_SEGMENTS} tokenized segments, "
            f"got {inputs!r}; wrap a single segment as [segment].")
      # Both ragged ranks share one packing trace per number of segments, which halves
      # the tracing (and saving) time of an export.
      return self._pack_tokens([_flatten_words(segment) for segment in inputs],
                               seq_length)

    return bert_pack_inputs

  def _tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    return tf.cast(self._tokenizer.tokenize(strings), tf.int32)

  def _pack(self, segments: _Segments,
            seq_length: Union[int, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Trims [batch, (tokens)] segments round-robin, joins them with specials, pads.

    The result equals `tensorflow_text.combine_segments` followed by
    `pad_model_inputs`, but is assembled from dense pieces: their graph is a third the
    size of those ragged ops, which makes an export trace, save and load much faster.
    """
    num_specials = len(segments) + 1
    seq_length = tf.convert_to_tensor(seq_length, tf.int32)
    tf.debugging.assert_greater(
        seq_length, num_specials,
        message=f"seq_length must exceed {num_specials}, the number of [CLS] and [SEP] "
        f"tokens for {len(segments)} segment(s)")
    trimmed = text.RoundRobinTrimmer(max_seq_length=seq_length - num_specials).trim(segments)
    batch_size = trimmed[0].nrows(out_type=tf.int32)
    pieces = [_special_piece(batch_size, self._cls_id, type_id=0)]
    for type_id, segment in enumerate(trimmed):
      pieces.append(_segment_piece(segment, type_id, self._pad_id))
      pieces.append(_special_piece(batch_size, self._sep_id, type_id))
    # Invalid trailing padding so that every row has at least seq_length entries.
    pieces.append((tf.fill([batch_size, seq_length], self._pad_id),
                   tf.zeros([batch_size, seq_length], tf.int32),
                   tf.zeros([batch_size, seq_length], tf.bool)))
    word_ids, type_ids, valid = (tf.concat(parts, axis=1) for parts in zip(*pieces))
    # A stable sort on "is padding" moves each row's valid entries to its front, in order.
    order = tf.argsort(tf.cast(tf.logical_not(valid), tf.int32), axis=1, stable=True)
    order = order[:, :seq_length]
    input_mask = tf.cast(tf.gather(valid, order, batch_dims=1), tf.int32)
    return {
        "input_word_ids": tf.gather(word_ids, order, batch_dims=1),
        "input_mask": input_mask,
        # Padding inside a segment piece carries that segment's type id: zero it.
        "input_type_ids": tf.gather(type_ids, order, batch_dims=1) * input_mask,
    }


def _special_piece(batch_size: tf.Tensor, token_id: int, type_id: int) -> _Piece:
  """Returns (word ids, type ids, validity), each [batch, 1], for one special token."""
  shape = tf.stack([batch_size, 1])
  return tf.fill(shape, token_id), tf.fill(shape, type_id), tf.ones(shape, tf.bool)


def _segment_piece(segment: tf.RaggedTensor, type_id: int, pad_id: int) -> _Piece:
  """Returns (word ids, type ids, validity), each [batch, longest row], for a segment."""
  word_ids = segment.to_tensor(default_value=pad_id)
  valid = tf.sequence_mask(segment.row_lengths(), tf.shape(word_ids, out_type=tf.int64)[1])
  return word_ids, tf.fill(tf.shape(word_ids), type_id), valid


def _flatten_words(segment: tf.RaggedTensor) -> tf.RaggedTensor:
  """Merges [batch, (words), (wordpieces)] into int32 [batch, (tokens)]."""
  if (not isinstance(segment, tf.RaggedTensor) or
      segment.ragged_rank not in _SEGMENT_RAGGED_RANKS):
    raise ValueError(
        "Each segment must be a RaggedTensor [batch, (words), (wordpieces)] from "
        f"tokenize() or [batch, (tokens)], got {segment!r}.")
  if segment.ragged_rank == 2:
    segment = segment.merge_dims(1, 2)
  return tf.cast(segment, tf.int32)


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
    ValueError: If the vocab is unusable or `default_seq_length` is below 3.
  """
  export_dir = os.path.abspath(export_dir)
  if os.path.exists(export_dir):
    raise FileExistsError(
        f"{export_dir!r} already exists; delete it or choose another export_dir so a "
        "stale preprocessing model is never mixed with a new one.")
  preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case,
                                  default_seq_length=default_seq_length)
  preprocessor.trace_for_export()
  with atomic_io.atomic_directory(export_dir) as staging:
    tf.saved_model.save(preprocessor, staging)
  return export_dir

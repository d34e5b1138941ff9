"""Text examples to batched BERT encoder inputs, as a deterministic `tf.data` pipeline.

All examples are tokenized and packed once, up front, with any object that has TF Hub's
BERT preprocessing interface (`tokenize` and `bert_pack_inputs`): the in-process
`keras_adapters.hub.preprocessing.create_preprocessor` or a loaded preprocessing SavedModel.
The packed ids are kept unpadded; the pipeline itself is plain `tf.data` ops, so it runs
under any `tf.distribute` strategy.

Order and reproducibility: the order of epoch `e` is a function of `(seed, e)` only,
computed with stateless random ops, so two runs with the same seed see the same batches,
whatever the global TF seed. To resume a run at the start of epoch `e`, build the
dataset with `initial_epoch=e` (and skip the batches already done within that epoch, if
any, with `dataset.skip(k)`); `shuffled_order(num_examples, seed, e)` returns that
epoch's example permutation. Each epoch yields the same number of batches,
`num_batches(...)`, even with `repeat=True`: batches never span two epochs.
"""

import math
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from keras_adapters.data.examples import TextExamples

# Dynamic padding rounds each batch's length up to a multiple of this, so that a model
# meets at most max_seq_length / 8 distinct shapes (each one a retrace or XLA compile).
_PAD_TO_MULTIPLE = 8
# Examples packed per call: bounds the dense [chunk, max_seq_length] intermediates.
_PACK_CHUNK = 4096
# Length bucketing sorts by length within windows of this many batches.
_BUCKET_WINDOW_BATCHES = 16
# Stateless RNG algorithm, fixed so that the order does not depend on the device.
_RNG_ALG = "philox"

_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
# Labels travel with the inputs until batching is done.
_LABELS = "labels"

_Inputs = Dict[str, tf.Tensor]
_Element = Union[_Inputs, Tuple[_Inputs, tf.Tensor]]


def make_dataset(examples: TextExamples,
                 preprocessor: Any,
                 *,
                 max_seq_length: int = 128,
                 batch_size: int = 32,
                 shuffle: bool = False,
                 seed: int = 0,
                 repeat: bool = False,
                 initial_epoch: int = 0,
                 dynamic_padding: bool = True,
                 bucket_by_length: bool = False,
                 drop_remainder: bool = False,
                 pad_last_batch: bool = False) -> tf.data.Dataset:
  """Builds a dataset of batched, packed BERT inputs from text examples.

  Args:
    examples: Single sentences or sentence pairs, labelled or not.
    preprocessor: An object with TF Hub's `tokenize` and `bert_pack_inputs`, such as
      `preprocessing.create_preprocessor(...)` or a loaded BERT preprocessing SavedModel.
    max_seq_length: Longest packed sequence, `[CLS]` and `[SEP]`s included; pairs
      are trimmed round-robin to fit.
    batch_size: Examples per batch (the global batch under `tf.distribute`).
    shuffle: Whether to shuffle the examples, differently in each epoch.
    seed: Seed of the shuffling; the same seed gives the same batches.
    repeat: Whether to repeat epochs forever, each epoch a new order.
    initial_epoch: Number of the first epoch, to resume a run with the same order.
    dynamic_padding: Pad each batch only to its longest sequence, rounded up to a
      multiple of 8 (at most `max_seq_length`); if `False`, pad to `max_seq_length`.
    bucket_by_length: After shuffling, sort examples by length within windows of 16
      batches and shuffle those batches, so batches hold similar lengths and carry less
      padding. Needs `shuffle=True`.
    drop_remainder: Drop each epoch's last, smaller batch.
    pad_last_batch: Fill each epoch's last, smaller batch up to `batch_size` with padding
      rows (all `[PAD]`, input mask 0, label 0), so that every batch has one shape, as XLA
      and TPUs need for evaluation. The caller drops the outputs past `len(examples)`.

  Returns:
    A dataset of `(inputs, labels)`, or of `inputs` alone when the examples have no
    labels. `inputs` maps `input_word_ids`, `input_mask` and `input_type_ids` to int32
    [batch, length] tensors; labels are int32 or float32 [batch].

  Raises:
    TypeError: If `examples` or `preprocessor` is of the wrong kind.
    ValueError: If an argument is out of range.
  """
  _check_arguments(examples, preprocessor, max_seq_length=max_seq_length,
                   batch_size=batch_size, drop_remainder=drop_remainder,
                   initial_epoch=initial_epoch, shuffle=shuffle,
                   bucket_by_length=bucket_by_length, pad_last_batch=pad_last_batch)
  features = _encode(examples, preprocessor, max_seq_length)
  order_fn = _order_fn(features["input_word_ids"].row_lengths(), seed=seed,
                       shuffle=shuffle, batch_size=batch_size,
                       bucket_by_length=bucket_by_length)
  if examples.labels is not None:
    features[_LABELS] = _labels(examples.labels)
  make_batch = _batch_fn(features, _padding_id(preprocessor),
                         max_seq_length=max_seq_length, dynamic_padding=dynamic_padding,
                         batch_size=batch_size if pad_last_batch else None)
  epoch_size = num_batches(len(examples), batch_size,
                           drop_remainder=drop_remainder) * batch_size

  def epoch_batches(epoch: tf.Tensor) -> tf.data.Dataset:
    order = order_fn(epoch)
    # Each batch gathers its rows at once: far cheaper than batching example by example.
    starts = tf.data.Dataset.range(0, epoch_size, batch_size)
    return starts.map(lambda start: make_batch(order[start:start + batch_size]),
                      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  if repeat:
    epochs = tf.data.Dataset.counter(initial_epoch)
    cardinality = tf.data.INFINITE_CARDINALITY
  else:
    epochs = tf.data.Dataset.from_tensors(tf.constant(initial_epoch, tf.int64))
    cardinality = num_batches(len(examples), batch_size, drop_remainder=drop_remainder)
  dataset = epochs.flat_map(epoch_batches)
  # flat_map hides the size; Keras and tf.distribute use it for progress and steps.
  dataset = dataset.apply(tf.data.experimental.assert_cardinality(cardinality))
  options = tf.data.Options()
  # In-memory data has no files to shard: multi-worker runs split it by batches instead.
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def shuffled_order(num_examples: int, seed: int, epoch: Union[int, tf.Tensor]) -> tf.Tensor:
  """Returns the example permutation that a shuffled epoch starts from.

  It depends on nothing but its arguments (stateless random ops with a fixed
  algorithm), so a resumed run can reproduce any epoch. Length bucketing, when on,
  reorders this permutation further, again as a function of `(seed, epoch)` only.

  Args:
    num_examples: Number of examples.
    seed: Shuffling seed.
    epoch: Epoch number.

  Returns:
    int64 [num_examples] permutation of `range(num_examples)`.
  """
  return tf.random.experimental.stateless_shuffle(
      tf.range(num_examples, dtype=tf.int64), seed=_epoch_seed(seed, epoch), alg=_RNG_ALG)


def num_batches(num_examples: int, batch_size: int, *, drop_remainder: bool) -> int:
  """Returns the number of batches in one epoch, e.g. for Keras' `steps_per_epoch`."""
  if drop_remainder:
    return num_examples // batch_size
  return math.ceil(num_examples / batch_size)


def _check_arguments(examples: TextExamples, preprocessor: Any, *, max_seq_length: int,
                     batch_size: int, drop_remainder: bool, initial_epoch: int,
                     shuffle: bool, bucket_by_length: bool, pad_last_batch: bool) -> None:
  """Raises a TypeError or ValueError that names the bad argument and the fix."""
  if not isinstance(examples, TextExamples):
    raise TypeError(f"examples must be a TextExamples, got {type(examples).__name__}.")
  if not callable(getattr(preprocessor, "tokenize", None)) or not callable(
      getattr(preprocessor, "bert_pack_inputs", None)):
    raise TypeError(
        "preprocessor needs TF Hub's `tokenize` and `bert_pack_inputs`; pass a "
        "create_preprocessor(...) or a BERT preprocessing SavedModel loaded with hub.load or "
        f"tf.saved_model.load (not a hub.KerasLayer), got {type(preprocessor).__name__}.")
  if not len(examples):
    raise ValueError("examples is empty; a dataset needs at least one example.")
  num_fields = len(examples.texts)
  if num_fields not in (1, 2):
    raise ValueError(
        f"examples has {num_fields} text fields; BERT inputs take single sentences "
        "(1 field) or sentence pairs (2 fields).")
  if max_seq_length < num_fields + 2:
    raise ValueError(
        f"max_seq_length={max_seq_length} leaves no room for text beside [CLS] and "
        f"{num_fields} [SEP]; use at least {num_fields + 2} (usually 128).")
  if batch_size < 1:
    raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
  if drop_remainder and batch_size > len(examples):
    raise ValueError(
        f"batch_size={batch_size} with drop_remainder=True drops all {len(examples)} "
        "examples; use a smaller batch_size or drop_remainder=False.")
  if drop_remainder and pad_last_batch:
    raise ValueError("drop_remainder and pad_last_batch both treat the last, smaller batch: "
                     "drop it (training) or pad it (evaluation), not both.")
  if initial_epoch < 0:
    raise ValueError(f"initial_epoch must be 0 or more, got {initial_epoch}.")
  if bucket_by_length and not shuffle:
    raise ValueError(
        "bucket_by_length reorders examples and is meant for training; set shuffle=True, "
        "or drop bucket_by_length to keep evaluation outputs in example order.")


def _encode(examples: TextExamples, preprocessor: Any,
            max_seq_length: int) -> Dict[str, tf.RaggedTensor]:
  """Tokenizes and packs every example; returns int32 [examples, (length)] inputs."""
  segments = [preprocessor.tokenize(tf.constant(list(field), tf.string))
              for field in examples.texts]
  # A Tensor length lets every chunk reuse one trace of bert_pack_inputs.
  seq_length = tf.constant(max_seq_length, tf.int32)
  chunks = []
  for start in range(0, len(examples), _PACK_CHUNK):
    packed = preprocessor.bert_pack_inputs(
        [segment[start:start + _PACK_CHUNK] for segment in segments], seq_length)
    lengths = tf.reduce_sum(tf.cast(packed["input_mask"], tf.int64), axis=1)
    chunks.append({key: tf.RaggedTensor.from_tensor(tf.cast(packed[key], tf.int32),
                                                    lengths=lengths)
                   for key in _INPUT_KEYS})
  return {key: tf.concat([chunk[key] for chunk in chunks], axis=0) for key in _INPUT_KEYS}


def _labels(labels: np.ndarray) -> tf.Tensor:
  """Returns labels as int32 class ids or float32 scores."""
  labels = np.asarray(labels)
  if np.issubdtype(labels.dtype, np.integer):
    return tf.constant(labels, tf.int32)
  if np.issubdtype(labels.dtype, np.floating):
    return tf.constant(labels, tf.float32)
  raise TypeError(
      f"labels must be int class ids or float scores, got dtype {labels.dtype}.")


def _padding_id(preprocessor: Any) -> int:
  """Returns the `[PAD]` id, read off the packing of an empty text.

  Loaded SavedModels (TF Hub's included) do not expose their special token ids, but
  packing "" to length 3 gives `[CLS] [SEP] [PAD]`.
  """
  probe = preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant([""]))],
                                        tf.constant(3, tf.int32))
  return int(probe["input_word_ids"][0, 2])


def _epoch_seed(seed: int, epoch: Union[int, tf.Tensor]) -> tf.Tensor:
  return tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])


def _order_fn(lengths: tf.Tensor, *, seed: int, shuffle: bool, batch_size: int,
              bucket_by_length: bool) -> Callable[[tf.Tensor], tf.Tensor]:
  """Returns `epoch -> example order`, a pure function of the epoch number."""
  num_examples = int(lengths.shape[0])

  def order(epoch: tf.Tensor) -> tf.Tensor:
    if not shuffle:
      return tf.range(num_examples, dtype=tf.int64)
    permutation = shuffled_order(num_examples, seed, epoch)
    if not bucket_by_length:
      return permutation
    return _bucket(permutation, tf.gather(lengths, permutation), batch_size,
                   tf.random.experimental.stateless_fold_in(_epoch_seed(seed, epoch), 1,
                                                            alg=_RNG_ALG))

  return order


def _bucket(order: tf.Tensor, lengths: tf.Tensor, batch_size: int,
            seed: tf.Tensor) -> tf.Tensor:
  """Sorts `order` by length within windows, then shuffles the full batches.

  Args:
    order: int64 [examples] shuffled example ids.
    lengths: int64 [examples] packed length of each example in `order`.
    batch_size: Examples per batch.
    seed: Stateless seed [2] for shuffling the batches.

  Returns:
    int64 [examples] example ids, each run of `batch_size` of similar lengths. The
    remainder batch stays last, so `drop_remainder` still drops a partial batch.
  """
  window_size = batch_size * _BUCKET_WINDOW_BATCHES
  window = tf.range(tf.size(order, out_type=tf.int64)) // window_size
  # Sorting on (window, length) keeps windows apart; lengths are below 2**32.
  order = tf.gather(order, tf.argsort(window * 2**32 + lengths, stable=True))
  full = tf.size(order) // batch_size * batch_size
  # Without this, lengths would climb within each window, batch after batch.
  batches = tf.random.experimental.stateless_shuffle(
      tf.reshape(order[:full], [-1, batch_size]), seed=seed, alg=_RNG_ALG)
  return tf.concat([tf.reshape(batches, [-1]), order[full:]], axis=0)


def _batch_fn(features: Dict[str, Any], pad_id: int, *, max_seq_length: int,
              dynamic_padding: bool,
              batch_size: Optional[int]) -> Callable[[tf.Tensor], _Element]:
  """Returns a function from example indices to one padded batch, of `batch_size` rows if
  that is given (padding rows added), else of as many rows as indices."""
  pad_values = {"input_word_ids": pad_id, "input_mask": 0, "input_type_ids": 0}

  def make_batch(indices: tf.Tensor) -> _Element:
    rows = {key: tf.gather(value, indices) for key, value in features.items()}
    shape = [batch_size, max_seq_length]
    if dynamic_padding:
      shape = tf.stack([batch_size or -1,
                        _padded_length(rows["input_word_ids"], max_seq_length)])
    inputs = {key: rows[key].to_tensor(pad_values[key], shape=shape) for key in _INPUT_KEYS}
    if _LABELS not in rows:
      return inputs
    labels = rows[_LABELS]
    if batch_size:
      labels = tf.pad(labels, [[0, batch_size - tf.shape(labels)[0]]])
      labels.set_shape([batch_size])
    return inputs, labels

  return make_batch


def _padded_length(word_ids: tf.RaggedTensor, max_seq_length: int) -> tf.Tensor:
  """Returns the longest row's length rounded up to a multiple of 8, capped."""
  longest = word_ids.bounding_shape(axis=1)
  return tf.minimum(-(-longest // _PAD_TO_MULTIPLE) * _PAD_TO_MULTIPLE, max_seq_length)

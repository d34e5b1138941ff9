"""SQuAD windows made by the Model Garden, cached as TFRecords; batches, logits, answers.

What a SQuAD model sees and how its answers are read off are the Model Garden's,
`official.nlp.data.squad_lib`, not rewritten here:

* `read_squad_examples` splits each context into whitespace words and places the answer;
* `convert_examples_to_features` tokenizes (here with the base model's own preprocessing
  tokenizer, `squad_tokenizer.PreprocessingTokenizer`) and cuts long contexts into windows
  `[CLS] question [SEP] context slice [SEP]` of at most `max_seq_length` tokens (384), the
  question cut to `max_query_length` (64), windows `doc_stride` (128) tokens apart; it marks
  the answer's token positions, or `[CLS]` for a training window that misses the answer;
* `postprocess_output` searches the `n_best_size` (20) best starts and ends of every window
  of a question for the best span of at most `max_answer_length` (30) tokens, starting where
  its window gives the token the most context, and maps it back to the context's text.

`load_features` builds the windows of a whole file once and caches them, unpadded, in a
TFRecord keyed by the file's SHA-256, the window settings and the tokenizer; later runs (and
other methods on the same data) read them back in seconds. Subsets of questions are selected
afterwards (`SquadFeatures.select`), so one cache serves every subset size.
"""

import collections
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
from official.nlp.data import squad_lib
import tensorflow as tf

from keras_adapters.data import features as features_lib
from keras_adapters.data import squad as squad_data
from keras_adapters.utils import atomic_io

FORMAT_VERSION = 1
FEATURES_FILE = "features.tfrecord"
META_FILE = "meta.json"

# Per-window sequences stored in the TFRecord, unpadded, and the per-window scalars.
_SEQUENCES = ("input_ids", "segment_ids", "token_to_orig", "token_is_max_context")
_SCALARS = ("example_index", "start_position", "end_position")
# Records parsed per call when reading the cache.
_READ_BATCH = 4096
# Length buckets of the training batches: at most this many, each a multiple of 8 wide.
_NUM_BUCKETS = 8

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


@dataclasses.dataclass(frozen=True)
class WindowSettings:
  """How `squad_lib` cuts question + context into encoder inputs (BERT's SQuAD settings).

  Attributes:
    max_seq_length: Tokens per window, `[CLS]` and both `[SEP]` included.
    doc_stride: Tokens between the starts of consecutive windows over a long context.
    max_query_length: Question tokens kept; longer questions are cut.
  """
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64

  def __post_init__(self):
    for name in ("max_seq_length", "doc_stride", "max_query_length"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if self.max_seq_length < self.max_query_length + 4:
      raise ValueError(
          f"max_seq_length={self.max_seq_length} leaves no room for context after a question "
          f"of max_query_length={self.max_query_length} tokens, [CLS] and two [SEP]: use at "
          f"least {self.max_query_length + 4} (BERT uses 384 with 64).")


@dataclasses.dataclass(frozen=True)
class SquadFeatures:
  """The windows of one SQuAD file, in `squad_lib`'s order.

  Attributes:
    example_ids: Question id of every example `squad_lib` kept, by example index (a
      training example whose answer cannot be recovered from the text is dropped).
    example_index: int [windows], the example of each window.
    input_ids: int32 RaggedTensor [windows, (length)]: `[CLS] question [SEP] context [SEP]`.
    segment_ids: int32 RaggedTensor: 0 up to the first `[SEP]`, 1 after it.
    token_to_orig: int32 RaggedTensor: the context word (whitespace-split, as in
      `SquadExample.doc_tokens`) of each context token, -1 elsewhere.
    token_is_max_context: int32 RaggedTensor: 1 where this window gives the token its most
      context among the windows holding it.
    start_positions: int [windows], the answer's first token; 0 (`[CLS]`) when the window
      misses the answer, and in evaluation data.
    end_positions: int [windows], the answer's last token, likewise.
    build_seconds: How long building the cached windows of the whole file took.
  """
  example_ids: Tuple[str, ...]
  example_index: np.ndarray
  input_ids: tf.RaggedTensor
  segment_ids: tf.RaggedTensor
  token_to_orig: tf.RaggedTensor
  token_is_max_context: tf.RaggedTensor
  start_positions: np.ndarray
  end_positions: np.ndarray
  build_seconds: float

  def __len__(self) -> int:
    return len(self.example_index)

  @property
  def question_ids(self) -> List[str]:
    """The question id of each window."""
    return [self.example_ids[i] for i in self.example_index]

  def select(self, question_ids: Optional[Sequence[str]]) -> "SquadFeatures":
    """The windows of the questions in `question_ids` (all for `None`), in order."""
    if question_ids is None:
      return self
    wanted = set(question_ids)
    keep = np.array([i for i, qid in enumerate(self.question_ids) if qid in wanted], np.int64)
    return dataclasses.replace(
        self, example_index=self.example_index[keep],
        start_positions=self.start_positions[keep], end_positions=self.end_positions[keep],
        **{name: tf.gather(getattr(self, name), keep) for name in (
            "input_ids", "segment_ids", "token_to_orig", "token_is_max_context")})


def read_examples(data: squad_data.SquadData, *, training: bool) -> List[squad_lib.SquadExample]:
  """`squad_lib.read_squad_examples` of a checked file (SQuAD v1.1: no unanswerables)."""
  return squad_lib.read_squad_examples(data.path, is_training=training,
                                       version_2_with_negative=False)


def load_features(data: squad_data.SquadData, tokenizer, settings: WindowSettings, *,
                  training: bool, cache_dir: str) -> SquadFeatures:
  """The windows of every question of `data`, from the cache or built and cached.

  Args:
    data: A checked SQuAD file.
    tokenizer: A `PreprocessingTokenizer` of the base model's preprocessing SavedModel.
    settings: The windowing.
    training: Whether to make training windows (answer positions; examples whose answer
      cannot be recovered are dropped) or evaluation windows.
    cache_dir: Root of the feature cache; each file, settings and tokenizer get a folder.

  Returns:
    The windows.
  """
  key = dict(format_version=FORMAT_VERSION, file_sha256=data.sha256, training=training,
             settings=dataclasses.asdict(settings), tokenizer=tokenizer.fingerprint)
  digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
  folder = os.path.join(cache_dir, f"{'train' if training else 'eval'}-{digest}")
  if not tf.io.gfile.exists(os.path.join(folder, META_FILE)):
    logging.info("Building the SQuAD windows of %s into %s.", data.source, folder)
    _build(data, tokenizer, settings, training, folder, dict(key, source=data.source))
  return _load(folder)


@contextlib.contextmanager
def _quiet_absl_info():
  """`convert_examples_to_features` logs its first 20 windows token by token at INFO."""
  verbosity = logging.get_verbosity()
  logging.set_verbosity(min(verbosity, logging.WARNING))
  try:
    yield
  finally:
    logging.set_verbosity(verbosity)


def _build(data, tokenizer, settings, training, folder, key) -> None:
  """Makes the windows of `data` with `squad_lib` and writes them to `folder`."""
  start = time.perf_counter()
  examples = read_examples(data, training=training)
  # Every string squad_lib will tokenize, in a few large batches through the SavedModel.
  tokenizer.prepare([example.question_text for example in examples])
  tokenizer.prepare(word for example in examples for word in example.doc_tokens)
  if training:
    tokenizer.prepare(example.orig_answer_text for example in examples)
  with atomic_io.atomic_directory(folder) as staging:
    writer = tf.io.TFRecordWriter(os.path.join(staging, FEATURES_FILE))
    num_windows = 0

    def write(feature, is_padding=False):
      nonlocal num_windows
      del is_padding  # With batch_size=1 there is no padding window.
      writer.write(_serialize(feature))
      num_windows += 1

    with writer, _quiet_absl_info():
      squad_lib.convert_examples_to_features(
          examples, tokenizer, max_seq_length=settings.max_seq_length,
          doc_stride=settings.doc_stride, max_query_length=settings.max_query_length,
          is_training=training, output_fn=write, batch_size=1)
    if not num_windows:
      raise ValueError(f"{data.source}: no question could be windowed (squad_lib drops a "
                       "training question whose answer it cannot find in the text).")
    atomic_io.write_json(os.path.join(staging, META_FILE), dict(
        key, num_examples=len(examples), num_windows=num_windows,
        build_seconds=time.perf_counter() - start,
        example_ids=[example.qas_id for example in examples]))


def _serialize(feature: squad_lib.InputFeatures) -> bytes:
  """One window as a `tf.train.Example`, cut to its real tokens."""
  length = int(sum(feature.input_mask))
  values = dict(
      input_ids=feature.input_ids[:length], segment_ids=feature.segment_ids[:length],
      token_to_orig=[feature.token_to_orig_map.get(i, -1) for i in range(length)],
      token_is_max_context=[int(feature.token_is_max_context.get(i, False))
                            for i in range(length)],
      example_index=[feature.example_index], start_position=[feature.start_position],
      end_position=[feature.end_position])
  return tf.train.Example(features=tf.train.Features(feature={
      name: tf.train.Feature(int64_list=tf.train.Int64List(value=value))
      for name, value in values.items()})).SerializeToString()


def _load(folder: str) -> SquadFeatures:
  meta = atomic_io.read_json(os.path.join(folder, META_FILE))
  spec = {name: tf.io.RaggedFeature(tf.int64) for name in _SEQUENCES}
  spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _SCALARS})
  parts = collections.defaultdict(list)
  for batch in tf.data.TFRecordDataset(os.path.join(folder, FEATURES_FILE)).batch(_READ_BATCH):
    for name, value in tf.io.parse_example(batch, spec).items():
      parts[name].append(value)
  columns = {name: tf.cast(tf.concat(values, axis=0), tf.int32) for name, values in parts.items()}
  if int(columns["example_index"].shape[0]) != meta["num_windows"]:
    raise ValueError(f"The feature cache {folder} does not hold the {meta['num_windows']} "
                     "windows it records: delete the folder to build it again.")
  return SquadFeatures(
      example_ids=tuple(meta["example_ids"]),
      example_index=columns["example_index"].numpy().astype(np.int64),
      input_ids=columns["input_ids"], segment_ids=columns["segment_ids"],
      token_to_orig=columns["token_to_orig"],
      token_is_max_context=columns["token_is_max_context"],
      start_positions=columns["start_position"].numpy(),
      end_positions=columns["end_position"].numpy(), build_seconds=meta["build_seconds"])


def _encoder_inputs(input_ids: tf.Tensor, segment_ids: tf.Tensor,
                   shape: Optional[List[int]] = None) -> Dict[str, tf.Tensor]:
  """The TF Hub BERT input dict of padded (dense) or unpadded (ragged or 1-D) windows;
  ragged ones are padded to `shape` if given (rows of padding included), else to the
  longest."""
  if isinstance(input_ids, tf.RaggedTensor):
    mask = tf.ones_like(input_ids)
    return dict(input_word_ids=input_ids.to_tensor(shape=shape),
                input_mask=mask.to_tensor(shape=shape),
                input_type_ids=segment_ids.to_tensor(shape=shape))
  return dict(input_word_ids=input_ids, input_mask=tf.ones_like(input_ids),
              input_type_ids=segment_ids)


def bucket_boundaries(max_seq_length: int) -> List[int]:
  """Window-length bucket boundaries of the training batches, multiples of 8."""
  width = max(8, math.ceil(max_seq_length / _NUM_BUCKETS / 8) * 8)
  return list(range(width + 1, max_seq_length + 1, width))


def num_training_batches(features: SquadFeatures, batch_size: int, max_seq_length: int, *,
                         static_shapes: bool = False) -> int:
  """Batches in one epoch of `training_dataset`: its buckets' batches, or full batches."""
  if static_shapes:
    return len(features) // batch_size
  lengths = features.input_ids.row_lengths().numpy()
  buckets = np.searchsorted(bucket_boundaries(max_seq_length), lengths, side="right")
  return int(sum(math.ceil(count / batch_size) for count in np.bincount(buckets) if count))


def training_dataset(features: SquadFeatures, *, batch_size: int, seed: int,
                     max_seq_length: int, static_shapes: bool = False) -> tf.data.Dataset:
  """One epoch of `(inputs, labels)` training batches, shuffled as a function of `seed`.

  Windows of similar length are batched together (`bucket_by_sequence_length`, up to 8
  buckets) and each batch is padded to its longest window: SQuAD windows range from a few
  dozen tokens to `max_seq_length`, and most are far shorter than it.

  Args:
    features: Training windows.
    batch_size: Windows per batch (the global batch under `tf.distribute`).
    seed: Seed of this epoch's order (stateless, so a resumed run sees the same batches).
    max_seq_length: The windows' maximum length.
    static_shapes: Pad every batch to `max_seq_length` and drop the last partial batch,
      for TPUs, which compile one program per shape.

  Returns:
    Batches of (the TF Hub BERT input dict, int32 labels `[batch, 2]`: start and end
    positions), `num_training_batches` of them.
  """
  columns = dict(input_ids=features.input_ids, segment_ids=features.segment_ids,
                 labels=tf.stack([features.start_positions, features.end_positions], axis=1))
  order = features_lib.shuffled_order(len(features), seed, 0)

  def window(index):
    inputs = _encoder_inputs(columns["input_ids"][index], columns["segment_ids"][index])
    return inputs, columns["labels"][index]

  dataset = tf.data.Dataset.from_tensor_slices(order).map(window)
  if static_shapes:
    shapes = ({key: [max_seq_length] for key in ("input_word_ids", "input_mask",
                                                 "input_type_ids")}, [2])
    dataset = dataset.padded_batch(batch_size, padded_shapes=shapes, drop_remainder=True)
  else:
    boundaries = bucket_boundaries(max_seq_length)
    dataset = dataset.bucket_by_sequence_length(
        lambda inputs, labels: tf.shape(inputs["input_word_ids"])[0], boundaries,
        [batch_size] * (len(boundaries) + 1))
  return dataset.prefetch(tf.data.AUTOTUNE)


def predict_logits(model, features: SquadFeatures, batch_size: int = 64, *,
                   max_seq_length: Optional[int] = None, jit_compile: bool = False
                   ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
  """Start and end logits of every window, each cut to the window's tokens, in window order.

  Windows are batched by length (sorted), so that batches carry little padding. With
  `max_seq_length`, every batch is `[batch_size, max_seq_length]` instead, the last one filled
  up with rows of padding (static shapes, for XLA and TPUs); `jit_compile` compiles the model
  call with XLA.
  """
  lengths = features.input_ids.row_lengths().numpy()
  order = np.argsort(lengths, kind="stable")
  shape = [batch_size, max_seq_length] if max_seq_length else None

  @tf.function(reduce_retracing=True, autograph=False, jit_compile=jit_compile)
  def call(inputs):
    outputs = model(inputs, training=False)
    return outputs["start_logits"], outputs["end_logits"]

  # Traced once for every batch (any length when it varies), and not first for the first
  # batch's shape, then again relaxed at the second batch's.
  ids, type_ids = (tf.TensorSpec(shape or [None, None], values.dtype)
                   for values in (features.input_ids, features.segment_ids))
  call.get_concrete_function(dict(input_word_ids=ids, input_mask=ids, input_type_ids=type_ids))
  starts, ends = [None] * len(features), [None] * len(features)
  for begin in range(0, len(order), batch_size):
    rows = order[begin:begin + batch_size]
    start_logits, end_logits = call(_encoder_inputs(tf.gather(features.input_ids, rows),
                                                    tf.gather(features.segment_ids, rows),
                                                    shape))
    # zip stops at the last window: the outputs of padding rows are dropped.
    for row, start, end in zip(rows, start_logits.numpy(), end_logits.numpy()):
      starts[row], ends[row] = start[:lengths[row]], end[:lengths[row]]
  return starts, ends


def postprocess(examples: Sequence[squad_lib.SquadExample], features: SquadFeatures,
                start_logits: Sequence[np.ndarray], end_logits: Sequence[np.ndarray], *,
                vocab: Sequence[str], do_lower_case: bool, n_best_size: int = 20,
                max_answer_length: int = 30):
  """Answers from window logits, by `squad_lib.postprocess_output`.

  Args:
    examples: The questions to answer (`read_examples` of the evaluation file, or a subset).
    features: Their windows (windows of other questions are ignored).
    start_logits: Per window, as from `predict_logits`.
    end_logits: Per window.
    vocab: The tokenizer's wordpieces in id order, to spell the windows' tokens.
    do_lower_case: Whether the tokenizer lower-cases; used to align answers with the text.
    n_best_size: Best starts and ends searched per window, and answers kept per question.
    max_answer_length: Longest answer, in tokens.

  Returns:
    `(predictions, nbest)`: question id -> answer text (the official prediction format), and
    question id -> the n best answers with `text`, `probability`, `start_logit`, `end_logit`.
  """
  position = {example.qas_id: index for index, example in enumerate(examples)}
  input_features, results = [], []
  # Whole columns at once: indexing a RaggedTensor window by window is an op per window.
  columns = zip(features.question_ids, features.input_ids.to_list(),
                features.token_to_orig.to_list(), features.token_is_max_context.to_list())
  for window, (question_id, ids, to_orig, max_context) in enumerate(columns):
    if question_id not in position:
      continue
    context = [i for i, word in enumerate(to_orig) if word >= 0]
    input_features.append(squad_lib.InputFeatures(
        unique_id=window, example_index=position[question_id], doc_span_index=None,
        tokens=[vocab[i] for i in ids],
        token_to_orig_map={i: to_orig[i] for i in context},
        token_is_max_context={i: bool(max_context[i]) for i in context},
        input_ids=None, input_mask=None, segment_ids=None))
    results.append(RawResult(unique_id=window, start_logits=start_logits[window].tolist(),
                             end_logits=end_logits[window].tolist()))
  predictions, nbest, _ = squad_lib.postprocess_output(
      examples, input_features, results, n_best_size=n_best_size,
      max_answer_length=max_answer_length, do_lower_case=do_lower_case)
  return dict(predictions), {question_id: [dict(entry) for entry in entries]
                             for question_id, entries in nbest.items()}

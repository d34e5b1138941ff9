"""A question-answering SavedModel: raw question and context strings in, the answer out.

`export_qa` traces a trained span labeler (`build_span_labeler`) together with the whole SQuAD
pipeline into one serving graph, so that serving needs TensorFlow and tensorflow-text only:

* tokenization with the base model's wordpiece vocab and lower-casing (read from its
  preprocessing SavedModel by `PreprocessingTokenizer`; the export checks it tokenizes as that
  model does), keeping each wordpiece's character offsets in the context;
* `squad_lib`'s windows over a context of any length: `[CLS] question [SEP] context slice
  [SEP]`, the question cut to `max_query_length` tokens, windows `doc_stride` tokens apart,
  each at most `max_seq_length` tokens;
* `squad_lib`'s answer search: among each window's `n_best_size` best start and end tokens,
  the span of at most `max_answer_length` tokens with the highest start + end logit whose
  start token has its most context in that window, over all windows.

The answer is the context's own text from the first character of the span's first wordpiece
to the last character of its last one (`answer_start`/`answer_end`: Python string offsets,
end exclusive, as SQuAD's `answer_start`). The evaluation (`squad_lib.postprocess_output`)
maps the span back through whitespace words instead, with the same text as a rule; where its
alignment fails (an answer holding wordpieces outside the vocab), it takes the span's whole
whitespace words, punctuation attached. An empty context gives the answer `""` with score
`-inf`.

    loaded = tf.saved_model.load(export_dir)
    result = loaded.signatures["serving_default"](question=tf.constant([...]),
                                                  context=tf.constant([...]))
    # result["answer"], result["score"], result["answer_start"], result["answer_end"]
"""

import tensorflow as tf
import tensorflow_text as text
from official.nlp.tools import tokenization

from keras_adapters.serving import task_export
from keras_adapters.data import squad_features
from keras_adapters.utils import atomic_io

# Texts whose tokenization by the export must equal the preprocessing model's: case, accents,
# ligatures, dotted capitals, punctuation, digits, CJK, control and format characters.
_PROBE_TEXTS = (
    "The Café DÉJÀ-VU of Ünïcödé: naïve façade, 1895–1943 (İstanbul) ﬁnal 'quoted' x\u200by",
    "Who wrote \"The  Raven\"?\tEdgar A. Poe, in 1845; 東京 is Tokyo.\n",
)


class _QaModule(tf.Module):
  """The serving graph: tokenize with offsets, window, run the model, search the best span."""

  def __init__(self, model, vocab_file, lower_case, settings, n_best_size,
               max_answer_length):
    super().__init__(name="question_answering")
    self._model = task_export.keras_model_in_module(self, model)
    self._lower_case = lower_case
    self._settings = settings
    self._n_best_size = n_best_size
    self._max_answer_length = max_answer_length
    vocab = tokenization.load_vocab(vocab_file)
    self._cls_id, self._sep_id, self._pad_id = (vocab[token]
                                                for token in ("[CLS]", "[SEP]", "[PAD]"))
    initializer = tf.lookup.TextFileInitializer(
        vocab_file, key_dtype=tf.string, key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
        value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER)
    self._vocab_table = tf.lookup.StaticHashTable(initializer, default_value=-1)
    # Text is normalized up front, character by character (`_wordpieces`), so the tokenizer
    # itself must not change it: its offsets then map back to the original characters.
    self._tokenizer = text.BertTokenizer(self._vocab_table, lower_case=False,
                                         token_out_type=tf.int64, unknown_token="[UNK]")

  def wordpieces(self, string):
    """Wordpiece ids of a scalar string, with each one's character offsets in it.

    BERT's normalization (lower-casing: case folding, NFD, dropping accents; control and
    format characters to spaces) is applied to each character separately, so that the byte
    offsets of the normalized text map back to characters of the original.

    Returns:
      int32 `ids`, `char_begins` and `char_ends` (exclusive), each `[wordpieces]`.
    """
    chars = tf.strings.unicode_split(string, "UTF-8")
    if self._lower_case:
      chars = text.case_fold_utf8(chars)
      chars = text.normalize_utf8(chars, "NFD")
      chars = tf.strings.regex_replace(chars, r"\p{Mn}", "")
    chars = tf.strings.regex_replace(chars, r"\p{Cc}|\p{Cf}", " ")
    lengths = tf.cast(tf.strings.length(chars), tf.int64)
    starts = tf.cumsum(lengths, exclusive=True)
    ids, begins, ends = self._tokenizer.tokenize_with_offsets(
        tf.strings.reduce_join(chars)[tf.newaxis])
    # A character that normalizes to nothing (a combining accent) belongs with the one before
    # it: sorting keys 2 * start, minus 1 for such characters.
    keys = 2 * starts - tf.cast(lengths == 0, tf.int64)
    char_begins = tf.searchsorted(keys, 2 * begins.flat_values, side="right") - 1
    char_ends = tf.searchsorted(keys, 2 * ends.flat_values, side="left")
    return (tf.cast(ids.flat_values, tf.int32), tf.cast(char_begins, tf.int32),
            tf.cast(char_ends, tf.int32))

  def answer_one(self, question, context):
    """The best answer to one question in one context: (text, score, start, end)."""
    settings = self._settings
    question_ids, _, _ = self.wordpieces(question)
    question_ids = question_ids[:settings.max_query_length]
    doc_ids, char_begins, char_ends = self.wordpieces(context)
    num_question, num_doc = tf.size(question_ids), tf.size(doc_ids)
    # squad_lib's windows: starts `stride` apart until one reaches the end of the context.
    max_doc = settings.max_seq_length - num_question - 3
    stride = tf.minimum(settings.doc_stride, max_doc)
    num_windows = 1 + tf.maximum(0, -((max_doc - num_doc) // stride))
    window = tf.range(num_windows)
    starts = window * stride
    lengths = tf.minimum(max_doc, num_doc - starts)[:, tf.newaxis]
    starts = starts[:, tf.newaxis]
    width = num_question + 3 + tf.reduce_max(lengths)
    position = tf.range(width)[tf.newaxis, :]
    doc_offset = num_question + 2
    token = starts + position - doc_offset  # The context token at each position.
    is_doc = (position >= doc_offset) & (position < doc_offset + lengths)
    word_ids = _where_chain([
        (position == 0, self._cls_id),
        ((position >= 1) & (position <= num_question), _gather(question_ids, position - 1)),
        (position == num_question + 1, self._sep_id),
        (is_doc, _gather(doc_ids, token)),
        (position == doc_offset + lengths, self._sep_id)], self._pad_id)
    in_window = position <= doc_offset + lengths
    inputs = dict(input_word_ids=word_ids, input_mask=tf.cast(in_window, tf.int32),
                  input_type_ids=tf.cast(in_window & (position >= doc_offset), tf.int32))
    outputs = self._model(inputs)
    start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]

    # squad_lib's "max context": the window where the token is farthest from both edges.
    doc_token = tf.range(num_doc)[tf.newaxis, :]
    context_score = tf.where(
        (doc_token >= starts) & (doc_token < starts + lengths),
        tf.cast(tf.minimum(doc_token - starts, starts + lengths - 1 - doc_token), tf.float32)
        + 0.01 * tf.cast(lengths, tf.float32), -float("inf"))
    best = tf.reduce_max(context_score, axis=0, keepdims=True)
    # The first window reaching the maximum, as squad_lib's strict `>` picks.
    best_window = tf.reduce_min(
        tf.where(context_score == best, window[:, tf.newaxis], num_windows), axis=0)
    is_max_context = is_doc & (_gather(best_window, token) == window[:, tf.newaxis])
    k = tf.minimum(self._n_best_size, width)
    top_start = start_logits >= tf.math.top_k(start_logits, k).values[:, -1:]
    top_end = end_logits >= tf.math.top_k(end_logits, k).values[:, -1:]
    first, last = position[:, :, tf.newaxis], position[:, tf.newaxis, :]
    valid = ((is_max_context & top_start)[:, :, tf.newaxis] & (is_doc & top_end)[:, tf.newaxis, :]
             & (last >= first) & (last - first < self._max_answer_length))
    scores = tf.where(valid, start_logits[:, :, tf.newaxis] + end_logits[:, tf.newaxis, :],
                      -float("inf"))
    flat = tf.reshape(scores, [-1])
    best_span = tf.argmax(flat, output_type=tf.int32)
    score = flat[best_span]
    span_start = starts[best_span // (width * width), 0] - doc_offset
    span = best_span % (width * width)
    first_token, last_token = span_start + span // width, span_start + span % width
    found = score > -float("inf")
    begin = tf.where(found, _gather(char_begins, first_token), 0)
    end = tf.where(found, _gather(char_ends, last_token), 0)
    answer = tf.strings.substr(context, begin, end - begin, unit="UTF8_CHAR")
    return answer, score, begin, end


def _gather(values, indices):
  """`values[indices]` with out-of-range indices clipped (their results are masked out)."""
  padded = tf.concat([values, tf.zeros([1], values.dtype)], axis=0)
  return tf.gather(padded, tf.clip_by_value(indices, 0, tf.size(values)))


def _where_chain(cases, default):
  """The value of the first true condition of `cases` ((condition, value) pairs), per element."""
  result = default
  for condition, value in reversed(cases):
    result = tf.where(condition, value, result)
  return result


def export_qa(model, tokenizer, export_dir, *, settings=squad_features.WindowSettings(),
              n_best_size=20, max_answer_length=30, overwrite=False):
  """Writes a SavedModel answering questions about raw contexts with a trained span labeler.

  Its `serving_default` signature (also the `answer` function) takes string tensors
  `question` and `context`, `[batch]`, and returns `answer` (string), `score` (float32: start
  + end logit), `answer_start` and `answer_end` (int32 character offsets in the context, end
  exclusive), each `[batch]`. Contexts of any length are windowed inside.

  Args:
    model: The trained span labeler (`build_span_labeler`).
    tokenizer: The `PreprocessingTokenizer` the model was trained with (vocab, lower-casing).
    export_dir: Folder to write, replaced atomically if it holds a question-answering
      export; another non-empty folder is refused unless `overwrite=True`.
    settings: The windowing the model was trained with.
    n_best_size: Best starts and ends searched per window.
    max_answer_length: Longest answer, in wordpieces.
    overwrite: Replace a non-empty folder that is not a question-answering export.

  Returns:
    `export_dir`.

  Raises:
    ValueError: The export would tokenize differently from the preprocessing model, or
      `export_dir` holds something else (see `overwrite`).
  """
  if not overwrite:
    task_export.check_export_dir(export_dir, task_export.QA_EXPORT)
  module = _QaModule(model, tokenizer.vocab_file, tokenizer.do_lower_case, settings,
                     n_best_size, max_answer_length)
  # Vocab words as they are and upper-cased show the lower-casing, whatever the vocab.
  cased_words = " ".join(f"{word} {word.upper()}" for word in tokenizer.probe_words)
  for probe in _PROBE_TEXTS + (cased_words,):
    ids = module.wordpieces(tf.constant(probe))[0].numpy().tolist()
    if ids != tokenizer.token_ids([probe])[0]:
      raise ValueError(
          f"The QA export would tokenize {probe!r} differently from the preprocessing model "
          f"(lower_case={tokenizer.do_lower_case} read off it): it is not a BERT wordpiece "
          "preprocessing model that tensorflow_text.BertTokenizer reproduces.")
  string = tf.TensorSpec([None], tf.string)

  @tf.function(input_signature=[string, string], autograph=False)
  def answer(question, context):
    texts, scores, begins, ends = tf.map_fn(
        lambda pair: module.answer_one(pair[0], pair[1]), (question, context),
        fn_output_signature=(tf.string, tf.float32, tf.int32, tf.int32))
    return dict(answer=texts, score=scores, answer_start=begins, answer_end=ends)

  module.answer = answer
  # The function itself, not `answer.get_concrete_function()`: TensorFlow traces a function
  # of the module again when it saves one already made concrete, and each trace of this
  # graph (tokenizer, windows, search) was half of an export's time.
  with atomic_io.atomic_directory(export_dir, marker="saved_model.pb") as staging:
    tf.saved_model.save(module, staging, signatures={"serving_default": answer})
  return export_dir

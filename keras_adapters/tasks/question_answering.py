"""SQuAD v1.1 as a `Task`: train a span labeler, answer the evaluation questions, score, export.

Runs go through the run driver (`core.train_lib.run`) like every task: checkpoints,
resumption after a kill, the NaN stop, `tf.distribute` strategies and the run records; the
windows and the answer search are the Model Garden's (`squad_features`), the scores the
official v1.1 metric (`squad.evaluate`). Written to `model_dir`:

* `predictions.json`: question id -> answer text, the official prediction format;
* `nbest_predictions.json`: question id -> the n best answers with their probabilities and
  logits;
* `eval_results.json`: `{"exact_match": ..., "f1": ...}` in percent, as the official
  `evaluate-v1.1.py` prints them;
* `results.json`: those scores with the run's config, data sizes, parameter counts and times;
* `run.json`: what defines the run (data, base, settings); a rerun with others is refused.
"""

import dataclasses
import hashlib
import os
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import logging

from keras_adapters.core import base_task
from keras_adapters.core import config_definitions
from keras_adapters.core import train_lib
from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.data import squad_tokenizer
from keras_adapters.hub import compatibility
from keras_adapters.models import adapted_bert
from keras_adapters.models import saving
from keras_adapters.models import span_labeler
from keras_adapters.serving import qa_export
from keras_adapters.serving import task_export
from keras_adapters.utils import atomic_io
from keras_adapters.utils import settings

setting = settings.setting

TASK = "squad_v1.1"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
# The held-out questions are drawn with another seed than the training subset's.
_HOLDOUT_SEED = 1
# Evaluation needs no gradients: larger batches than training fit.
EVAL_BATCH_SIZE = 64
# Published F1 on the SQuAD v1.1 dev set, printed beside ours: Houlsby et al. (2019),
# Section 3.5, and what small distilled bases reach with full fine-tuning.
ANCHORS = (
    ("Houlsby et al. 2019 (BERT), adapters m=64", "90.4"),
    ("Houlsby et al. 2019 (BERT), full fine-tuning", "90.7"),
    ("Houlsby et al. 2019 (BERT), adapters m=2", "89.9"),
    ("6-layer distilled bases, full fine-tuning (literature)", "about 85-87"),
)


@dataclasses.dataclass(frozen=True)
class SquadConfig:
  """The SQuAD side of a run (the model and optimiser side is `ExperimentConfig`); each
  field's help says what it does, and is its flag's help in `run_squad.py`."""
  doc_stride: int = setting(128, "Tokens between consecutive windows over a context.")
  max_query_length: int = setting(64, "Question tokens kept.")
  n_best_size: int = setting(20, "Best starts and ends searched per window; answers in "
                             "nbest_predictions.json.")
  max_answer_length: int = setting(30, "Longest answer, in wordpieces.")
  max_train_examples: int = setting(
      0, "Train on a seeded subset of this many training questions (0 = all).")
  max_eval_examples: int = setting(
      0, "Evaluate on a seeded subset of this many questions (0 = all).")
  holdout_questions: int = setting(
      0, "Hold out this many seeded training questions: never trained on, they are answered "
      "and scored in place of the evaluation file, to choose settings without the dev set.")

  def __post_init__(self):
    for name in ("n_best_size", "max_answer_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}.")
    for name in ("max_train_examples", "max_eval_examples", "holdout_questions"):
      if getattr(self, name) < 0:
        raise ValueError(f"{name} must be 0 (all) or positive, got {getattr(self, name)}.")
    if self.holdout_questions and self.max_eval_examples:
      raise ValueError("holdout_questions scores held-out training questions in place of the "
                       "evaluation file; max_eval_examples subsets that file: give one of them.")

  def window_settings(self, max_seq_length: int) -> squad_features.WindowSettings:
    return squad_features.WindowSettings(max_seq_length=max_seq_length,
                                         doc_stride=self.doc_stride,
                                         max_query_length=self.max_query_length)


class QuestionAnsweringTask(base_task.Task):
  """SQuAD v1.1: a span labeler trained on `train`, answering and scored on `dev`.

  Args:
    train: Checked training data.
    dev: Checked evaluation data.
    config: The run's settings; `data.max_seq_length` is the window length (`model.pooling`
      is not used: the span head reads every token).
    squad_config: Windows, answer search and data subsets.
    feature_cache_dir: Root of the cached windows, shared by runs on the same data.
  """

  def __init__(self, train: squad.SquadData, dev: squad.SquadData,
               config: config_definitions.ExperimentConfig, squad_config: SquadConfig, *,
               feature_cache_dir: str):
    super().__init__(config)
    self.train, self.dev, self.squad_config = train, dev, squad_config
    self.feature_cache_dir = feature_cache_dir
    self.settings = squad_config.window_settings(config.data.max_seq_length)
    if squad_config.holdout_questions:
      if dev.sha256 != train.sha256:
        raise ValueError("holdout_questions scores held-out training questions: pass the "
                         f"training file as the evaluation data too, not {dev.source}.")
      self.eval_ids = squad.sample_question_ids(train, squad_config.holdout_questions,
                                                seed=_HOLDOUT_SEED)
    else:
      self.eval_ids = squad.sample_question_ids(dev, squad_config.max_eval_examples)
    self.train_ids = squad.sample_question_ids(
        train, squad_config.max_train_examples,
        exclude=self.eval_ids if squad_config.holdout_questions else ())
    self._tokenizer = None
    self._train_features = None

  @property
  def name(self) -> str:
    return TASK

  def prepare(self) -> None:
    model = self.config.model
    base = self.read_base()
    compatibility.check_seq_length(self.config.data.max_seq_length, base.config)
    self._tokenizer = squad_tokenizer.PreprocessingTokenizer(
        model.preprocess_handle, encoder_config=base.config, encoder_tokenizer=base.tokenizer)
    if base.tokenizer is None:  # Else the tokenizer's vocabulary was compared with the base's.
      compatibility.check_unknown_tokens(
          compatibility.load_preprocessor(model.preprocess_handle),
          (text for article in self.train.articles for paragraph in article["paragraphs"]
           for text in [paragraph["context"]] + [qa["question"] for qa in paragraph["qas"]]),
          base.config, base.tokenizer, hub_handle=model.hub_handle,
          preprocess_handle=model.preprocess_handle)

  def definition(self) -> Dict[str, Any]:
    questions = self.train.question_ids if self.train_ids is None else self.train_ids
    return dict(
        task=TASK, train_file_sha256=self.train.sha256, train_examples=len(questions),
        train_fingerprint="sha256:" + _sha256(questions),
        base_fingerprint=self.read_base().fingerprint, config=self.config.definition(),
        windows=dict(doc_stride=self.squad_config.doc_stride,
                     max_query_length=self.squad_config.max_query_length))

  def check_export_dir(self, export_dir: str) -> None:
    task_export.check_export_dir(os.path.join(export_dir, "saved_model"),
                                 task_export.QA_EXPORT, fix=(
                                     "Pass another export_dir, or move that folder away."))

  def _training_features(self):
    if self._train_features is None:
      self._train_features = squad_features.load_features(
          self.train, self._tokenizer, self.settings, training=True,
          cache_dir=self.feature_cache_dir).select(self.train_ids)
    return self._train_features

  def steps_per_epoch(self) -> int:
    return squad_features.num_training_batches(
        self._training_features(), self.config.trainer.batch_size,
        self.config.data.max_seq_length, static_shapes=self.config.static_shapes)

  def build_model(self):
    return build_model(self.config)

  def loss(self, labels, outputs):
    return span_labeler.span_loss(labels, outputs)

  def train_dataset(self, shuffle_seed: int):
    return squad_features.training_dataset(
        self._training_features(), batch_size=self.config.trainer.batch_size,
        seed=shuffle_seed, max_seq_length=self.config.data.max_seq_length,
        static_shapes=self.config.static_shapes)

  def initial_results(self, train_result, steps_per_epoch) -> Dict[str, Any]:
    del steps_per_epoch  # SQuAD records windows per second instead.
    train_features = self._training_features()
    return dict(
        squad=dataclasses.asdict(self.squad_config), train_source=self.train.source,
        train_file_sha256=self.train.sha256,
        train_questions=len(set(train_features.question_ids)),
        train_windows=len(train_features), resumed_from_step=train_result.start_step,
        train_examples_per_second=train_result.examples_per_sec,
        tokenizer=dict(vocab_file=self._tokenizer.vocab_file,
                       do_lower_case=self._tokenizer.do_lower_case))

  def _evaluation(self):
    """What the recorded scores were computed on: the questions and the answer search."""
    return dict(eval_file_sha256=self.dev.sha256,
                eval_questions_sha256=_sha256(self.eval_ids or self.dev.question_ids),
                n_best_size=self.squad_config.n_best_size,
                max_answer_length=self.squad_config.max_answer_length)

  def pending_evaluations(self, results) -> List[str]:
    current = results is not None and results.get("evaluation") == self._evaluation()
    return [] if current else ["dev"]

  def evaluate(self, model, results, pending, output_dir) -> None:
    if not pending:
      return
    eval_features = squad_features.load_features(
        self.dev, self._tokenizer, self.settings, training=False,
        cache_dir=self.feature_cache_dir).select(self.eval_ids)
    results.update(_evaluate(model, self._tokenizer, self.dev, self.eval_ids, eval_features,
                             self.config, self.squad_config, output_dir),
                   squad=dataclasses.asdict(self.squad_config), evaluation=self._evaluation(),
                   feature_build_seconds=dict(train=self._training_features().build_seconds,
                                              eval=eval_features.build_seconds))

  def export(self, model, export_dir) -> None:
    export(model, self._tokenizer, self.config, self.squad_config, export_dir)


def build_model(config: config_definitions.ExperimentConfig):
  """The span labeler of `config`: its encoder with its adapters, and the span head."""
  encoder = adapted_bert.AdaptedBert(config.model.hub_handle, **config.adapted_bert_options)
  return span_labeler.build_span_labeler(encoder)


def run_squad(train: squad.SquadData, dev: squad.SquadData,
              config: config_definitions.ExperimentConfig, squad_config: SquadConfig,
              model_dir: str, *, feature_cache_dir: str, export_dir: Optional[str] = None,
              progress_bar: bool = True) -> Dict[str, Any]:
  """Trains on `train`, answers and scores `dev`, optionally exports; resumable.

  `train_lib.run(QuestionAnsweringTask(...), ...)`: see there for resumption, the records
  and the errors. A finished run answers again (from its final checkpoint) when the
  evaluation questions or the answer search changed.

  Returns:
    The results also written to `model_dir/results.json`.
  """
  task = QuestionAnsweringTask(train, dev, config, squad_config,
                               feature_cache_dir=feature_cache_dir)
  return train_lib.run(task, model_dir, export_dir=export_dir, progress_bar=progress_bar)


def _evaluate(model, tokenizer, dev, eval_ids, eval_features, config, squad_config,
              output_dir) -> Dict[str, Any]:
  """Answers the evaluation questions and scores them; writes the official files to
  `output_dir` (unless `None`); returns what the results record of it."""
  logging.info("Answering %d evaluation questions (%d windows)...",
               len(set(eval_features.question_ids)), len(eval_features))
  start = time.time()
  start_logits, end_logits = squad_features.predict_logits(
      model, eval_features, EVAL_BATCH_SIZE, max_seq_length=(
          config.data.max_seq_length if config.static_shapes else None),
      jit_compile=config.runtime.jit_compile)
  predict_seconds = time.time() - start
  examples = squad_features.read_examples(dev, training=False)
  if eval_ids is not None:
    wanted = set(eval_ids)
    examples = [example for example in examples if example.qas_id in wanted]
  predictions, nbest = squad_features.postprocess(
      examples, eval_features, start_logits, end_logits, vocab=tokenizer.vocab,
      do_lower_case=tokenizer.do_lower_case, n_best_size=squad_config.n_best_size,
      max_answer_length=squad_config.max_answer_length)
  scores = squad.evaluate(squad.filter_articles(dev.articles, eval_ids), predictions)
  if output_dir:
    atomic_io.write_json(os.path.join(output_dir, PREDICTIONS_FILE), predictions)
    atomic_io.write_json(os.path.join(output_dir, NBEST_FILE), nbest)
    atomic_io.write_json(os.path.join(output_dir, EVAL_RESULTS_FILE), scores)
  return dict(metrics=scores, eval_source=dev.source, eval_questions=len(examples),
              eval_windows=len(eval_features), eval_seconds=time.time() - start,
              eval_windows_per_second=len(eval_features) / max(predict_seconds, 1e-9))


def export(model, tokenizer, config: config_definitions.ExperimentConfig, squad_config: SquadConfig,
           export_dir: str) -> None:
  """Writes `saved_model/` (raw strings in, answers out) and `adapters/` under `export_dir`."""
  logging.info("Exporting the QA SavedModel and the adapter-only artifact to %s...", export_dir)
  qa_export.export_qa(
      model, tokenizer, os.path.join(export_dir, "saved_model"),
      settings=squad_config.window_settings(config.data.max_seq_length),
      n_best_size=squad_config.n_best_size, max_answer_length=squad_config.max_answer_length)
  saving.save_adapters(
      model, os.path.join(export_dir, "adapters"),
      metadata=dict(task=TASK, head="span_labeler",
                    max_seq_length=config.data.max_seq_length, **{
                        name: getattr(squad_config, name) for name in (
                            "doc_stride", "max_query_length", "n_best_size",
                            "max_answer_length")}))


def _sha256(question_ids: Sequence[str]) -> str:
  return hashlib.sha256("\n".join(question_ids).encode("utf-8")).hexdigest()


def results_markdown(table: Dict[str, Dict[str, Any]]) -> str:
  """Results of several runs (method name -> `run_squad` results) as Markdown, with the
  published figures after them."""
  full_f1 = table["full"]["metrics"]["f1"] if "full" in table else None
  lines = ["SQuAD v1.1, official v1.1 metric (%), on the evaluation questions of each run.", "",
           "| method | exact match | F1 | F1 vs full | trained params | % of base | "
           "training questions (windows) | epochs | batch | learning rate | train min | "
           "eval questions |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for method, entry in table.items():
    config, metrics, parameters = entry["config"], entry["metrics"], entry["parameters"]
    gap = ("–" if full_f1 is None or method == "full"
           else f"{metrics['f1'] - full_f1:+.2f}")
    lines.append(
        f"| {method} | {metrics['exact_match']:.2f} | {metrics['f1']:.2f} | {gap} | "
        f"{parameters['trainable']:,} | {parameters['trainable_percent_of_base']:.2f} | "
        f"{entry['train_questions']:,} ({entry['train_windows']:,}) | {config['epochs']:g} | "
        f"{config['batch_size']} | {config['learning_rate']:g} | "
        f"{entry['train_seconds'] / 60:.1f} | {entry['eval_questions']:,} |")
  lines += ["", "Published F1 on the SQuAD v1.1 dev set, for reference:", "",
            "| model | F1 |", "|---|---|"]
  lines += [f"| {name} | {f1} |" for name, f1 in ANCHORS]
  return "\n".join(lines) + "\n"

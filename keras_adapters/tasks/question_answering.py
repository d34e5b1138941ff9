"""One SQuAD v1.1 run: train a span labeler, answer the evaluation questions, score, export.

Training goes through the project's `Trainer` (checkpoints, resumption after a kill, NaN stop,
`tf.distribute` strategies), with the same `RunConfig` as the classification experiments; the
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
from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf

from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import qa_export
from keras_adapters.serving import task_export
from keras_adapters.models import adapted_bert
from keras_adapters.models import parameter_summary
from keras_adapters.models import saving
from keras_adapters.models import span_labeler
from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.data import squad_tokenizer
from keras_adapters.training import distribution
from keras_adapters.tasks import classification
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import precision
from keras_adapters.utils import provenance
from keras_adapters.utils import run_lock

TASK = "squad_v1.1"
RESULTS_FILE = "results.json"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
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
  """The SQuAD side of a run (the model and optimiser side is `RunConfig`).

  Attributes:
    doc_stride: Tokens between the starts of consecutive windows over a long context.
    max_query_length: Question tokens kept.
    n_best_size: Best starts and ends searched per window; answers kept per question.
    max_answer_length: Longest answer, in wordpieces.
    max_train_examples: Train on a seeded subset of this many training questions (0 = all).
    max_eval_examples: Evaluate on a seeded subset of this many questions (0 = all).
  """
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  max_train_examples: int = 0
  max_eval_examples: int = 0

  def __post_init__(self):
    for name in ("n_best_size", "max_answer_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}.")
    for name in ("max_train_examples", "max_eval_examples"):
      if getattr(self, name) < 0:
        raise ValueError(f"{name} must be 0 (all) or positive, got {getattr(self, name)}.")

  def window_settings(self, max_seq_length: int) -> squad_features.WindowSettings:
    return squad_features.WindowSettings(max_seq_length=max_seq_length,
                                         doc_stride=self.doc_stride,
                                         max_query_length=self.max_query_length)


def build_model(config: classification.RunConfig):
  """The span labeler of `config`: its encoder with its tuning policy, and the span head."""
  encoder = adapted_bert.AdaptedBert(config.hub_handle, adapter_config=config.adapter_settings())
  return span_labeler.build_span_labeler(encoder)


def run_definition(train: squad.SquadData, train_ids: Optional[List[str]],
                   config: classification.RunConfig, squad_config: SquadConfig,
                   base_fingerprint: str) -> Dict[str, Any]:
  """What defines a run, recorded in its folder's `run.json`: the training data (file and
  questions), the base encoder, and every setting that changes what is learnt."""
  questions = train.question_ids if train_ids is None else train_ids
  return dict(
      task=TASK, train_file_sha256=train.sha256, train_questions=len(questions),
      train_questions_sha256=_sha256(questions), base_fingerprint=base_fingerprint,
      config={name: value for name, value in dataclasses.asdict(config).items()
              if name not in classification.EXECUTION_FIELDS},
      windows=dict(doc_stride=squad_config.doc_stride,
                   max_query_length=squad_config.max_query_length))


def check_run_dir(model_dir: str, definition: Mapping[str, Any]) -> None:
  """Raises `classification.RunSettingsError` unless `model_dir` is new or holds this run."""
  recorded = atomic_io.read_json(os.path.join(model_dir, classification.RUN_FILE))
  if recorded is None:
    if tf.train.latest_checkpoint(model_dir) is not None:
      raise classification.RunSettingsError(
          f"{model_dir} holds checkpoints but no {classification.RUN_FILE} recording their "
          "settings, so they cannot be resumed safely. Use a new model_dir.")
    return
  there, now = _flatten(recorded), _flatten(definition)
  differences = [f"{name}={there.get(name)!r} there, {value!r} now"
                 for name, value in now.items() if there.get(name) != value]
  if differences:
    raise classification.RunSettingsError(
        f"{model_dir} holds a run with other settings: {'; '.join(differences)}. Use a new "
        "model_dir for the new settings, or the recorded ones to resume or reuse that run.")


def run_squad(train: squad.SquadData, dev: squad.SquadData, config: classification.RunConfig,
              squad_config: SquadConfig, model_dir: str, *, feature_cache_dir: str,
              export_dir: Optional[str] = None, progress_bar: bool = True) -> Dict[str, Any]:
  """Trains on `train`, answers and scores `dev`, optionally exports; resumable.

  Everything is checked before the first step: the settings, that the base encoder has
  positions for `max_seq_length` and embeddings for the preprocessing model's vocabulary, that
  `model_dir` holds no run with other settings, that the folders can be written. Rerunning
  resumes an interrupted run; on a finished one nothing trains: it returns the recorded
  results, after answering again (from the final checkpoint) if the evaluation questions or
  the answer search changed, and exporting to an `export_dir` the results do not record.

  Args:
    train: Checked training data.
    dev: Checked evaluation data.
    config: Model, optimiser and distribution settings; `max_seq_length` is the window
      length (`pooling` is not used: the span head reads every token).
    squad_config: Windows, answer search and data subsets.
    model_dir: Folder of `run.json`, the checkpoints, logs, predictions and results.
    feature_cache_dir: Root of the cached windows, shared by runs on the same data.
    export_dir: If set, receives `saved_model/` (question and context strings in, answer
      out) and `adapters/` (the adapter-only artifact).
    progress_bar: Whether to show the training progress bar.

  Returns:
    The results dict also written to `model_dir/results.json`.

  Raises:
    classification.RunSettingsError: `model_dir` holds a run with other settings.
    run_lock.ModelDirBusyError: Another run is using `model_dir`.
    ValueError: A setting the base or the preprocessing model cannot serve; the message
      names the argument.
  """
  base = hub_encoder.read_hub_encoder(config.hub_handle)
  compatibility.check_seq_length(config.max_seq_length, base.config)
  settings = squad_config.window_settings(config.max_seq_length)
  tokenizer = squad_tokenizer.PreprocessingTokenizer(
      config.preprocess_handle, encoder_config=base.config, encoder_tokenizer=base.tokenizer)
  if base.tokenizer is None:  # Else the tokenizer's vocabulary was compared with the encoder's.
    compatibility.check_unknown_tokens(
        compatibility.load_preprocessor(config.preprocess_handle),
        (text for article in train.articles for paragraph in article["paragraphs"]
         for text in [paragraph["context"]] + [qa["question"] for qa in paragraph["qas"]]),
        base.config, base.tokenizer, hub_handle=config.hub_handle,
        preprocess_handle=config.preprocess_handle)
  train_ids = squad.sample_question_ids(train, squad_config.max_train_examples)
  definition = run_definition(train, train_ids, config, squad_config, base.fingerprint)
  check_run_dir(model_dir, definition)
  atomic_io.make_writable_dir(model_dir, "model_dir")
  if export_dir:
    atomic_io.make_writable_dir(export_dir, "export_dir")
    task_export.check_export_dir(os.path.join(export_dir, "saved_model"),
                                 task_export.QA_EXPORT, fix=(
                                     "Pass another export_dir, or move that folder away."))

  strategy = distribution.get_strategy(config.strategy, tpu=config.tpu)
  # One run per folder, held by the chief, as in `classification.run_task`.
  with run_lock.hold(model_dir, enabled=strategy.extended.should_checkpoint), \
      precision.policy_scope(config.mixed_precision):
    return _run_in_locked_dir(train, dev, config, squad_config, model_dir, feature_cache_dir,
                              export_dir, progress_bar, strategy, tokenizer, train_ids,
                              definition)


def _run_in_locked_dir(train, dev, config, squad_config, model_dir, feature_cache_dir,
                       export_dir, progress_bar, strategy, tokenizer, train_ids, definition):
  """`run_squad` once everything is checked and `model_dir` is this run's."""
  settings = squad_config.window_settings(config.max_seq_length)
  is_chief = strategy.extended.should_checkpoint
  if is_chief:
    atomic_io.remove_leftovers(model_dir)
    if not tf.io.gfile.exists(os.path.join(model_dir, classification.RUN_FILE)):
      atomic_io.write_json(os.path.join(model_dir, classification.RUN_FILE), definition)
  results_path = os.path.join(model_dir, RESULTS_FILE)
  results = atomic_io.read_json(results_path)
  eval_ids = squad.sample_question_ids(dev, squad_config.max_eval_examples)
  evaluation = dict(eval_file_sha256=dev.sha256,
                    eval_questions_sha256=_sha256(eval_ids or dev.question_ids),
                    n_best_size=squad_config.n_best_size,
                    max_answer_length=squad_config.max_answer_length)
  to_evaluate = results is None or results.get("evaluation") != evaluation
  to_export = bool(export_dir) and (results is None or results.get("export_dir") != export_dir)
  if not to_evaluate and not to_export:
    return results

  start = time.time()
  train_features = squad_features.load_features(
      train, tokenizer, settings, training=True, cache_dir=feature_cache_dir).select(train_ids)
  steps_per_epoch = squad_features.num_training_batches(
      train_features, config.batch_size, config.max_seq_length,
      static_shapes=config.static_shapes)
  num_train_steps = max(1, round(config.epochs * steps_per_epoch))

  def train_data(shuffle_seed):
    return squad_features.training_dataset(
        train_features, batch_size=config.batch_size, seed=shuffle_seed,
        max_seq_length=config.max_seq_length, static_shapes=config.static_shapes)

  trainer = trainer_lib.Trainer(
      lambda: build_model(config), span_labeler.span_loss, train_data,
      num_train_steps=num_train_steps, learning_rate=config.learning_rate,
      model_dir=model_dir, warmup_fraction=config.warmup_fraction,
      weight_decay=config.weight_decay, strategy=strategy,
      checkpoint_every_steps=config.checkpoint_every_steps, seed=config.seed,
      log_every_steps=max(1, min(50, num_train_steps // 10)), progress_bar=progress_bar,
      jit_compile=config.jit_compile)
  if results is not None and trainer.finished_result() is None:
    raise ValueError(f"{model_dir} holds the results of a finished run but not its final "
                     "checkpoint, so it cannot answer again or export. Use a new model_dir.")
  train_result = trainer.train()
  model = trainer.model
  if model is None:  # Finished earlier: restore the final weights.
    with strategy.scope():
      model = build_model(config)
    tf.train.Checkpoint(model=model).restore(train_result.checkpoint_path).expect_partial()
  if results is None:
    summary = parameter_summary.parameter_summary(model)
    results = dict(
        task=TASK, config=dataclasses.asdict(config), squad=dataclasses.asdict(squad_config),
        train_source=train.source, train_file_sha256=train.sha256,
        train_questions=len(set(train_features.question_ids)),
        train_windows=len(train_features), num_train_steps=num_train_steps,
        resumed_from_step=train_result.start_step, train_seconds=train_result.wall_time_s,
        train_examples_per_second=train_result.examples_per_sec,
        tokenizer=dict(vocab_file=tokenizer.vocab_file,
                       do_lower_case=tokenizer.do_lower_case),
        parameters=dict(trainable=summary.trainable, total=summary.total, base=summary.base,
                        adapters=summary.adapters,
                        trainable_percent_of_base=100.0 * summary.trainable / summary.base))
  if to_evaluate:
    eval_features = squad_features.load_features(
        dev, tokenizer, settings, training=False, cache_dir=feature_cache_dir).select(eval_ids)
    results.update(_evaluate(model, tokenizer, dev, eval_ids, eval_features, config,
                             squad_config,
                             model_dir if is_chief else None),
                   squad=dataclasses.asdict(squad_config), evaluation=evaluation,
                   feature_build_seconds=dict(train=train_features.build_seconds,
                                              eval=eval_features.build_seconds))
  if to_export:
    export(model, tokenizer, config, squad_config, export_dir)
    results["export_dir"] = export_dir
  results["total_seconds"] = results.get("total_seconds", 0.0) + time.time() - start
  # One entry per session that trained, evaluated or exported: a run may span several.
  results[provenance.KEY] = results.get(provenance.KEY, []) + [provenance.record()]
  if is_chief:
    atomic_io.write_json(results_path, results)
  return results


def _evaluate(model, tokenizer, dev, eval_ids, eval_features, config, squad_config,
              output_dir) -> Dict[str, Any]:
  """Answers the evaluation questions and scores them; writes the official files to
  `output_dir` (unless `None`); returns what the results record of it."""
  logging.info("Answering %d evaluation questions (%d windows)...",
               len(set(eval_features.question_ids)), len(eval_features))
  start = time.time()
  start_logits, end_logits = squad_features.predict_logits(
      model, eval_features, EVAL_BATCH_SIZE, max_seq_length=(
          config.max_seq_length if config.static_shapes else None),
      jit_compile=config.jit_compile)
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


def export(model, tokenizer, config: classification.RunConfig, squad_config: SquadConfig,
           export_dir: str) -> None:
  """Writes `saved_model/` (raw strings in, answers out) and `adapters/` under `export_dir`."""
  logging.info("Exporting the QA SavedModel and the adapter-only artifact to %s...", export_dir)
  qa_export.export_qa(
      model, tokenizer, os.path.join(export_dir, "saved_model"),
      settings=squad_config.window_settings(config.max_seq_length),
      n_best_size=squad_config.n_best_size, max_answer_length=squad_config.max_answer_length)
  saving.save_adapters(
      model, os.path.join(export_dir, "adapters"),
      metadata=dict(task=TASK, head="span_labeler",
                    max_seq_length=config.max_seq_length, **{
                        name: getattr(squad_config, name) for name in (
                            "doc_stride", "max_query_length", "n_best_size",
                            "max_answer_length")}))


def _flatten(record: Mapping[str, Any]) -> Dict[str, Any]:
  """`{"a": {"b": 1}, "c": 2}` as `{"a.b": 1, "c": 2}`."""
  flat = {}
  for key, value in record.items():
    if isinstance(value, dict):
      flat.update({f"{key}.{name}": inner for name, inner in value.items()})
    else:
      flat[key] = value
  return flat


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

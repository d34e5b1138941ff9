"""A whole no-BERT AutoML run: search, retrain the best configuration, test it once, export.

`run_automl` searches the Table 5 space with keras-tuner on the train and validation splits
(resuming a search found in `model_dir`), retrains the configuration with the best validation
score on the training split, scores it once on the test split, exports it as a SavedModel
(strings in, probabilities out) and writes `results.json` with every trial and the choice.
`comparison_row` turns the results into a row of the method comparison table.
"""

import dataclasses
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import tf_keras as keras

from keras_adapters.baselines import classifier_export
from keras_adapters.baselines import deep_and_wide
from keras_adapters.baselines import embeddings as embeddings_lib
from keras_adapters.baselines import search_space as search_space_lib
from keras_adapters.baselines import tuner as tuner_lib
from keras_adapters.models import parameter_summary
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import metrics as metrics_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import provenance

METHOD = "no_bert"
SETTINGS_FILE = "search_settings.json"
RESULTS_FILE = "results.json"


@dataclasses.dataclass(frozen=True)
class SearchSettings:
  """What a search is; resuming it with other settings is refused (but for `max_trials`).

  Attributes:
    oracle: "random", "bayesian" or "hyperband".
    embeddings: The text embeddings to choose from (knob 1).
    max_trials: Most trials; raising it on a finished search continues it.
    max_epochs: The cap of knob 21 in passes over the training set.
    batch_size: Training batch size.
    seed: Seed of the oracle and the trials.
  """
  oracle: str = "random"
  embeddings: Sequence[str] = embeddings_lib.DEFAULT_EMBEDDINGS
  max_trials: int = 30
  max_epochs: float = search_space_lib.DEFAULT_MAX_EPOCHS
  batch_size: int = 32
  seed: int = 0

  def __post_init__(self):
    embeddings_lib.check_embeddings(self.embeddings)


def run_automl(spec: examples_lib.TaskSpec, splits: Mapping[str, examples_lib.TextExamples],
               settings: SearchSettings, model_dir: str,
               export_dir: Optional[str] = None) -> Dict[str, Any]:
  """Runs (or resumes) a search, then retrains, tests and exports its best configuration.

  A finished run is not repeated: when `results.json` already holds the outcome of the same
  trials, it is returned as it is. A search may be resumed with another `max_trials` (to run
  more trials); the results' `provenance` lists every session of the search, each with its
  `max_trials`, so no trial's setting is lost.

  Args:
    spec: A classification task with one text field.
    splits: "train", "validation" and "test" examples.
    settings: The search.
    model_dir: Folder of the search (keras-tuner's project), the results and the export.
    export_dir: Where to export the retrained model; default `<model_dir>/export`.

  Returns:
    The results written to `<model_dir>/results.json`.

  Raises:
    ValueError: A task this baseline cannot run, or settings that differ from those of the
      search already in `model_dir`.
    errors.RunFailedError: No trial completed.
  """
  _check_task(spec)
  sessions = _record_settings(model_dir, settings)
  search_space = search_space_lib.SearchSpace(settings.embeddings, settings.max_epochs)
  oracle = tuner_lib.make_oracle(
      settings.oracle, objective=tuner_lib.objective_name(spec),
      max_trials=settings.max_trials, max_epochs=settings.max_epochs, seed=settings.seed)
  tuner = tuner_lib.AutoMLTuner(oracle, search_space, spec, splits,
                                batch_size=settings.batch_size, seed=settings.seed,
                                directory=model_dir)
  tuner.search()
  trials = _trial_records(tuner)
  completed = tuner.oracle.get_best_trials(1)
  if not completed:
    raise errors.RunFailedError(
        f"No trial of the search in {model_dir} completed; the messages of the failed ones "
        f"are in its results: {trials[-1:]!r}")
  (best,) = completed
  results_path = os.path.join(model_dir, RESULTS_FILE)
  previous = atomic_io.read_json(results_path)
  if previous and previous["trials"] == trials:
    return previous
  config = search_space.build(best.hyperparameters)
  epochs = best.metrics.get_last_value("epochs")
  results = dict(
      task=spec.name, metric=spec.metrics[0], settings=dataclasses.asdict(settings),
      examples={split: len(examples) for split, examples in splits.items()},
      trials=trials, search_seconds=sum(t["seconds"] for t in trials),
      **{provenance.KEY: sessions},
      best=dict(trial_id=best.trial_id, validation=best.score, epochs=epochs,
                config=dataclasses.asdict(config)),
      final=_retrain_test_export(
          tuner, config, epochs, splits, settings.seed + int(best.trial_id),
          export_dir or os.path.join(model_dir, "export")))
  atomic_io.write_json(results_path, results)
  return results


def comparison_row(results: Mapping[str, Any]) -> Dict[str, Any]:
  """The run as a row of `method_comparison`'s table (test score in %, one run)."""
  metric, final, best = results["metric"], results["final"], results["best"]
  config = best["config"]
  score = 100.0 * final["test"][metric]
  trials = results["trials"]
  failed = sum(t["status"] != "COMPLETED" for t in trials)
  head = (f"{config['num_hidden_layers']} hidden layer(s)" +
          (f" on a {config['conv_max_ngram']}-gram convolution" if config["use_convolution"]
           else ""))
  note = (f"keras-tuner {results['settings']['oracle']} search, {len(trials)} trial(s)"
          f"{f' ({failed} failed)' if failed else ''} in "
          f"{results['search_seconds'] / 60:.1f} min over "
          f"{', '.join(results['settings']['embeddings'])}; best (validation "
          f"{100 * best['validation']:.2f}): {config['embedding']} "
          f"({'fine-tuned' if config['fine_tune_embedding'] else 'frozen'}), {head}, "
          f"{best['epochs']:g} epoch(s); retrained on {results['examples']['train']:,} training "
          "examples.")
  return dict(method=METHOD, seeds=[results["settings"]["seed"]], scores=[score], mean=score,
              sem=0.0, trainable_parameters=final["parameters"]["trainable"],
              # Serving the model takes its frozen embedding tables too.
              total_parameters=final["parameters"]["total"],
              trainable_percent_of_base=None, seconds_per_epoch=None,
              search_seconds=results["search_seconds"],
              train_examples=results["examples"]["train"], note=note)


def _retrain_test_export(tuner: tuner_lib.AutoMLTuner, config, epochs: float, splits,
                         seed: int, export_dir: str) -> Dict[str, Any]:
  """Trains `config` afresh on the training split, scores validation and test, exports."""
  keras.backend.clear_session()
  keras.utils.set_random_seed(seed)
  model = deep_and_wide.build_classifier(config, tuner.spec.num_classes)
  train = splits["train"]
  start = time.time()
  deep_and_wide.train(model, train.texts[0], train.labels,
                      steps=deep_and_wide.steps_for(epochs, len(train), tuner.batch_size),
                      batch_size=tuner.batch_size, seed=seed)
  train_seconds = time.time() - start
  scores = {}
  for split in ("validation", "test"):
    examples = splits[split]
    predictions = deep_and_wide.predict_classes(model, examples.texts[0], tuner.batch_size)
    scores[split] = metrics_lib.compute_metrics(tuner.spec, examples.labels, predictions)
  classifier_export.export_classifier(model, export_dir, tuner.spec.label_names)
  summary = parameter_summary.parameter_summary(model)
  return dict(**scores, train_seconds=train_seconds, export_dir=export_dir,
              parameters=dict(trainable=summary.trainable, total=summary.total))


def _trial_records(tuner: tuner_lib.AutoMLTuner):
  """Every trial: its id, status, knob values, score, epochs, seconds, failure message."""
  objective = tuner_lib.objective_name(tuner.spec)
  records = []
  for trial_id in sorted(tuner.oracle.trials):
    trial = tuner.oracle.trials[trial_id]
    scored = trial.metrics.exists(objective)
    records.append(dict(
        trial_id=trial_id, status=trial.status, values=dict(trial.hyperparameters.values),
        validation=trial.metrics.get_last_value(objective) if scored else None,
        epochs=trial.metrics.get_last_value("epochs") if scored else None,
        seconds=tuner.trial_seconds(trial_id),
        message=(trial.message or "").strip().splitlines()[-1:] or None))
  return records


def _check_task(spec: examples_lib.TaskSpec) -> None:
  if spec.is_regression or len(spec.text_fields) != 1:
    raise errors.UsageError(
        f"The no-BERT baseline classifies single texts; task {spec.name!r} has text fields "
        f"{list(spec.text_fields)} and labels {spec.label_names}.")


def _record_settings(model_dir: str, settings: SearchSettings) -> List[Dict[str, Any]]:
  """Writes the settings of a new search; checks those of a resumed one.

  Returns:
    Every session of the search so far, this one last: its provenance and `max_trials`, the
    one setting a resumed search may change.
  """
  path = os.path.join(model_dir, SETTINGS_FILE)
  current = dataclasses.asdict(settings)
  current["embeddings"] = list(current["embeddings"])
  recorded = atomic_io.read_json(path)
  if recorded is not None:
    changed = sorted(k for k in current if k != "max_trials" and recorded.get(k) != current[k])
    if changed:
      was = ", ".join(f"{k}={recorded.get(k)!r}" for k in changed)
      now = ", ".join(f"{k}={current[k]!r}" for k in changed)
      raise errors.UsageError(
          f"The search in {model_dir} was made with {was}, not {now}. Resume it with its "
          "settings, or pass another model_dir= for a new search.")
  sessions = (recorded or {}).get("sessions")
  if recorded is not None and sessions is None:
    # A search begun before sessions were recorded: its setting is known, its command is not.
    sessions = [dict(max_trials=recorded["max_trials"], command=None,
                     reason="made before the sessions of a search were recorded")]
  sessions = (sessions or []) + [
      dict(provenance.record(), max_trials=settings.max_trials)]
  atomic_io.write_json(path, dict(current, sessions=sessions))
  return sessions

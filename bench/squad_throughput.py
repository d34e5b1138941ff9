"""SQuAD v1.1 at 384 tokens: training and evaluation throughput, and building the windows.

On the real SQuAD v1.1 files (the built-in ones, or `--train_file`/`--predict_file`), each in
its own child process:

* `features`: builds the windows of the whole training and dev files as `run_squad.py` does
  (the Model Garden's `squad_lib` with the base model's preprocessing tokenizer) into an empty
  temporary cache, then reads them back; reports the seconds of each, and the questions and
  windows;
* `adapters` (m=64) and `full`: the span labeler (`AdaptedBert` + span head) of each tuning
  policy on real training windows padded to `--seq_length` (384, BERT's SQuAD length): the
  median training step (the `Trainer`'s step on one device: forward, span loss, gradients of
  the trainable variables only, AdamW update) over batches of `--batch_size`, as training
  windows per second; and the median forward pass (inference mode) over batches of
  `--eval_batch_size` dev windows, as evaluation windows per second;

then adapters' speed relative to full fine-tuning. `run_squad.py` itself batches windows of
similar length and pads each batch to its longest (mean real length about 172 tokens), so it
runs faster than these fixed-length figures. Full benchmark, on an otherwise idle machine:

  python bench/squad_throughput.py

Results go to bench/results/squad_throughput.json and Markdown tables on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import shutil
import tempfile
import time

from absl import flags
import tensorflow as tf
import tf_keras as keras

import harness
from keras_adapters.models import span_labeler
from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.tasks import question_answering
from keras_adapters.data import squad_tokenizer
from keras_adapters.training import optimization

_TUNINGS = ("adapters", "full")
_SPLITS = ("train", "dev")

harness.define_batch_benchmark_flags(
    steps=5, steps_help="Timed training steps and forward passes per tuning policy.",
    output_name="squad_throughput.json",
    child_help="measure `features` or one tuning policy (`adapters`, `full`), and print its "
    "JSON.")
flags.FLAGS.set_default("seq_length", 384)
harness.define_child_processes_flag()
flags.DEFINE_integer("eval_batch_size", question_answering.EVAL_BATCH_SIZE,
                     "Windows per forward pass, as run_squad.py evaluates.", lower_bound=1)
flags.DEFINE_integer("doc_stride", 128, "Tokens between consecutive windows over a context.",
                     lower_bound=1)
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept.", lower_bound=1)
flags.DEFINE_string("preprocess_handle", None,
                    "The encoder's preprocessing SavedModel; default: the embedded one.")
flags.DEFINE_string("train_file", None, "SQuAD v1.1 training JSON; default: the built-in one.")
flags.DEFINE_string("predict_file", None, "SQuAD v1.1 dev JSON; default: the built-in one.")
flags.DEFINE_string("feature_cache_dir", None,
                    "Internal: the temporary cache the `features` child builds.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "eval_batch_size",
                    "doc_stride", "max_query_length", "hub_handle", "preprocess_handle",
                    "train_file", "predict_file", "feature_cache_dir")


def _load(split, tokenizer):
  """The checked file and windows of `split` from the cache (building them if missing)."""
  data = squad.read_squad_file(FLAGS.train_file if split == "train" else FLAGS.predict_file,
                               training=split == "train")
  settings = squad_features.WindowSettings(max_seq_length=FLAGS.seq_length,
                                           doc_stride=FLAGS.doc_stride,
                                           max_query_length=FLAGS.max_query_length)
  return data, squad_features.load_features(data, tokenizer, settings,
                                            training=split == "train",
                                            cache_dir=FLAGS.feature_cache_dir)


def _measure_features():
  """Builds the windows of both files into the empty cache, then reads them back."""
  tokenizer = squad_tokenizer.PreprocessingTokenizer(FLAGS.preprocess_handle)
  record = {}
  for split in _SPLITS:
    data, features = _load(split, tokenizer)
    start = time.perf_counter()
    _load(split, tokenizer)
    record[split] = dict(questions=len(data), windows=len(features),
                         build_seconds=features.build_seconds,
                         cached_load_seconds=time.perf_counter() - start)
  return record


def _padded_batches(features, batch_size, count):
  """`count` batches of `(inputs, labels)` windows padded to --seq_length, shuffled (as for
  training), materialized before any timing."""
  dataset = squad_features.training_dataset(features, batch_size=batch_size, seed=0,
                                            max_seq_length=FLAGS.seq_length,
                                            static_shapes=True).repeat()
  return list(dataset.take(count))


def _make_train_step(model, num_train_steps):
  """`harness.make_train_step` with the span loss: the `Trainer`'s step on one device."""
  variables = model.trainable_variables
  optimizer = optimization.create_optimizer(learning_rate=1e-4, num_train_steps=num_train_steps)

  @tf.function(input_signature=(harness.INPUTS_SPEC, tf.TensorSpec([None, 2], tf.int32)),
               autograph=False)
  def step(inputs, labels):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(variables)
      loss = tf.reduce_mean(span_labeler.span_loss(labels, model(inputs, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  return step


def _measure_tuning(tuning):
  """Training and evaluation throughput of one tuning policy's span labeler."""
  tokenizer = squad_tokenizer.PreprocessingTokenizer(FLAGS.preprocess_handle)
  calls = FLAGS.warmup_steps + FLAGS.steps
  train_batches = _padded_batches(_load("train", tokenizer)[1], FLAGS.batch_size, calls)
  eval_batches = _padded_batches(_load("dev", tokenizer)[1], FLAGS.eval_batch_size, calls)
  model = _build_model(tuning)
  step = _make_train_step(model, calls)
  forward = harness.make_forward(model)
  train_iter, eval_iter = iter(train_batches), iter(eval_batches)
  train = harness.summarize_ms(harness.time_calls(
      lambda: step(*next(train_iter)).numpy(), steps=FLAGS.steps,
      warmup_steps=FLAGS.warmup_steps))
  evaluation = harness.summarize_ms(harness.time_calls(
      lambda: forward(next(eval_iter)[0])["start_logits"].numpy(), steps=FLAGS.steps,
      warmup_steps=FLAGS.warmup_steps))
  return dict(
      **harness.setup_settings(tuning), **harness.parameter_counts(model),
      train_examples_per_s=FLAGS.batch_size / (train["median_ms"] / 1e3),
      eval_examples_per_s=FLAGS.eval_batch_size / (evaluation["median_ms"] / 1e3),
      train_step=train, eval_forward=evaluation, peak_rss_mib=harness.peak_rss_mib())


def _build_model(tuning):
  """The span labeler of one of `harness.SETUPS`, seeded as `harness.build_model` is."""
  keras.utils.set_random_seed(0)
  return span_labeler.build_span_labeler(
      keras_adapters.AdaptedBert(FLAGS.hub_handle, **harness.SETUPS[tuning]))


def _tables(record):
  features = harness.markdown_table(
      ["File", "Questions", "Windows", "Build s", "Read from cache s"],
      [[split, entry["questions"], entry["windows"], entry["build_seconds"],
        entry["cached_load_seconds"]] for split, entry in record["features"].items()])
  length = record["settings"]["seq_length"]
  runs = harness.markdown_table(
      ["Tuning", "Trainable params", f"Train windows/s ({length} tokens)",
       "Median train step ms", f"Eval windows/s ({length} tokens)", "Median forward ms",
       "Peak RSS MiB"],
      [[tuning, run["trainable_params"], run["train_examples_per_s"],
        run["train_step"]["median_ms"], run["eval_examples_per_s"],
        run["eval_forward"]["median_ms"], run["peak_rss_mib"]]
       for tuning, run in record["runs"].items()])
  ratios = harness.markdown_table(
      ["Adapters / full", "Ratio"],
      [[name, value] for name, value in record["adapters_over_full"].items()])
  return "\n\n".join([features, runs, ratios])


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    harness.report_to_parent(_measure_features() if FLAGS.child == "features"
                             else _measure_tuning(FLAGS.child))
    return
  # Resolved once here, so that every child measures the same models and files.
  harness.resolve_hub_handle()
  harness.resolve_preprocess_handle()
  FLAGS.train_file = FLAGS.train_file or squad.builtin_squad_file("train")
  FLAGS.predict_file = FLAGS.predict_file or squad.builtin_squad_file("dev")
  FLAGS.feature_cache_dir = tempfile.mkdtemp(prefix="squad_throughput_")
  try:
    forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}

    script = os.path.abspath(__file__)
    print("Measuring features...", flush=True)
    features = harness.run_timing_child(script, "features", forwarded, _measure_features)
    runs = {}
    for tuning in _TUNINGS:  # Each with its peak memory: a fresh process each.
      print(f"Measuring {tuning}...", flush=True)
      runs[tuning] = harness.run_child(script, tuning, forwarded)
  finally:
    shutil.rmtree(FLAGS.feature_cache_dir, ignore_errors=True)
  settings = {name: value for name, value in forwarded.items() if name != "feature_cache_dir"}
  record = dict(
      benchmark="squad_throughput", machine=harness.machine_info(),
      settings=dict(settings, adapter_size=harness.ADAPTER_SIZE),
      features=features, runs=runs,
      adapters_over_full={
          kind: runs["adapters"][f"{kind}_examples_per_s"] / runs["full"][f"{kind}_examples_per_s"]
          for kind in ("train", "eval")})
  harness.write_record(FLAGS.output, record)
  print(_tables(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

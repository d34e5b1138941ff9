"""Training throughput on the airline task: adapters vs full fine-tuning, per-batch padding.

On a seeded subset of the training split of the real airline sentiment task, the same
shuffled batches go through four setups, each in its own child process:
{adapters (m=64), full fine-tuning} x {per-batch padding, fixed padding to --max_seq_length}.
For each: training examples per second, the mean padded batch length, and the share of the
step time spent blocked on the (prefetching) input pipeline; then the speed-up of per-batch
padding for each tuning. Full benchmark, on an otherwise idle machine:

  python bench/training_throughput.py

Results go to bench/results/training_throughput.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import statistics
import time

from absl import flags
import numpy as np
import tensorflow_hub as hub
import tensorflow_text  # pylint: disable=unused-import  (registers the preprocessing model's ops)

import harness
from keras_adapters.data import builtin_datasets
from keras_adapters.data import features
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification

_TASK = "airline"
_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The split the experiments train on, so that the subset is drawn from the same examples.
_SPLIT_MANIFEST = os.path.join(_REPO_DIR, "keras_adapters", "cli", "splits", f"{_TASK}.json")
_TUNINGS = ("adapters", "full")
_PADDINGS = ("dynamic", "fixed")

flags.DEFINE_integer("num_examples", 640,
                     "Training examples (a seeded subset of the training split); one pass "
                     "over them in full batches is timed.", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Examples per batch.", lower_bound=1)
flags.DEFINE_integer("max_seq_length", 128, "Longest packed sequence; fixed padding pads to it.",
                     lower_bound=3)
flags.DEFINE_integer("warmup_steps", 2, "Untimed steps first (tracing, allocation).",
                     lower_bound=0)
flags.DEFINE_string("hub_handle", None,
                    "TF Hub BERT encoder; default: the embedded all-MiniLM-L6-v2.")
flags.DEFINE_string("preprocess_handle", None,
                    "Its matching preprocessing SavedModel; default: the embedded one.")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "training_throughput.json"),
                    "Where to write the results (JSON).")
flags.DEFINE_string("child", None,
                    "Internal: measure one setup, `<adapters|full>:<dynamic|fixed>`, and print "
                    "its JSON.")

flags.register_multi_flags_validator(
    ["num_examples", "batch_size"], lambda f: f["batch_size"] <= f["num_examples"],
    "--batch_size is larger than --num_examples: there is no full batch to time.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("num_examples", "batch_size", "max_seq_length", "warmup_steps",
                    "hub_handle", "preprocess_handle")


def _split_source():
  """Where the training split comes from: the experiments' manifest if there is one."""
  if os.path.exists(_SPLIT_MANIFEST):
    return os.path.relpath(_SPLIT_MANIFEST, _REPO_DIR)
  return "stratified_split(seed=0)"


def _training_subset():
  """The task and a seeded subset of `--num_examples` of its training examples."""
  spec, examples = builtin_datasets.load_builtin_task(_TASK)
  # split_with_manifest writes a manifest where none exists; the benchmark writes only its
  # results, so without one it makes the same split in memory.
  if os.path.exists(_SPLIT_MANIFEST):
    train = splits_lib.split_with_manifest(_SPLIT_MANIFEST, spec, examples)[0]
  else:
    train = splits_lib.stratified_split(spec, examples)[0]
  keep = np.sort(np.random.default_rng(0).permutation(len(train))[:FLAGS.num_examples])
  return spec, text_classification.select_examples(train, keep)


def _measure(tuning, padding):
  """Trains one setup over the subset in this process; returns its throughput figures."""
  spec, train = _training_subset()
  # The same seed in every child: all four setups see the same batches in the same order.
  dataset = features.make_dataset(
      train, hub.load(FLAGS.preprocess_handle), max_seq_length=FLAGS.max_seq_length,
      batch_size=FLAGS.batch_size, shuffle=True, seed=0, repeat=True,
      dynamic_padding=padding == "dynamic", drop_remainder=True)
  model = harness.build_model(FLAGS.hub_handle, tuning, spec.num_classes,
                              seq_length=FLAGS.max_seq_length)
  steps = len(train) // FLAGS.batch_size
  step = harness.make_train_step(model, FLAGS.warmup_steps + steps)
  batches = iter(dataset)
  waits, lengths = [], []

  def train_on_next_batch():
    start = time.perf_counter()
    inputs, labels = next(batches)
    waits.append(time.perf_counter() - start)
    lengths.append(int(inputs["input_word_ids"].shape[1]))
    step(inputs, labels).numpy()

  seconds = harness.time_calls(train_on_next_batch, steps=steps,
                               warmup_steps=FLAGS.warmup_steps)
  timed_waits, timed_lengths = waits[FLAGS.warmup_steps:], lengths[FLAGS.warmup_steps:]
  return dict(
      padding=padding, **harness.SETUPS[tuning],
      **harness.parameter_counts(model), examples=len(train), timed_steps=steps,
      examples_per_s=steps * FLAGS.batch_size / sum(seconds),
      mean_padded_length=statistics.fmean(timed_lengths),
      input_wait_share=sum(timed_waits) / sum(seconds),
      **harness.summarize_ms(seconds), peak_rss_mib=harness.peak_rss_mib())


def _table(record):
  """The runs and the padding speed-ups of `record` as two Markdown tables."""
  max_length = record["settings"]["max_seq_length"]
  runs = harness.markdown_table(
      ["Tuning", "Padding", "Examples/s", "Median step ms",
       f"Mean padded length (of {max_length})", "Input wait %", "Peak RSS MiB"],
      [[run["tuning"], run["padding"], run["examples_per_s"], run["median_ms"],
        run["mean_padded_length"], 100 * run["input_wait_share"], run["peak_rss_mib"]]
       for run in record["runs"].values()])
  speedups = harness.markdown_table(
      ["Tuning", "Speed-up of per-batch padding"],
      [[tuning, speedup] for tuning, speedup in record["dynamic_padding_speedup"].items()])
  return runs + "\n\n" + speedups


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    tuning, padding = FLAGS.child.split(":")
    harness.report_to_parent(_measure(tuning, padding))
    return
  # Resolved once here, so that every child measures the same models.
  harness.resolve_hub_handle()
  harness.resolve_preprocess_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}

  def measure(tuning, padding):
    print(f"Measuring {tuning}, {padding} padding...", flush=True)
    return harness.run_child(os.path.abspath(__file__), f"{tuning}:{padding}", forwarded)

  runs = {f"{tuning}/{padding}": measure(tuning, padding)
          for tuning in _TUNINGS for padding in _PADDINGS}
  record = dict(
      benchmark="training_throughput",
      machine=harness.machine_info(),
      settings=dict(forwarded, task=_TASK, split=_split_source(),
                    adapter_size=harness.ADAPTER_SIZE),
      runs=runs,
      dynamic_padding_speedup={
          tuning: runs[f"{tuning}/dynamic"]["examples_per_s"]
                  / runs[f"{tuning}/fixed"]["examples_per_s"] for tuning in _TUNINGS},
      # The adapter runs are the ones whose light steps an input pipeline could starve.
      adapters_input_wait_share={
          padding: runs[f"adapters/{padding}"]["input_wait_share"] for padding in _PADDINGS})
  harness.write_record(FLAGS.output, record)
  print(_table(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

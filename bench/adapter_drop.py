"""What AdapterDrop buys in training: the adapter step with the lowest layers' adapters left out.

Rücklé et al. (2021) report training up to 60% faster with no adapters in the lowest layers,
since the backward pass then stops early. Here the paper's adapters (m=64, two per layer, as
`harness.SETUPS["adapters"]`) leave out the lowest `--lowest_left_out` layers (of the
default base's 6; scaled to a deeper base: 0, 2, 4, 6, 8 of BERT-base's 12), in two ways:

* `layer_norms_trained`: `AdapterConfig(leave_out=...)` as the library trains it, the paper's
  policy (every LayerNorm trains, the embeddings' included), so the backward pass still runs
  to the bottom and only the left-out adapters' own work is saved;
* `layer_norms_frozen`: the same with `freeze_below_adapters=True`, the LayerNorms of the
  left-out layers and of the embeddings frozen as well (AdapterDrop's setting, where nothing
  below the lowest adapter trains), so the backward pass stops at the lowest adapted layer.

Training step as the library's Trainer takes it (`harness.make_train_step`) on one batch of
random token ids. Each base runs in its own child process, every setting of it built there and
timed in turns; ratios are against the same base with no layer left out. BERT-base's shape is a
genuine TF Hub export with random weights (`random_bert.py`), written once into `--work_dir`.
On an otherwise idle machine:

  python bench/adapter_drop.py      # bench/results/adapter_drop.json

What it costs in accuracy is trained, not timed: `run_classification --leave_out=...`.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags

import harness
import random_bert
from keras_adapters.hub import hub_encoder
from keras_adapters.models import adapter_config

_NUM_CLASSES = 2
_DEFAULT_DEPTH = 6  # Layers of the embedded default base, which --lowest_left_out counts in.
_LAYER_NORM_POLICIES = ("layer_norms_trained", "layer_norms_frozen")

harness.define_batch_benchmark_flags(
    steps=5, steps_help="Timed steps of each setting, taken in turns.",
    output_name="adapter_drop.json", child_help="time every setting of one base and print its "
    "JSON.")
harness.define_child_processes_flag()
flags.DEFINE_list("bases", ["default", "base"], f"Bases to measure, of {list(random_bert.BASES)} "
                  "(default: --hub_handle; the others: BERT's shapes, random weights).")
flags.DEFINE_list("lowest_left_out", ["0", "1", "2", "3", "4"],
                  f"How many of the lowest layers get no adapters, counted in the default base's "
                  f"{_DEFAULT_DEPTH} layers (scaled to a deeper base).")
flags.DEFINE_string("work_dir", random_bert.WORK_DIR,
                    "Cache of the random BERT-base export (shared with bench/scale.py).")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "lowest_left_out")


def _step(left_out, policy):
  """The timed call of one setting (a training step on a random batch) and its model."""
  config = adapter_config.AdapterConfig(
      adapter_size=harness.ADAPTER_SIZE, leave_out=tuple(range(left_out)),
      freeze_below_adapters=policy == "layer_norms_frozen")
  model = harness.build_model(FLAGS.hub_handle, "adapters", _NUM_CLASSES,
                              seq_length=FLAGS.seq_length, adapter_config=config)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
  return (lambda: step(inputs, labels).numpy()), model


def _measure():
  """Every setting of `--hub_handle`, built in this process and timed in turns."""
  num_layers = hub_encoder.read_hub_encoder(FLAGS.hub_handle).config["num_layers"]
  calls, rows = {}, {}
  for count in (int(n) for n in FLAGS.lowest_left_out):
    left_out = count * num_layers // _DEFAULT_DEPTH
    for policy in _LAYER_NORM_POLICIES[:1] if left_out == 0 else _LAYER_NORM_POLICIES:
      calls[(left_out, policy)], model = _step(left_out, policy)
      rows[(left_out, policy)] = dict(left_out=left_out, num_layers=num_layers,
                                      layer_norms=policy.split("_")[-1],
                                      **harness.parameter_counts(model))
  seconds = harness.time_interleaved(calls, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  return [dict(row, **harness.summarize_ms(seconds[key])) for key, row in rows.items()]


def _with_ratios(rows):
  baseline = next(row["median_ms"] for row in rows if row["left_out"] == 0)
  return [dict(row, step_over_none_left_out=round(row["median_ms"] / baseline, 3))
          for row in rows]


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  unknown = sorted(set(FLAGS.bases) - set(random_bert.BASES))
  if unknown:
    raise app.UsageError(f"Unknown --bases {unknown}: choose from {list(random_bert.BASES)}.")
  if "0" not in FLAGS.lowest_left_out or not all(
      n.isdigit() and int(n) < _DEFAULT_DEPTH for n in FLAGS.lowest_left_out):
    raise app.UsageError(f"--lowest_left_out takes counts 0 to {_DEFAULT_DEPTH - 1}, 0 "
                         f"included (the baseline of the ratios), not {FLAGS.lowest_left_out}.")
  if FLAGS.child:
    harness.report_to_parent(dict(rows=_measure()))
    return
  harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  forwarded["lowest_left_out"] = ",".join(FLAGS.lowest_left_out)
  measurements = []
  for base in FLAGS.bases:
    handle = random_bert.handle(base, FLAGS.hub_handle, FLAGS.work_dir)
    print(f"Timing {base}: every setting in turns...", flush=True)
    rows = harness.run_timing_child(os.path.abspath(__file__), "times",
                                    dict(forwarded, hub_handle=handle),
                                    lambda: dict(rows=_measure()))["rows"]
    measurements += [dict(row, base=base) for row in _with_ratios(rows)]
  record = dict(benchmark="adapter_drop", machine=harness.machine_info(),
                settings=dict(forwarded, bases=FLAGS.bases, adapter_size=harness.ADAPTER_SIZE,
                              num_classes=_NUM_CLASSES),
                measurements=measurements)
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["Base", "Layers left out", "LayerNorms below", "Trainable params", "Median ms",
       "Step / none left out"],
      [[row["base"], f"{row['left_out']} of {row['num_layers']}", row["layer_norms"],
        row["trainable_params"], row["median_ms"], row["step_over_none_left_out"]]
       for row in measurements]))


if __name__ == "__main__":
  cli.run(main)

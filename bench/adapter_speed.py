"""Training-step time, peak memory and inference overhead of adapters on a BERT encoder.

On one batch of random token ids (full mask), in one invocation:

* the median time of a training step (forward, cross-entropy on a 3-class head, gradients of
  the trainable variables only, Adam update) and the peak resident memory, for every method
  the suite compares: adapters (m=64), LoRA (r=8), (IA)³, top-k (the top 3 layers),
  LayerNorm-only tuning and full fine-tuning;
* the median inference latency of the encoder without and with adapters (m=64);
* adapter step / full step and the adapters' inference overhead, against their targets.

Peak memory is measured with each setup alone in its own child process. Times are measured
with every setup of a kind built in one child process and called in turns, so that the ratios
do not absorb drift in the machine's speed between setups. Full benchmark, on an otherwise
idle machine:

  python bench/adapter_speed.py

Results go to bench/results/adapter_speed.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags

import harness

_NUM_CLASSES = 3
# Targets of the issue "Benchmark bench/". A full step costs about 3 forward passes (forward,
# activation gradients, weight gradients); with the base frozen its weight gradients are never
# computed, so an adapter step costs about 2: a FLOP bound of about 0.67. Two adapters of size
# m add 4*d*m multiply-adds per token and block to the base's 12*d*d in its dense layers: about
# 5.5% at m=64, d=384 (all-MiniLM-L6-v2).
_MAX_ADAPTER_STEP_RATIO = 0.70
_MAX_ADAPTER_INFERENCE_OVERHEAD = 0.08
# The setups of `harness.SETUPS` measured, in run order; inference compares the encoder
# without adapters ("full") with the one with them.
_TRAIN_SETUPS = ("adapters", "lora", "ia3", "top_k", "layer_norm", "full")
_INFERENCE_SETUPS = {"without_adapters": "full", "with_adapters": "adapters"}
_SETUPS = {"train": _TRAIN_SETUPS, "inference": tuple(_INFERENCE_SETUPS.values())}

harness.define_batch_benchmark_flags(
    steps=10, steps_help="Timed steps (or forward passes) per setup, taken in turns with the "
    "other setups.", output_name="adapter_speed.json",
    child_help="measure `memory:<train|inference>:<setup>` (one setup alone) or "
    "`times:<train|inference>` (every setup, in turns), and print its JSON.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")


def _make_runner(mode, setup):
  """One setup's model and the call to time: a training step, or a forward pass."""
  model = harness.build_model(FLAGS.hub_handle, setup, _NUM_CLASSES,
                              seq_length=FLAGS.seq_length)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  if mode == "train":
    step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
    return model, lambda: step(inputs, labels).numpy()
  forward = harness.make_forward(model)
  return model, lambda: forward(inputs).numpy()


def _measure_memory(mode, setup):
  """Peak memory of one setup alone in this process, after its warm-up calls and one more."""
  model, run = _make_runner(mode, setup)
  harness.time_calls(run, steps=1, warmup_steps=FLAGS.warmup_steps)
  return dict(setup=setup, **harness.setup_settings(setup),
              **harness.parameter_counts(model),
              peak_rss_mib=harness.peak_rss_mib())


def _measure_times(mode, setups):
  """Per-call times of `setups`, all built in this process and timed in turns."""
  runs = {setup: _make_runner(mode, setup)[1] for setup in setups}
  seconds = harness.time_interleaved(runs, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  return {setup: harness.summarize_ms(times) for setup, times in seconds.items()}


def _table(record):
  """The figures and the ratio checks of `record` as two Markdown tables."""
  measurements = [(f"train step, {setup}", result) for setup, result in record["train"].items()]
  measurements += [(f"inference, {name.replace('_', ' ')}", result)
                   for name, result in record["inference"].items()]
  figures = harness.markdown_table(
      ["Measurement", "Trainable params", "Total params", "Median ms", "Min ms",
       "Peak RSS MiB"],
      [[name, result["trainable_params"], result["total_params"], result["median_ms"],
        result["min_ms"], result["peak_rss_mib"]] for name, result in measurements])
  checks = harness.markdown_table(
      ["Ratio", "Value", "Target", "Met"],
      [[name.replace("_", " "), check["value"], f"<= {check['target']}", check["met"]]
       for name, check in record["ratios"].items()])
  return figures + "\n\n" + checks


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    kind, mode, *setup = FLAGS.child.split(":")
    harness.report_to_parent(_measure_memory(mode, *setup) if kind == "memory"
                             else _measure_times(mode, _SETUPS[mode]))
    return
  # Resolved once here, so that every child measures the same encoder.
  harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}

  def measure(mode):
    """Each setup's memory alone in a child, then every setup's times in turns in one."""
    results = {}
    for setup in _SETUPS[mode]:
      print(f"Measuring {mode} memory, {setup}...", flush=True)
      results[setup] = harness.run_child(
          os.path.abspath(__file__), f"memory:{mode}:{setup}", forwarded)
    print(f"Timing {mode}: {', '.join(_SETUPS[mode])} in turns...", flush=True)
    times = harness.run_child(os.path.abspath(__file__), f"times:{mode}", forwarded)
    return {setup: dict(result, **times[setup]) for setup, result in results.items()}

  train = measure("train")
  inference_by_setup = measure("inference")
  inference = {name: inference_by_setup[setup] for name, setup in _INFERENCE_SETUPS.items()}
  record = dict(
      benchmark="adapter_speed",
      machine=harness.machine_info(),
      settings=dict(forwarded, adapter_size=harness.ADAPTER_SIZE, num_classes=_NUM_CLASSES),
      train=train,
      inference=inference,
      ratios=dict(
          adapter_step_over_full_step=harness.against_target(
              train["adapters"]["median_ms"] / train["full"]["median_ms"],
              _MAX_ADAPTER_STEP_RATIO),
          adapter_inference_overhead=harness.against_target(
              inference["with_adapters"]["median_ms"]
              / inference["without_adapters"]["median_ms"] - 1,
              _MAX_ADAPTER_INFERENCE_OVERHEAD)))
  harness.write_record(FLAGS.output, record)
  print(_table(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

"""The Trainer's training step under the accelerator settings, timed on this CPU.

What a TPU or GPU run changes in the step, measured here in turns on one batch of random
tokens (adapters m=64 and a 3-class head on the embedded all-MiniLM-L6-v2 unless
`--hub_handle` names another encoder):

* `float32`: the step as it runs on CPUs by default;
* `bfloat16`: under Keras' `mixed_bfloat16` policy (`--mixed_precision=bfloat16`, the default
  on TPUs);
* `float32_xla`, `bfloat16_xla`: the same with the forward and backward pass compiled by XLA
  (`--jit_compile`, implied on TPUs).

Each setup is the step `Trainer.train()` takes (`Trainer.step_function`), built in one process
and timed in turns, so the ratios do not absorb drift in the machine's speed. These figures
do not predict accelerator ones: bfloat16 and float16 are made for a TPU's matrix units and a
GPU's tensor cores, which a CPU does not have (on a CPU, bfloat16 pays only where oneDNN has
bfloat16 kernels for the CPU's instructions, such as AVX512_BF16), and XLA's TPU and GPU
backends compile differently from its CPU one. They show that the settings run, and what they
cost on this machine.

  python bench/accelerator_proxies.py

Results go to bench/results/accelerator_proxies.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile

from absl import flags
import tf_keras as keras

import harness
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import precision

_NUM_CLASSES = 3
# Setup name → (the `--mixed_precision` value, `--jit_compile`).
SETUPS = {
    "float32": ("float32", False),
    "bfloat16": ("bfloat16", False),
    "float32_xla": ("float32", True),
    "bfloat16_xla": ("bfloat16", True),
}
_BASELINE = "float32"

harness.define_batch_benchmark_flags(
    steps=10, steps_help="Timed training steps per setup, taken in turns with the other "
    "setups.", output_name="accelerator_proxies.json",
    child_help="time every setup in turns and print the JSON.")
harness.define_child_processes_flag()

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")


def _make_step(setup, model_dir):
  """The Trainer's step of one setup on the benchmark batch, as a call to time."""
  mixed_precision, jit_compile = SETUPS[setup]
  loss = keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=keras.losses.Reduction.NONE)
  with precision.policy_scope(mixed_precision):
    trainer = trainer_lib.Trainer(
        lambda: harness.build_model(FLAGS.hub_handle, "adapters", _NUM_CLASSES,
                                    seq_length=FLAGS.seq_length), loss,
        train_data=lambda seed: None,  # Never read: step_function is given its batches.
        num_train_steps=FLAGS.warmup_steps + FLAGS.steps,
        learning_rate=1e-4, model_dir=model_dir, jit_compile=jit_compile)
    step = trainer.step_function()
  batch = harness.random_batch(trainer.model, FLAGS.batch_size, FLAGS.seq_length,
                               _NUM_CLASSES)
  return lambda: step(batch).numpy()


def _measure_times():
  """Per-step times of every setup, all built in this process and timed in turns."""
  with tempfile.TemporaryDirectory() as model_dir:  # Named but never written.
    steps = {setup: _make_step(setup, model_dir) for setup in SETUPS}
    seconds = harness.time_interleaved(steps, rounds=FLAGS.steps,
                                       warmup_steps=FLAGS.warmup_steps)
  return {setup: harness.summarize_ms(times) for setup, times in seconds.items()}


def _table(record):
  """The step times and their ratios to the float32 step, as a Markdown table."""
  return harness.markdown_table(
      ["Setup", "--mixed_precision", "--jit_compile", "Median ms", "Min ms",
       f"Median / {_BASELINE}"],
      [[setup, *SETUPS[setup], record["train_step"][setup]["median_ms"],
        record["train_step"][setup]["min_ms"], record["ratios"][setup]] for setup in SETUPS])


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  # Before anything is timed: a precision that a cap on the CPU kernels would crash.
  for mixed_precision, _ in SETUPS.values():
    cpu_kernels.check_sixteen_bit(mixed_precision)
  if FLAGS.child:
    harness.report_to_parent(_measure_times())
    return
  # Resolved once here, so that the child measures the encoder the record names.
  harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  print(f"Timing training steps: {', '.join(SETUPS)} in turns...", flush=True)
  # A child of its own, as the other benchmarks: this process has loaded the default model.
  times = harness.run_timing_child(os.path.abspath(__file__), "times", forwarded,
                                   _measure_times)
  baseline = times[_BASELINE]["median_ms"]
  record = dict(
      benchmark="accelerator_proxies",
      machine=harness.machine_info(),
      settings=dict(forwarded, adapter_size=harness.ADAPTER_SIZE, num_classes=_NUM_CLASSES,
                    setups={name: dict(mixed_precision=value[0], jit_compile=value[1])
                            for name, value in SETUPS.items()}),
      train_step=times,
      ratios={setup: result["median_ms"] / baseline for setup, result in times.items()})
  harness.write_record(FLAGS.output, record)
  print(_table(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

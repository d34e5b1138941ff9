"""How long reading a base takes: proving it, and reading what an earlier read proved.

Proving a base restores its SavedModel, runs it, and runs the encoder rebuilt from its weights
beside it (`keras_adapters.hub.hub_encoder`); a read of files proven before takes the
variables from the checkpoint and restores nothing (`keras_adapters.hub.proofs`). Timed in
turns in one process, each read after forgetting the reads the process keeps: `proven` with
an empty folder of proofs, as on a machine that never read the base; `remembered` with the
record the first read kept, as in every later run.

  python bench/base_read.py

Results go to bench/results/base_read.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile
from unittest import mock

from absl import flags

import harness
from keras_adapters.hub import hub_encoder
from keras_adapters.hub import proofs
from keras_adapters.hub import testing

flags.DEFINE_string("hub_handle", None, "The base to read; by default the embedded one.")
flags.DEFINE_integer("rounds", 5, "Timed reads of each kind.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "results", "base_read.json"),
                    "Where to write the JSON.")
FLAGS = flags.FLAGS


def _read(handle):
  hub_encoder.clear_cache()
  return hub_encoder.read_hub_encoder(handle)


def measure(handle, rounds):
  """The record: each kind's read times, the ratio of their medians, and whether both kinds
  read the same base."""
  with tempfile.TemporaryDirectory() as kept, mock.patch.dict(os.environ,
                                                              {proofs.SETTING: kept}):
    first = _read(handle)  # Keeps the record the `remembered` reads find.

    def proven():
      with testing.unproven():
        return _read(handle)

    reads = dict(proven=proven, remembered=lambda: _read(handle))
    same = all((read.config, read.fingerprint, read.parity) ==
               (first.config, first.fingerprint, first.parity) for read in
               (fn() for fn in reads.values()))
    seconds = harness.time_interleaved(reads, rounds=rounds, warmup_steps=0)
  timings = {kind: harness.summarize_ms(times) for kind, times in seconds.items()}
  return dict(
      hub_handle=handle, rounds=rounds, machine=harness.machine_info(), timings=timings,
      remembered_over_proven=(timings["remembered"]["median_ms"] /
                              timings["proven"]["median_ms"]),
      same_read=same)


def main(_):
  handle = FLAGS.hub_handle or keras_adapters.default_hub_handle()
  record = measure(handle, FLAGS.rounds)
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["read", "median ms", "min ms", "max ms"],
      [[kind, t["median_ms"], t["min_ms"], t["max_ms"]]
       for kind, t in record["timings"].items()]))
  print(f"remembered / proven: {record['remembered_over_proven']:.3f}; "
        f"the same read: {record['same_read']}")


if __name__ == "__main__":
  cli.run(main)

"""BERT-base and BERT-large shapes as genuine TF Hub exports with random weights.

Written once by the Model Garden's exporter (`export_tfhub_lib`, through
`model_garden_export.export_encoder`) with BERT's vocabulary size and position table, so that a
benchmark times the shapes people train without downloading their weights.
"""

import os

from keras_adapters.hub import model_garden_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths

# Layers, width, heads, feed-forward width.
SHAPES = {"base": dict(num_layers=12, hidden_size=768, num_attention_heads=12,
                       intermediate_size=3072),
          "large": dict(num_layers=24, hidden_size=1024, num_attention_heads=16,
                        intermediate_size=4096)}
# What a benchmark's `--bases` chooses from: "default", the embedded base (or the `--hub_handle`
# given), then BERT's shapes.
BASES = ("default", *SHAPES)
_VOCAB_SIZE = 30522
_MAX_POSITIONS = 512
# BERT's initializer range: wider random weights saturate a 12- or 24-layer encoder, and its
# outputs could not be checked against the Hub model's.
_BERT_INITIALIZER_STDDEV = 0.02
# Where the benchmarks keep the exports (their `--work_dir`), so that each is written once.
WORK_DIR = os.path.join(paths.cache_dir(), "bench", "scale")


def export_dir(shape: str, work_dir: str) -> str:
  """Where the export of `shape` lives under a benchmark's `work_dir`."""
  return os.path.join(work_dir, "encoders", shape)


def handle(base: str, default_handle: str, work_dir: str) -> str:
  """The encoder of `base` (of `BASES`): `default_handle` for "default", else the export of
  that shape under `work_dir`, written first if it is not there yet."""
  return default_handle if base == "default" else ensure_export(base, work_dir)


def ensure_export(shape: str, work_dir: str) -> str:
  """The export of `shape` under `work_dir`, written first if it is not there yet."""
  path = export_dir(shape, work_dir)
  if not os.path.isdir(path):
    print(f"Exporting a random {shape} encoder with the Model Garden's exporter...", flush=True)
    export(shape, path)
  return path


def export(shape: str, export_dir: str) -> None:
  """Writes the random TF Hub export of `shape` (a key of `SHAPES`) into `export_dir`."""
  vocab = os.path.join(os.path.dirname(export_dir), "vocab.txt")
  atomic_io.write_text(vocab, "\n".join(
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
      [f"w{i}" for i in range(_VOCAB_SIZE - 5)]) + "\n")
  config = hub_testing.tiny_bert_config(vocab_size=_VOCAB_SIZE,
                                        max_sequence_length=_MAX_POSITIONS, **SHAPES[shape])
  model_garden_export.export_encoder(export_dir, bert_config=config, seed=0, vocab_file=vocab,
                                     do_lower_case=True, random_stddev=_BERT_INITIALIZER_STDDEV)

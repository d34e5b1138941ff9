"""Parity of `AdaptedBert` with `hub.KerasLayer` on genuine Model Garden TF Hub exports.

Each variant of `keras_adapters.hub.testing.MODEL_GARDEN_VARIANTS` (legacy `BertConfig`,
`EncoderConfig` "bert" and "bert_v2"; with and without `mlm`; vocab or SentencePiece;
`copy_pooler_dense_to_encoder`; a narrower embedding; tanh GELU, exact GELU, ReLU) is exported
with random weights by `official.nlp.tools.export_tfhub_lib.export_model`, then both layers
run a padded batch with two segments; the embedded default base runs real sentences through
its preprocessing model. Reported per encoder: the largest absolute difference over
`sequence_output`, `pooled_output` and every `encoder_outputs` entry, at real tokens and at
padded positions, and the largest output value (the scale).

  python bench/hub_parity.py

Results go to bench/results/hub_parity.json and a Markdown table on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.hub import hub_encoder
from keras_adapters.hub import testing
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance

_DEFAULT_BASE = "default_base"
_SENTENCES = ("This is an example sentence", "Short.",
              "A second, somewhat longer sentence for the batch.")

flags.DEFINE_list("encoders", list(testing.MODEL_GARDEN_VARIANTS) + [_DEFAULT_BASE],
                  "Variants to measure, and/or default_base.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "results", "hub_parity.json"),
                    "Where to write the JSON.")
FLAGS = flags.FLAGS


def differences(handle, inputs):
  """Largest absolute differences of AdaptedBert (identity adapters) from the Hub layer."""
  expected = hub.KerasLayer(handle)(inputs)
  actual = keras_adapters.AdaptedBert(handle, adapter_init_stddev=0.0)(inputs)
  real = inputs["input_mask"].numpy().astype(bool)
  at_tokens, at_padding, scale = 0.0, 0.0, 0.0
  pairs = list(zip([expected["sequence_output"]] + expected["encoder_outputs"],
                   [actual["sequence_output"]] + actual["encoder_outputs"]))
  for e, a in pairs:
    gap = np.abs(e.numpy() - a.numpy())
    at_tokens = max(at_tokens, float(gap[real].max()))
    at_padding = max(at_padding, float(gap[~real].max()) if (~real).any() else 0.0)
    scale = max(scale, float(np.abs(e.numpy()).max()))
  pooled = float(np.abs(expected["pooled_output"] - actual["pooled_output"]).max())
  return dict(real_tokens=at_tokens, padded_positions=at_padding, pooled_output=pooled,
              largest_output=scale, activation=hub_encoder.read_hub_encoder(handle).config[
                  "activation"])


def main(argv):
  del argv
  results = {}
  with tempfile.TemporaryDirectory() as root:
    for name in FLAGS.encoders:
      if name == _DEFAULT_BASE:
        preprocess = hub.KerasLayer(keras_adapters.default_preprocess_handle())
        handle, inputs = keras_adapters.default_hub_handle(), preprocess(tf.constant(_SENTENCES))
      else:
        handle = testing.export_model_garden_variant(name, root)
        inputs = hub_encoder.probe_inputs(hub_encoder.read_hub_encoder(handle).config,
                                          batch_size=3, seq_length=12)
      results[name] = differences(handle, inputs)
  variants = [row for name, row in results.items() if name != _DEFAULT_BASE]
  # The largest difference of any output at any position over the Model Garden variants.
  variants_max = max((max(row["real_tokens"], row["padded_positions"], row["pooled_output"])
                      for row in variants), default=None)
  atomic_io.write_json(FLAGS.output, provenance.stamped(
      dict(encoders=results, variants_max=variants_max)))
  print("| encoder | activation read | max diff, real tokens | padded positions | pooled | "
        "largest output |\n|---|---|---|---|---|---|")
  for name, row in results.items():
    print(f"| {name} | {row['activation']} | {row['real_tokens']:.1e} | "
          f"{row['padded_positions']:.1e} | {row['pooled_output']:.1e} | "
          f"{row['largest_output']:.1f} |")


if __name__ == "__main__":
  cli.run(main)

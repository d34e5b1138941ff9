"""A GELU's and a LayerNorm's forward and backward passes: TensorFlow's ops against one pass.

A training call of every Transformer block computes its feed-forward activation and, in the
backward pass, that activation's gradient, on `[batch × seq, intermediate]` values: on the
default base at 32 × 128 tokens, 4,096 × 1,536 once per block. Autodiff takes the gradient
op by op; `keras_adapters.layers.activations` gives training calls the same function with its
derivative compiled by XLA into one pass. Each block's two LayerNorms (BERT's epsilon, 1e-12)
normalise `[batch × seq, hidden]` values, 4,096 × 384: Keras' `LayerNormalization` op by op
and autodiff's gradient (`autodiff`), or `keras_adapters.layers.layer_norm`'s one XLA pass
each way (`one_pass`). Each is timed as a training step runs it (a `tf.function` with a
gradient tape, the output gradient given), in turns, `--steps` calls each after
`--warmup_steps`, for the exact GELU, its tanh form and the LayerNorm; the figures are
medians and the ratio one pass / autodiff.

  python bench/activation_gradient.py      # bench/results/activation_gradient.json
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags
import tensorflow as tf
import tf_keras as keras

import harness
from keras_adapters.layers import activations
from keras_adapters.layers import layer_norm

# The default base's feed-forward shape at the benchmarks' 32 × 128 tokens.
flags.DEFINE_integer("tokens", 32 * 128, "Rows of activations (batch × sequence length).",
                     lower_bound=1)
flags.DEFINE_integer("width", 1536, "The feed-forward inner width.", lower_bound=1)
flags.DEFINE_integer("hidden", 384, "The LayerNorms' width (the hidden size).", lower_bound=1)
flags.DEFINE_integer("steps", 20, "Timed calls of each setup.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 3, "Untimed calls of each setup first (tracing, XLA).",
                     lower_bound=0)
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "activation_gradient.json"),
                    "Where to write the results (JSON).")
FLAGS = flags.FLAGS

_NAMES = ("gelu", "gelu_approximate", "layer_norm")
_GRADIENTS = {"autodiff": False, "one_pass": True}
_LAYER_NORMS = {"autodiff": keras.layers.LayerNormalization,
                "one_pass": layer_norm.LayerNormalization}
_BERT_EPSILON = 1e-12


def _forward_and_backward(activation):
  """`activation`'s values and its input's gradient, as a training step takes them."""

  @tf.function(autograph=False)
  def run(x, output_gradient):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = activation(x)
    return y, tape.gradient(y, x, output_gradients=output_gradient)

  return run


def _functions(gradient):
  """Name → the function timed, for `gradient` (`autodiff` or `one_pass`)."""
  norm = _LAYER_NORMS[gradient](epsilon=_BERT_EPSILON)
  functions = {name: activations.get(name, training=_GRADIENTS[gradient])
               for name in _NAMES if name != "layer_norm"}
  return dict(functions, layer_norm=lambda x: norm(x, training=True))


def main(argv):
  del argv
  runs = {}
  for gradient in _GRADIENTS:
    for name, function in _functions(gradient).items():
      shape = [FLAGS.tokens, FLAGS.hidden if name == "layer_norm" else FLAGS.width]
      x = tf.random.stateless_normal(shape, seed=[0, 0])
      output_gradient = tf.random.stateless_normal(shape, seed=[0, 1])
      run = _forward_and_backward(function)
      runs[f"{name}/{gradient}"] = (
          lambda run=run, x=x, output_gradient=output_gradient: run(x, output_gradient)[1].numpy())
  timings, ratios, rows = harness.compare_in_turns(
      runs, pairs=_NAMES, new="one_pass", old="autodiff", rounds=FLAGS.steps,
      warmup_steps=FLAGS.warmup_steps)
  record = dict(
      benchmark="activation_gradient", machine=harness.machine_info(),
      settings=dict(tokens=FLAGS.tokens, width=FLAGS.width, hidden=FLAGS.hidden,
                    layer_norm_epsilon=_BERT_EPSILON, steps=FLAGS.steps,
                    warmup_steps=FLAGS.warmup_steps,
                    fuse_from_elements=activations.FUSE_FROM_ELEMENTS),
      timings=timings, one_pass_over_autodiff=ratios)
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["function", "autodiff ms", "one pass ms", "one pass / autodiff"], rows))


if __name__ == "__main__":
  cli.run(main)

"""Dropout's masks: 16 random bits a position against TensorFlow's 32-bit number a position.

The encoder's dropout (`keras_adapters.layers.dropout`) draws 16 random bits for each
position, two from every 32-bit random number; TensorFlow's dropout (`tf.nn.dropout`, which
Keras' `Dropout` calls) draws a 32-bit float for each. Timed here in turns, in one process:

* `masks/*`: drawing one mask of the attention probabilities' shape, `[batch, heads, seq,
  seq]`, the largest a step draws (`ours`: `keep_mask`; `tensorflow`: `uniform >= rate`);
* `step/*`: the training step of each `--setups` (the Trainer's step, one batch of
  `--batch_size` x `--seq_length` random tokens), built once with the encoder's masks and
  once with every mask drawn as TensorFlow's dropout draws it: the same model and graph
  otherwise.

Figures are medians; `ours_over_tensorflow` gives the ratios, and `random_ops` the random
ops each traced step holds. On the default base:

  python bench/dropout_masks.py      # bench/results/dropout_masks.json
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
from unittest import mock

from absl import app
from absl import flags
import tensorflow as tf

import harness
from keras_adapters.hub import hub_encoder
from keras_adapters.layers import dropout

harness.define_batch_benchmark_flags(
    steps=10, steps_help="Timed calls of each setup.", output_name="dropout_masks.json",
    child_help=None)
flags.DEFINE_list("setups", ["adapters", "full"], f"Training steps timed, of "
                  f"{', '.join(harness.SETUPS)}.")
FLAGS = flags.FLAGS

_NUM_CLASSES = 2
_RATE = 0.1  # BERT's dropout on the attention probabilities and hidden states.


def tensorflow_keep_mask(shape, rate, seed=None):
  """The mask `tf.nn.dropout` draws: a 32-bit uniform float for every position."""
  return tf.random.uniform(shape, seed=seed) >= rate


def _step(setup, keep_mask):
  """`setup`'s training step, traced with `keep_mask` drawing every dropout mask, and the
  random ops in its graph."""
  model = harness.build_model(FLAGS.hub_handle, setup, _NUM_CLASSES,
                              seq_length=FLAGS.seq_length)
  inputs, labels = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  step = harness.make_train_step(model, num_train_steps=1000)
  with mock.patch.object(dropout, "keep_mask", keep_mask):
    graph = step.get_concrete_function().graph.as_graph_def()  # The one trace.
  nodes = [node for function in graph.library.function for node in function.node_def]
  random_ops = sorted({node.op for node in list(graph.node) + nodes if "Random" in node.op})
  return (lambda: step(inputs, labels).numpy()), random_ops


def main(argv):
  del argv
  for setup in FLAGS.setups:
    if setup not in harness.SETUPS:
      raise app.UsageError(f"--setups: {setup!r} is not a setup; choose from "
                           f"{', '.join(harness.SETUPS)}.")
  harness.resolve_hub_handle()
  drawers = {"ours": dropout.keep_mask, "tensorflow": tensorflow_keep_mask}
  heads = hub_encoder.read_hub_encoder(FLAGS.hub_handle).config["num_attention_heads"]
  shape = [FLAGS.batch_size, heads, FLAGS.seq_length, FLAGS.seq_length]
  runs, random_ops = {}, {}
  for name, keep_mask in drawers.items():
    draw = tf.function(lambda keep_mask=keep_mask: tf.reduce_any(keep_mask(shape, _RATE)),
                       autograph=False)
    runs[f"masks/{name}"] = lambda draw=draw: draw().numpy()
  for setup in FLAGS.setups:
    for name, keep_mask in drawers.items():
      runs[f"step/{setup}/{name}"], random_ops[f"step/{setup}/{name}"] = _step(setup, keep_mask)
  timings, ratios, rows = harness.compare_in_turns(
      runs, pairs=["masks"] + [f"step/{setup}" for setup in FLAGS.setups], new="ours",
      old="tensorflow", rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  record = dict(
      benchmark="dropout_masks", machine=harness.machine_info(),
      settings=dict(hub_handle=FLAGS.hub_handle, setups=FLAGS.setups,
                    batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
                    mask_shape=shape, rate=_RATE, steps=FLAGS.steps,
                    warmup_steps=FLAGS.warmup_steps),
      random_ops=random_ops, timings=timings, ours_over_tensorflow=ratios)
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["what", "TensorFlow's masks ms", "ours ms", "ours / TensorFlow's"], rows))


if __name__ == "__main__":
  cli.run(main)

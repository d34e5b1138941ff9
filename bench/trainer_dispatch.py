"""What the Trainer's loop costs over a bare `tf.function` loop, where dispatch dominates.

A tiny encoder (by default the test suite's tiny random BERT, with adapters and a 3-class
head) on one repeated batch of random tokens, whose training step takes milliseconds, so that
whatever the loop does besides the step (Python bookkeeping, reading the loss from the device,
checks, logs) shows. Both loops run the same step: forward, softmax cross-entropy, gradients of
the trainable variables, global-norm clipping, the paper's Adam.

- The bare loop calls a `tf.function` step `--steps` times after `--warmup_steps` untimed
  calls (tracing) and reads the loss once, at the end.
- The Trainer runs `Trainer.train()` for `--warmup_steps + --steps` steps in a new folder,
  with its defaults (the losses read from the device every `--log_every_steps`, a checkpoint
  at the end), and is timed by its own TensorBoard log: between the events of the steps
  `--warmup_steps` and the last (both multiples of `--log_every_steps`), which it writes
  after reading the steps' losses, `--steps` steps ran, and nothing else (no tracing, no
  checkpoint).

The two are measured in turns, `--rounds` times, in one process; the figures are medians and
the ratio Trainer / bare loop of steps per second (target: at least 0.9).

  python bench/trainer_dispatch.py      # bench/results/trainer_dispatch.json
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
import glob
import statistics
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf
import tf_keras as keras

import harness
from keras_adapters.hub import testing
from keras_adapters.training import optimization
from keras_adapters.training import trainer as trainer_lib

_NUM_CLASSES = 3
_LEARNING_RATE = 1e-4
# The Trainer's loop is what is measured: at least this fraction of the bare loop's rate.
_TARGET = 0.9

flags.DEFINE_integer("steps", 300, "Timed steps of each loop per round.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 100, "Untimed steps first (tracing).", lower_bound=1)
flags.DEFINE_integer("rounds", 3, "Times each loop is measured, in turns.", lower_bound=1)
flags.DEFINE_integer("batch_size", 8, "Examples per batch.", lower_bound=1)
flags.DEFINE_integer("seq_length", 16, "Tokens per example.", lower_bound=2)
flags.DEFINE_integer("log_every_steps", 100, "The Trainer's log interval (its default).",
                     lower_bound=1)
flags.DEFINE_string("hub_handle", None, "TF Hub BERT encoder; default: the tiny random one "
                    "of the tests (keras_adapters.hub.testing).")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "trainer_dispatch.json"),
                    "Where to write the results (JSON).")
FLAGS = flags.FLAGS


def _loss_fn():
  return keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=keras.losses.Reduction.NONE)


def _model_and_data(hub_handle):
  """A seeded model and an endless dataset of one random batch for it."""
  model = harness.build_model(hub_handle, "adapters", _NUM_CLASSES, seq_length=FLAGS.seq_length)
  batch = harness.random_batch(model, FLAGS.batch_size, FLAGS.seq_length, _NUM_CLASSES)
  return model, tf.data.Dataset.from_tensors(batch).repeat()


def bare_loop_steps_per_sec(hub_handle):
  """Steps per second of a loop that only calls a `tf.function` training step."""
  model, dataset = _model_and_data(hub_handle)
  num_steps = FLAGS.warmup_steps + FLAGS.steps
  optimizer = optimization.create_optimizer(learning_rate=_LEARNING_RATE,
                                            num_train_steps=num_steps)
  loss_fn = _loss_fn()

  @tf.function(autograph=False)  # As the Trainer's step.
  def step(features, labels):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(loss_fn(labels, model(features, training=True)))
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, optimizer.gradient_clip_norm)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  batches = iter(dataset)
  for _ in range(FLAGS.warmup_steps):
    step(*next(batches)).numpy()
  start = time.perf_counter()
  for _ in range(FLAGS.steps):
    loss = step(*next(batches))
  loss.numpy()  # The device has done every step only once their last result is read.
  return FLAGS.steps / (time.perf_counter() - start)


def trainer_steps_per_sec(hub_handle):
  """Steps per second of `Trainer.train()` after `--warmup_steps`, by its logs' times."""
  dataset = _model_and_data(hub_handle)[1]
  last_step = FLAGS.warmup_steps + FLAGS.steps
  with tempfile.TemporaryDirectory() as model_dir:
    trainer_lib.Trainer(
        lambda: _model_and_data(hub_handle)[0], _loss_fn(), dataset,
        num_train_steps=last_step, learning_rate=_LEARNING_RATE, model_dir=model_dir,
        log_every_steps=FLAGS.log_every_steps, progress_bar=False).train()
    logged_at = {event.step: event.wall_time
                 for path in glob.glob(os.path.join(model_dir, trainer_lib.SUMMARIES_DIR,
                                                    "train", "events.out.tfevents.*"))
                 for event in tf.compat.v1.train.summary_iterator(path)
                 if event.summary.value}
  return FLAGS.steps / (logged_at[last_step] - logged_at[FLAGS.warmup_steps])


def measure_round(hub_handle):
  """One round: the bare loop's rate, then the Trainer's."""
  return dict(bare_loop_steps_per_sec=bare_loop_steps_per_sec(hub_handle),
              trainer_steps_per_sec=trainer_steps_per_sec(hub_handle))


def main(argv):
  del argv
  for name in ("warmup_steps", "steps"):
    if getattr(FLAGS, name) % FLAGS.log_every_steps:
      raise app.UsageError(f"--{name}={getattr(FLAGS, name)} is not a multiple of "
                           f"--log_every_steps={FLAGS.log_every_steps}: the Trainer is timed by "
                           "its logs, so make it one.")
  hub_handle = FLAGS.hub_handle or testing.tiny_hub_handle()
  rounds = []
  for round_index in range(FLAGS.rounds):
    print(f"Round {round_index + 1} of {FLAGS.rounds}...", flush=True)
    rounds.append(measure_round(hub_handle))
  median = lambda key: statistics.median(r[key] for r in rounds)
  ratio = median("trainer_steps_per_sec") / median("bare_loop_steps_per_sec")
  record = dict(
      benchmark="trainer_dispatch", machine=harness.machine_info(),
      settings=dict(steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps, rounds=FLAGS.rounds,
                    batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
                    log_every_steps=FLAGS.log_every_steps,
                    hub_handle=FLAGS.hub_handle or "tiny random encoder of the tests",
                    method="adapters", adapter_size=harness.ADAPTER_SIZE),
      rounds=rounds, bare_loop_steps_per_sec=median("bare_loop_steps_per_sec"),
      trainer_steps_per_sec=median("trainer_steps_per_sec"),
      trainer_over_bare_loop=dict(value=ratio, at_least=_TARGET, met=ratio >= _TARGET))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["loop", "steps/s"], [["bare tf.function", record["bare_loop_steps_per_sec"]],
                            ["Trainer", record["trainer_steps_per_sec"]]]))
  print(f"Trainer / bare loop: {ratio:.2f} (target at least {_TARGET}).")


if __name__ == "__main__":
  cli.run(main)

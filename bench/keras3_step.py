r"""The Keras 3 side of bench/keras3_speed.py: adapter training steps and inference timed on a
keras-hub backbone, on the backend `KERAS_BACKEND` names (TensorFlow or JAX).

The model is what a Keras 3 user builds: `kak.from_tf_hub(--hub_handle)` (the embedded
default when none is given), two Houlsby adapters per layer (`kak.AdapterConfig`, m=64, the
LayerNorms and head trained, as bench/harness.py's `adapters` setup), `kak.build_classifier`,
compiled with AdamW (gradients clipped to global norm 1.0, as the library's Trainer does). A
training step is `model.train_on_batch` (the compiled step `fit` runs: `jax.jit` on JAX, a
`tf.function` on TensorFlow); inference is `model.predict_on_batch`. Both are timed in turns
on one seeded batch of random token ids, all real tokens.

One process per backend, never Keras 2 (no tf_keras): it prints one JSON line, the per-call
seconds of each setup, the trainable parameters and the CPU kernels TensorFlow chose.

  KERAS_BACKEND=jax python bench/keras3_step.py --child=keras3 --steps=5
"""

import json

# Before Keras 3 loads TensorFlow: keras_adapters turns on TensorFlow's oneDNN CPU kernels only
# when it is imported first, as the Keras 2 path's process has them.
from keras_adapters import keras3 as kak
# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
from keras_adapters.utils import cpu_kernels

# pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order
from absl import flags
import numpy as np

import keras

import timing

flags.DEFINE_string("child", None, "Internal: what the child measures (keras3).")
flags.DEFINE_integer("steps", 5, "Timed calls of each setup.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 3, "Untimed calls of each setup first.", lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Examples per batch.", lower_bound=1)
flags.DEFINE_integer("seq_length", 128, "Tokens per example.", lower_bound=2)
flags.DEFINE_string("hub_handle", None, "TF Hub BERT encoder; default: the embedded base.")
flags.DEFINE_integer("adapter_size", 64, "Bottleneck of the adapters.", lower_bound=1)
flags.DEFINE_integer("num_classes", 2, "Classes of the head.", lower_bound=1)

FLAGS = flags.FLAGS


def _model():
  keras.utils.set_random_seed(0)
  backbone = kak.adapt(kak.from_tf_hub(FLAGS.hub_handle),
                       kak.AdapterConfig(adapter_size=FLAGS.adapter_size))
  model = kak.build_classifier(backbone, FLAGS.num_classes)
  model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-4, global_clipnorm=1.0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model, backbone


def _batch(vocabulary_size):
  rng = np.random.default_rng(0)
  shape = (FLAGS.batch_size, FLAGS.seq_length)
  inputs = dict(token_ids=rng.integers(0, vocabulary_size, shape).astype("int32"),
                segment_ids=np.zeros(shape, "int32"), padding_mask=np.ones(shape, "int32"))
  return inputs, rng.integers(0, FLAGS.num_classes, FLAGS.batch_size).astype("int32")


def measure():
  """Times the training step and inference in turns, in this process."""
  model, backbone = _model()
  inputs, labels = _batch(backbone.vocabulary_size)
  # train_on_batch and predict_on_batch return NumPy values: each call ends when its work has.
  runs = dict(adapter_step=lambda: model.train_on_batch(inputs, labels),
              inference_adapters=lambda: model.predict_on_batch(inputs))
  seconds = timing.time_interleaved(runs, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  return dict(backend=keras.backend.backend(), keras_version=keras.__version__,
              seconds=seconds, kernels=cpu_kernels.choice(),
              trainable_params=int(sum(np.prod(w.shape) for w in model.trainable_weights)))


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  print(json.dumps(measure()), flush=True)


if __name__ == "__main__":
  cli.run(main)

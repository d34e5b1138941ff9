"""Tiny runs for fast tests: a learnable text task with run settings for the tiny random
encoder, and a Trainer of a tiny regression model.

Class c of the task uses only the words of group c of the tiny vocab (`w0`...`w19` for the
first class, `w20`... for the second), so a few steps learn it from real tokens.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.core import config_definitions
from keras_adapters.hub import testing as hub_testing
from keras_adapters.data import examples as examples_lib
from keras_adapters.training import trainer as trainer_lib

SEQ_LENGTH = 16
LABEL_NAMES = ("red", "green", "blue")
WORD_GROUPS = tuple(hub_testing.TINY_WORDS[i * 20:(i + 1) * 20] for i in range(3))


def texts_and_labels(count, seed, num_classes=3):
  """`count` texts of 3 to 6 words, classes taking turns; returns (texts, int32 labels)."""
  rng = np.random.default_rng(seed)
  labels = np.arange(count, dtype=np.int32) % num_classes
  texts = [" ".join(rng.choice(WORD_GROUPS[label], size=rng.integers(3, 7)))
           for label in labels]
  return texts, labels


def examples(count, seed, labelled=True, prefix="x"):
  """`count` labelled (or unlabelled) examples of the colour task."""
  texts, labels = texts_and_labels(count, seed)
  return examples_lib.TextExamples(ids=[f"{prefix}{i}" for i in range(count)], texts=(texts,),
                                   labels=labels if labelled else None)


def colour_task(name="colours"):
  """The task spec and its train (18), validation (6) and test (6) splits."""
  spec = examples_lib.TaskSpec(name=name, text_fields=("text",), label_names=LABEL_NAMES)
  return spec, dict(train=examples(18, seed=0), validation=examples(6, seed=1),
                    test=examples(6, seed=2))


def run_config(**overrides):
  """An `ExperimentConfig` of the tiny encoder and preprocessing: one quick epoch of adapters."""
  values = dict(adapter_size=4, learning_rate=1e-2, epochs=1.0, batch_size=8,
                max_seq_length=SEQ_LENGTH, checkpoint_every_steps=100)
  values.update(overrides)
  # Saved only when not given: a test of another base would wait seconds for these.
  if "hub_handle" not in values:
    values["hub_handle"] = hub_testing.tiny_hub_handle()
  if "preprocess_handle" not in values:
    values["preprocess_handle"] = hub_testing.tiny_preprocess_handle(SEQ_LENGTH)
  return config_definitions.ExperimentConfig.from_settings(**values)


def write_csv(path, count=30, seed=0, header=("review", "sentiment"),
              labels=("bad", "good", "meh")):
  """Writes a CSV of the colour task's texts under other label names; returns `path`."""
  texts, label_ids = texts_and_labels(count, seed, num_classes=len(labels))
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(",".join(header) + "\n")
    for text, label in zip(texts, label_ids):
      f.write(f"{text},{labels[label]}\n")
  return path


REGRESSION_FEATURES = np.random.RandomState(0).randn(32, 4).astype(np.float32)
REGRESSION_LABELS = REGRESSION_FEATURES @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)


def regression_trainer(model_dir, learning_rate=0.05, labels=REGRESSION_LABELS, **kwargs):
  """A Trainer of a frozen layer under a head, 8 steps over 4 unshuffled batches of 8, a
  checkpoint after every step, no warmup; `kwargs` override Trainer arguments."""
  def model_fn():
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="tanh", trainable=False)(inputs)
    return keras.Model(inputs, keras.layers.Dense(1)(hidden))
  arguments = dict(num_train_steps=8, learning_rate=learning_rate, model_dir=model_dir,
                   warmup_fraction=0.0, checkpoint_every_steps=1, progress_bar=False)
  arguments.update(kwargs)
  return trainer_lib.Trainer(
      model_fn, lambda y, outputs: tf.reduce_mean(tf.square(y - outputs), axis=-1),
      tf.data.Dataset.from_tensor_slices((REGRESSION_FEATURES, labels)).batch(8), **arguments)

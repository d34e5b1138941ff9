"""512 tokens, the whole position table of a BERT, work end to end: training, evaluation, the
single-task SavedModel, the adapter artifact reloaded, and the multi-task SavedModel (BERT-large's
blocks: bert_large_test.py).

A tiny Model Garden export with BERT's 512 position embeddings stands in for a Hub BERT; the
texts run past 512 wordpieces, so every packed sequence fills all 512 positions.
"""

import os

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.data import examples as examples_lib
from keras_adapters.hub import testing as hub_testing
from keras_adapters.models import saving
from keras_adapters.serving import multitask_export
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing

_LENGTH = 512


def _long_examples(count, seed):
  """The colour task's examples, each text's words repeated past `_LENGTH` wordpieces."""
  short = testing.examples(count, seed)
  texts = [" ".join((text.split() * _LENGTH)[:_LENGTH + 40]) for text in short.texts[0]]
  return examples_lib.TextExamples(ids=short.ids, texts=(texts,), labels=short.labels)


def train_export_and_serve(test, root, num_train, batch_size, score=True, **shape):
  """Trains the colour task on a Model Garden export of `shape` with BERT's 512 positions,
  scores its test split (unless `score` is false), exports it and serves the 512-token test
  texts as strings, checked by `test` (a `tf.test.TestCase`); returns the encoder, the
  preprocessing, the export, the texts and the served probabilities."""
  # The cached export, read only: a copy of BERT-large's would write 1.2 GB more.
  encoder = hub_testing.tiny_hub_encoder(max_sequence_length=_LENGTH, **shape)
  # The suite's shared preprocessing, whose own default length is short: the task packs to
  # max_seq_length through `bert_pack_inputs`, as with a Hub BERT's preprocessing (128).
  preprocess = hub_testing.tiny_preprocess_handle()
  spec, _ = testing.colour_task()
  # One evaluated split at most: each is scored by a function traced for it, which at
  # BERT-large's depth costs more than the steps; a validation split takes the same path.
  test_split = _long_examples(batch_size, 2)
  splits = dict(train=_long_examples(num_train, 0), **(dict(test=test_split) if score else {}))
  config = testing.run_config(hub_handle=encoder, preprocess_handle=preprocess,
                              max_seq_length=_LENGTH, batch_size=batch_size)
  export_dir = os.path.join(root, "export")
  results = classification.run_task(spec, splits, config, os.path.join(root, "run"),
                                    export_dir=export_dir, progress_bar=False)
  test.assertEqual(results["num_train_steps"], num_train // batch_size)
  test.assertCountEqual(results["metrics"], ["test"] if score else [])
  texts = tf.constant(test_split.texts[0])
  served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
      "serving_default"](text=texts)["probabilities"]
  test.assertEqual(served.shape, (batch_size, len(spec.label_names)))
  test.assertAllClose(tf.reduce_sum(served, axis=-1), np.ones(batch_size), atol=1e-5)
  return encoder, preprocess, export_dir, texts, served


class LongSequencesTest(tf.test.TestCase):

  def test_512_tokens_train_evaluate_export_and_serve(self):
    """The SavedModel and the multi-task one serve what the adapter artifact, reloaded,
    computes on the packed 512 tokens."""
    root = self.create_tempdir().full_path
    encoder, preprocess, export_dir, texts, served = train_export_and_serve(
        self, root, num_train=8, batch_size=4)
    packed = hub.load(preprocess).bert_pack_inputs(
        [hub.load(preprocess).tokenize(texts)], seq_length=_LENGTH)
    self.assertAllEqual(packed["input_mask"], np.ones([4, _LENGTH]))  # Every position used.
    model = saving.load_task_model(os.path.join(export_dir, "adapters"), base_handle=encoder)
    expected = tf.nn.softmax(model(packed, training=False), axis=-1)
    self.assertAllClose(served, expected, atol=1e-5)
    shared = multitask_export.export_multitask(
        encoder, {"colours": os.path.join(export_dir, "adapters")},
        os.path.join(root, "multitask"), preprocess_handle=preprocess)
    routed = tf.saved_model.load(shared).signatures[multitask_export.ROUTED_SIGNATURE](
        task=tf.constant(["colours"] * 4), text=texts)["probabilities"]
    self.assertAllClose(routed, expected, atol=1e-5)


if __name__ == "__main__":
  tf.test.main()

"""512 tokens, the whole position table of a BERT, work end to end: training, evaluation, the
single-task SavedModel, the adapter artifact reloaded, and the multi-task SavedModel; and on
BERT-large's shape, two training steps, the export and serving.

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
# BERT-large's shape, with BERT's initializer range: wider random weights saturate 24 layers,
# and the rebuilt encoder could not be checked against the Hub model.
_LARGE = dict(num_layers=24, hidden_size=1024, num_attention_heads=16, intermediate_size=4096,
              random_stddev=0.02)


def _long_examples(count, seed):
  """The colour task's examples, each text's words repeated past `_LENGTH` wordpieces."""
  short = testing.examples(count, seed)
  texts = [" ".join((text.split() * _LENGTH)[:_LENGTH + 40]) for text in short.texts[0]]
  return examples_lib.TextExamples(ids=short.ids, texts=(texts,), labels=short.labels)


class LongSequencesTest(tf.test.TestCase):

  def _train_export_and_serve(self, root, num_train, batch_size, **shape):
    """Trains the colour task on a Model Garden export of `shape` with BERT's 512 positions,
    exports it and serves strings; returns the encoder, the export and the served texts and
    probabilities, checked against the adapter artifact reloaded."""
    encoder = hub_testing.save_tiny_hub_encoder(os.path.join(root, "encoder"),
                                                max_sequence_length=_LENGTH, **shape)
    preprocess = hub_testing.tiny_preprocess_handle(_LENGTH)
    spec, _ = testing.colour_task()
    splits = dict(train=_long_examples(num_train, 0), validation=_long_examples(batch_size, 1),
                  test=_long_examples(batch_size, 2))
    config = testing.run_config(hub_handle=encoder, preprocess_handle=preprocess,
                                max_seq_length=_LENGTH, batch_size=batch_size)
    export_dir = os.path.join(root, "export")
    results = classification.run_task(spec, splits, config, os.path.join(root, "run"),
                                      export_dir=export_dir, progress_bar=False)
    self.assertEqual(results["num_train_steps"], num_train // batch_size)
    self.assertBetween(results["metrics"]["test"]["accuracy"], 0.0, 100.0)

    texts = tf.constant(splits["test"].texts[0])
    packed = hub.load(preprocess).bert_pack_inputs(
        [hub.load(preprocess).tokenize(texts)], seq_length=_LENGTH)
    self.assertAllEqual(packed["input_mask"], np.ones([batch_size, _LENGTH]))  # All used.
    model = saving.load_task_model(os.path.join(export_dir, "adapters"), base_handle=encoder)
    expected = tf.nn.softmax(model(packed, training=False), axis=-1)
    served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](text=texts)["probabilities"]
    self.assertAllClose(served, expected, atol=1e-5)
    return encoder, preprocess, export_dir, texts, expected

  def test_512_tokens_train_evaluate_export_and_serve(self):
    root = self.create_tempdir().full_path
    encoder, preprocess, export_dir, texts, expected = self._train_export_and_serve(
        root, num_train=8, batch_size=4)
    shared = multitask_export.export_multitask(
        encoder, {"colours": os.path.join(export_dir, "adapters")},
        os.path.join(root, "multitask"), preprocess_handle=preprocess)
    routed = tf.saved_model.load(shared).signatures[multitask_export.ROUTED_SIGNATURE](
        task=tf.constant(["colours"] * 4), text=texts)["probabilities"]
    self.assertAllClose(routed, expected, atol=1e-5)

  def test_bert_large_shape_at_512_tokens_trains_two_steps_exports_and_serves(self):
    """BERT-large's shape (24 layers, 1,024 wide, 16 heads, 4,096 feed-forward), with 512
    tokens: two training steps (attention recomputed, as --recompute_attention=auto does from
    512 tokens), the SavedModel serving strings."""
    self._train_export_and_serve(self.create_tempdir().full_path, num_train=2, batch_size=1,
                                 **_LARGE)


if __name__ == "__main__":
  tf.test.main()

"""Tests for ablation: removing trained adapters over a span of layers, and the span loop."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf

from keras_adapters.analysis import ablation
from keras_adapters.hub import testing as hub_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing

_NUM_LAYERS = 4


class RemoveAdaptersTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "ablation_test")
    cls.handle = hub_testing.save_tiny_hub_encoder(os.path.join(root, "encoder"),
                                                   num_layers=_NUM_LAYERS)
    # Random "trained" adapters, LayerNorms and head, all away from their initial values.
    cls.artifact = model_testing.save_random_task_artifact(
        os.path.join(root, "artifact"), cls.handle, hub_testing.tiny_preprocess_handle(),
        adapter_config=adapter_config.AdapterConfig(adapter_size=4))
    ids = np.random.default_rng(0).integers(4, hub_testing.TINY_CONFIG["vocab_size"], (3, 8))
    cls.inputs = dict(input_word_ids=tf.constant(ids, tf.int32),
                      input_mask=tf.ones([3, 8], tf.int32),
                      input_type_ids=tf.zeros([3, 8], tf.int32))

  def _built_without(self, span):
    """The trained model rebuilt with no adapters in `span` (`leave_out`), weights copied."""
    trained = saving.load_task_model(self.artifact)
    # What trains does not matter here, and tuning="adapters" refuses a model left with none.
    bert = adapted_bert.AdaptedBert(self.handle, adapter_config=adapter_config.AdapterConfig(
        adapter_size=4, leave_out=tuple(range(span[0], span[1] + 1)), tuning="layer_norm"))
    model = classifier.build_classifier(bert, 3, pooling="mean")
    trained_weights = ablation.the_adapted_bert(trained).adapter_weights()
    for key, variable in bert.adapter_weights().items():
      variable.assign(trained_weights[key])
    model.get_layer("logits").set_weights(trained.get_layer("logits").get_weights())
    return model

  def test_removal_equals_a_model_built_without_those_adapters(self):
    whole = saving.load_task_model(self.artifact)(self.inputs, training=False)
    for span in [(0, 0), (1, 2), (0, _NUM_LAYERS - 1), (3, 3)]:
      removed = saving.load_task_model(self.artifact)
      ablation.remove_adapters(removed, *span)
      got = removed(self.inputs, training=False)
      self.assertAllClose(got, self._built_without(span)(self.inputs, training=False),
                          atol=1e-6, rtol=0, msg=str(span))
      # Removing the trained adapters changes the answers, far beyond the tolerance: the
      # comparison is not vacuous.
      self.assertGreater(float(tf.reduce_max(tf.abs(got - whole))), 1e-4)

  def test_removal_is_recorded_in_the_config(self):
    model = saving.load_task_model(self.artifact)
    ablation.remove_adapters(model, 1, 2)
    bert = ablation.the_adapted_bert(model)
    self.assertEqual(bert.adapter_configs[bert.active_adapter].leave_out, (1, 2))

  def test_bad_spans_are_refused(self):
    model = saving.load_task_model(self.artifact)
    with self.assertRaisesRegex(ValueError, "first=2, last=1"):
      ablation.remove_adapters(model, 2, 1)
    with self.assertRaisesRegex(ValueError, r"layers \[4\] do not exist"):
      ablation.remove_adapters(model, 3, 4)


class SpansTest(tf.test.TestCase):

  def test_every_contiguous_span_once(self):
    spans = ablation.layer_spans(3)
    self.assertEqual(spans, [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)])
    self.assertLen(ablation.layer_spans(12), 78)

  def test_evaluate_spans_skips_what_is_done_and_reports_the_rest(self):
    loaded, reported = [], []

    def load_model():
      loaded.append(True)
      return "model"

    with mock.patch.object(ablation, "remove_adapters") as remove:
      scores = ablation.evaluate_spans(
          load_model, lambda model: 50.0, 2, dict(none=80.0, **{"0-0": 79.0}),
          lambda key, value: reported.append(key))
    self.assertEqual(remove.call_args_list, [mock.call("model", 0, 1), mock.call("model", 1, 1)])
    self.assertEqual(reported, ["0-1", "1-1"])
    self.assertLen(loaded, 2)
    self.assertEqual(scores, {"none": 80.0, "0-0": 79.0, "0-1": 50.0, "1-1": 50.0})

  def test_change_matrix(self):
    matrix = ablation.change_matrix({"none": 80.0, "0-0": 79.0, "0-1": 70.0}, 2)
    self.assertEqual(matrix, [[-1.0, -10.0], [None, None]])


if __name__ == "__main__":
  tf.test.main()

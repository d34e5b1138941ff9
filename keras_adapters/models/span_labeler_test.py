"""Tests of the span labeler (encoder + Model Garden span head) and its loss."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import parameter_summary
from keras_adapters.models import span_labeler
from keras_adapters.utils import precision


def _inputs(lengths, width):
  ids = np.zeros([len(lengths), width], np.int32)
  for row, length in enumerate(lengths):
    ids[row, :length] = np.arange(5, 5 + length)
  mask = (ids > 0).astype(np.int32)
  return dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
              input_type_ids=tf.constant(mask))


class SpanLabelerTest(parameterized.TestCase, tf.test.TestCase):

  def build(self, **kwargs):
    return span_labeler.build_span_labeler(
        adapted_bert.AdaptedBert(testing.tiny_hub_handle(), **kwargs))

  def test_logits_per_token_with_padding_masked(self):
    model = self.build(adapter_size=4)
    outputs = model(_inputs([6, 3], width=8), training=False)
    self.assertCountEqual(outputs, ["start_logits", "end_logits"])
    for logits in outputs.values():
      self.assertEqual(logits.shape, (2, 8))
      self.assertAllEqual(logits[1, 3:], [span_labeler.MASKED_LOGIT] * 5)
      self.assertAllGreater(logits[0, :6], span_labeler.MASKED_LOGIT)
    # A window's logits do not depend on how far its batch is padded.
    shorter = model(_inputs([3], width=3), training=False)
    self.assertAllClose(shorter["start_logits"][0], outputs["start_logits"][1, :3], atol=1e-5)

  @parameterized.named_parameters(
      ("adapters", dict(adapter_size=4, tuning="adapters")),
      ("full", dict(adapter_size=None, tuning="full")),
  )
  def test_pooler_is_frozen_and_the_head_trains(self, kwargs):
    model = self.build(**kwargs)
    names = [variable.name for variable in model.trainable_variables]
    self.assertFalse([name for name in names if "pooler" in name])
    head = [variable for variable in model.trainable_variables
            if "predictions/transform/logits" in variable.name]
    hidden = testing.TINY_CONFIG["hidden_size"]
    self.assertCountEqual([tuple(variable.shape) for variable in head], [(hidden, 2), (2,)])
    summary = parameter_summary.parameter_summary(model)
    if kwargs["tuning"] == "adapters":
      self.assertLess(summary.trainable, summary.base / 2)

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_logits_near_the_float32_models(self, name, epsilon):
    """Built under a mixed policy and given a float32 model's (trained) weights, the span
    labeler computes its encoder in the policy but its head in float32, and gives float32
    logits near the float32 model's; the global policy is the same afterwards."""
    reference = self.build(adapter_size=4)
    rng = np.random.default_rng(0)
    for variable in reference.trainable_variables:
      variable.assign(variable + rng.normal(scale=0.3, size=variable.shape))
    with precision.policy_scope(name):
      mixed = self.build(adapter_size=4)
      self.assertEqual(keras.mixed_precision.global_policy().compute_dtype, name)
    mixed.set_weights(reference.get_weights())
    self.assertEqual({v.dtype for v in mixed.variables}, {tf.float32})
    self.assertEqual(mixed.get_layer("span_labeling").compute_dtype, "float32")
    inputs = _inputs([6, 3], width=8)
    outputs, expected = mixed(inputs, training=False), reference(inputs, training=False)
    for key in ("start_logits", "end_logits"):
      self.assertEqual(outputs[key].dtype, tf.float32)
      # At the real tokens (the padding's are the mask's constant): measured up to 3.0
      # epsilons.
      self.assertLess(layers_testing.mixed_precision_gap(
          tf.boolean_mask(outputs[key], inputs["input_mask"]),
          tf.boolean_mask(expected[key], inputs["input_mask"]), epsilon), 6)
      self.assertAllEqual(outputs[key][1, 3:], [span_labeler.MASKED_LOGIT] * 5)

  def test_loss_is_the_mean_of_start_and_end_cross_entropies(self):
    outputs = dict(start_logits=tf.constant([[2.0, 0.0, 0.0]]),
                   end_logits=tf.constant([[0.0, 0.0, 1.0]]))
    expected = (-np.log(np.exp(2) / (np.exp(2) + 2)) - np.log(np.e / (np.e + 2))) / 2
    self.assertAllClose(span_labeler.span_loss(tf.constant([[0, 2]]), outputs), [expected])


if __name__ == "__main__":
  tf.test.main()

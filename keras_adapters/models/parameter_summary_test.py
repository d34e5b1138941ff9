"""Tests for the peft-style parameter accounting."""

import contextlib
import io
import re

from absl.testing import parameterized
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config
from keras_adapters.models import classifier
from keras_adapters.models import parameter_summary

# The tiny Hub encoder: hidden 16, 2 layers, intermediate 32, vocab 64, 32 positions, 2 types.
_D, _M, _LAYERS, _FF = 16, 4, 2, 32
_ADAPTERS = 2 * _LAYERS * (2 * _M * _D + _D + _M)  # 4 x 148 = 592.
_LAYER_NORMS = (2 * _LAYERS + 1) * 2 * _D  # 5 x 32 = 160.
_HEAD = _D * 3 + 3  # 51.
_TRAINABLE = _ADAPTERS + _LAYER_NORMS + _HEAD  # 803.
_BASE = (64 * _D + 32 * _D + 2 * _D + 2 * _D  # Embeddings and their LayerNorm.
         + _LAYERS * (4 * (_D * _D + _D)  # Query, key, value, attention output.
                      + (_D * _FF + _FF) + (_FF * _D + _D)  # Feed-forward.
                      + 2 * 2 * _D)  # Two LayerNorms.
         + _D * _D + _D)  # Pooler.
_TOTAL = _BASE + _ADAPTERS + _HEAD


class ParameterSummaryTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.model = classifier.build_classifier(
        adapted_bert.AdaptedBert(cls.handle, adapter_size=_M), 3)
    cls.summary = parameter_summary.parameter_summary(cls.model)

  def test_trainable_is_adapters_plus_layer_norms_plus_head(self):
    """Trainable parameters are adapters + LayerNorms + head, counted by hand."""
    self.assertEqual(_TRAINABLE, 803)
    self.assertEqual(self.summary.trainable, _TRAINABLE)
    self.assertEqual(self.summary.trainable, self.model.count_params() - sum(
        int(tf.size(w)) for w in self.model.non_trainable_weights))

  def test_total_base_and_adapters(self):
    """Total is base + adapters + head; base excludes adapters and head."""
    self.assertEqual((_BASE, _TOTAL), (6320, 6963))
    self.assertEqual(self.summary.total, _TOTAL)
    self.assertEqual(self.summary.total, self.model.count_params())
    self.assertEqual(self.summary.base, _BASE)
    self.assertEqual(self.summary.adapter_sizes, (148,) * 4)
    self.assertEqual(self.summary.adapters, _ADAPTERS)

  def test_added_adapter_sets_do_not_shrink_the_base(self):
    encoder = adapted_bert.AdaptedBert(self.handle, adapter_size=_M)
    encoder.add_adapter("second", adapter_config.AdapterConfig(adapter_size=_M))
    summary = parameter_summary.parameter_summary(encoder)
    self.assertEqual(summary.base, _BASE)
    self.assertEqual(summary.adapter_sizes, (148,) * 8)

  def test_trainable_percent(self):
    """trainable_percent = 100 * trainable / total."""
    self.assertAllClose(self.summary.trainable_percent, 100.0 * 803 / 6963)
    self.assertAllClose(self.summary.trainable_percent, 11.5324, atol=1e-4)

  @parameterized.named_parameters(("one", 1, 6963), ("nine", 9, 6160 + 9 * 803),
                                  ("seventeen", 17, 6160 + 17 * 803))
  def test_total_for_tasks_is_frozen_plus_n_times_trainable(self, num_tasks, expected):
    """total_for_tasks(n) = frozen + n * trainable: one base shared by n tasks."""
    frozen = _TOTAL - _TRAINABLE
    self.assertEqual(frozen, 6160)
    self.assertEqual(self.summary.total_for_tasks(num_tasks), frozen + num_tasks * _TRAINABLE)
    self.assertEqual(self.summary.total_for_tasks(num_tasks), expected)

  def test_string_has_peft_format(self):
    """str() starts with peft's 'trainable params: N || all params: M || trainable%: p' line."""
    text = str(self.summary)
    self.assertTrue(text.startswith("trainable params: "))
    first_line = text.splitlines()[0]
    self.assertEqual(first_line,
                     "trainable params: 803 || all params: 6,963 || trainable%: 11.5324")
    self.assertRegex(
        first_line, r"^trainable params: [\d,]+ \|\| all params: [\d,]+ \|\| "
        r"trainable%: \d+\.\d{4}$")
    self.assertIn("adapters: 4 x 148 = 592 params", text)
    self.assertIn(f"9 task(s): {6160 + 9 * 803:,} params", text)

  def test_print_trainable_parameters_prints_the_summary(self):
    """print_trainable_parameters prints exactly str(parameter_summary(model))."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
      parameter_summary.print_trainable_parameters(self.model)
    self.assertEqual(buffer.getvalue(), str(self.summary) + "\n")

  def test_no_adapter_line_without_adapters(self):
    """A model with no adapters has no adapter line and base == total when it has no encoder."""
    dense = keras.layers.Dense(4)
    dense.build([None, 3])
    summary = parameter_summary.parameter_summary(dense)
    self.assertEqual((summary.trainable, summary.total, summary.base), (16, 16, 16))
    self.assertEqual(summary.adapter_sizes, ())
    self.assertNotIn("adapters:", str(summary))
    self.assertTrue(str(summary).startswith(
        "trainable params: 16 || all params: 16 || trainable%: 100.0000"))

  def test_mirrored_variables_are_counted_once(self):
    """Under a two-replica MirroredStrategy the counts are the same as on one device."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
      model = classifier.build_classifier(
          adapted_bert.AdaptedBert(self.handle, adapter_size=_M), 3)
    summary = parameter_summary.parameter_summary(model)
    self.assertEqual((summary.trainable, summary.total, summary.base),
                     (_TRAINABLE, _TOTAL, _BASE))
    self.assertTrue(re.match(r"trainable params: 803 \|\|", str(summary)))


if __name__ == "__main__":
  tf.test.main()

"""Tests for metrics."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from scipy import stats
from sklearn import metrics as sklearn_metrics

from keras_adapters.data import examples
from keras_adapters.data import metrics


class ClassificationMetricsTest(parameterized.TestCase):

  def test_binary_hand_computed(self):
    labels = [1, 1, 0, 0, 1]
    predictions = [1, 0, 0, 1, 1]
    # tp = 2 (examples 0 and 4), fn = 1 (example 1), fp = 1 (example 3), tn = 1 (example 2).
    # accuracy = (tp + tn) / 5 = 3 / 5.
    self.assertAlmostEqual(metrics.accuracy(labels, predictions), 0.6)
    # F1 = 2 tp / (2 tp + fp + fn) = 4 / 6.
    self.assertAlmostEqual(metrics.f1_score(labels, predictions), 4 / 6)
    # MCC = (tp tn - fp fn) / sqrt((tp + fp)(tp + fn)(tn + fp)(tn + fn))
    #     = (2 - 1) / sqrt(3 * 3 * 2 * 2) = 1 / 6.
    self.assertAlmostEqual(metrics.matthews_corrcoef(labels, predictions), 1 / 6)

  def test_multiclass_matthews_hand_computed(self):
    # Confusion (rows gold, columns predicted): [[1, 1, 0], [0, 0, 1], [0, 0, 1]].
    # correct c = 2, total s = 4, gold counts t = [2, 1, 1], predicted counts p = [1, 1, 2].
    # MCC = (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (8 - 5) / sqrt(10 * 10) = 0.3.
    self.assertAlmostEqual(metrics.matthews_corrcoef([0, 1, 2, 0], [0, 2, 2, 1]), 0.3)

  def test_matthews_extremes(self):
    self.assertAlmostEqual(metrics.matthews_corrcoef([0, 1, 1, 0], [0, 1, 1, 0]), 1.0)
    self.assertAlmostEqual(metrics.matthews_corrcoef([0, 1, 1, 0], [1, 0, 0, 1]), -1.0)

  @parameterized.named_parameters(
      ("constant_predictions", [0, 1, 1, 0], [1, 1, 1, 1]),
      ("constant_labels", [1, 1, 1, 1], [0, 1, 1, 0]),
      ("both_constant", [0, 0, 0], [0, 0, 0]),
  )
  def test_matthews_is_zero_not_nan_when_one_side_is_constant(self, labels, predictions):
    self.assertEqual(metrics.matthews_corrcoef(labels, predictions), 0.0)

  def test_f1_without_any_positive_is_zero(self):
    # tp = fp = fn = 0: F1 is 0/0; scikit-learn reports 0 as well.
    self.assertEqual(metrics.f1_score([0, 0, 0], [0, 0, 0]), 0.0)

  def test_large_class_ids_cost_no_memory(self):
    self.assertAlmostEqual(metrics.matthews_corrcoef([10**12, 0], [10**12, 0]), 1.0)

  @parameterized.parameters(0, 1, 2)
  def test_matches_scikit_learn(self, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=200)
    predictions = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    self.assertAlmostEqual(metrics.accuracy(labels, predictions),
                        sklearn_metrics.accuracy_score(labels, predictions))
    self.assertAlmostEqual(metrics.f1_score(labels, predictions),
                        sklearn_metrics.f1_score(labels, predictions))
    three_class_labels = rng.integers(0, 3, size=200)
    three_class_predictions = rng.integers(0, 3, size=200)
    self.assertAlmostEqual(
        metrics.matthews_corrcoef(three_class_labels, three_class_predictions),
        sklearn_metrics.matthews_corrcoef(three_class_labels, three_class_predictions))

  def test_float_class_ids_with_whole_values_are_accepted(self):
    self.assertAlmostEqual(metrics.accuracy(np.array([0., 1.]), np.array([0., 0.])), 0.5)


class CorrelationMetricsTest(parameterized.TestCase):

  def test_pearson_hand_computed(self):
    # x - mean = [-1.5, -0.5, 0.5, 1.5], y - mean = [-3, -1, 0, 4].
    # sum dx dy = 4.5 + 0.5 + 0 + 6 = 11; sum dx^2 = 5; sum dy^2 = 26.
    # r = 11 / sqrt(5 * 26) = 11 / sqrt(130).
    self.assertAlmostEqual(metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]), 11 / np.sqrt(130))

  def test_spearman_hand_computed_with_ties(self):
    # Ranks: x = [1, 2.5, 2.5, 4] (the tie shares ranks 2 and 3), y = [1, 3, 2, 4].
    # Centred: dx = [-1.5, 0, 0, 1.5], dy = [-1.5, 0.5, -0.5, 1.5].
    # sum dx dy = 4.5; sum dx^2 = 4.5; sum dy^2 = 5; rho = 4.5 / sqrt(22.5).
    self.assertAlmostEqual(metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]), 4.5 / np.sqrt(22.5))

  def test_spearman_is_one_for_any_increasing_map(self):
    self.assertAlmostEqual(metrics.spearman([0.1, 2.0, 3.5, 4.9], [1, 8, 27, 125]), 1.0)

  @parameterized.named_parameters(
      # Mean of [0.1] * 3 rounds to 0.10000000000000002: a naive formula returns +-1 here.
      ("constant_predictions", [1.0, 2.0, 3.0], [0.1, 0.1, 0.1]),
      ("constant_labels", [2.5, 2.5, 2.5], [1.0, 2.0, 3.0]),
      ("single_example", [3.0], [4.0]),
  )
  def test_correlation_is_zero_not_nan_when_one_side_is_constant(self, labels, predictions):
    self.assertEqual(metrics.pearson(labels, predictions), 0.0)
    self.assertEqual(metrics.spearman(labels, predictions), 0.0)

  @parameterized.parameters(0, 1)
  def test_matches_scipy(self, seed):
    rng = np.random.default_rng(seed)
    labels = np.round(rng.uniform(0, 5, size=100), 1)  # Rounded to create ties.
    predictions = labels + rng.normal(size=100)
    self.assertAlmostEqual(metrics.pearson(labels, predictions),
                        stats.pearsonr(labels, predictions)[0])
    self.assertAlmostEqual(metrics.spearman(labels, predictions),
                        stats.spearmanr(labels, predictions)[0])


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("empty", metrics.accuracy, [], [], "empty"),
      ("empty_scores", metrics.pearson, [], [], "empty"),
      ("lengths_differ", metrics.accuracy, [0, 1], [0], "2 labels but 1 predictions"),
      ("logits", metrics.accuracy, [0, 1], [[0.2, 0.8], [0.9, 0.1]], "np.argmax"),
      ("fractional", metrics.matthews_corrcoef, [0, 1], [0.2, 0.8], "must be class ids"),
      ("not_binary", metrics.f1_score, [0, 2], [0, 1], "binary F1 of class 1"),
      ("nan", metrics.spearman, [1.0, 2.0], [np.nan, 1.0], "NaN"),
      ("strings", metrics.accuracy, ["a"], ["a"], "must be numbers"),
  )
  def test_raises_clear_error(self, metric, labels, predictions, message):
    with self.assertRaisesRegex(ValueError, message):
      metric(labels, predictions)


class ComputeMetricsTest(parameterized.TestCase):

  def test_classification_metrics_in_spec_order(self):
    spec = examples.TaskSpec("mrpc", ("a", "b"), ("no", "yes"), ("f1", "accuracy"))
    result = metrics.compute_metrics(spec, [1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    self.assertEqual(list(result), ["f1", "accuracy"])
    self.assertAlmostEqual(result["f1"], 4 / 6)
    self.assertAlmostEqual(result["accuracy"], 0.6)

  def test_regression_accepts_keras_column_output(self):
    spec = examples.TaskSpec("stsb", ("a", "b"), None, ("spearman", "pearson"))
    result = metrics.compute_metrics(spec, [1, 2, 3, 4], np.array([[2.], [4.], [5.], [9.]]))
    self.assertAlmostEqual(result["spearman"], 1.0)
    self.assertAlmostEqual(result["pearson"], 11 / np.sqrt(130))

  def test_prediction_outside_task_classes(self):
    spec = examples.TaskSpec("sst2", ("sentence",), ("negative", "positive"))
    with self.assertRaisesRegex(ValueError, r"class id 2, outside the 2 classes"):
      metrics.compute_metrics(spec, [0, 1], [0, 2])

  def test_unknown_metric_lists_known_ones(self):
    spec = examples.TaskSpec("x", ("sentence",), ("a", "b"), ("auc",))
    with self.assertRaisesRegex(ValueError, r"unknown metric\(s\) \['auc'\].*matthews_corrcoef"):
      metrics.compute_metrics(spec, [0, 1], [0, 1])


if __name__ == "__main__":
  absltest.main()

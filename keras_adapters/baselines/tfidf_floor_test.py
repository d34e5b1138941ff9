"""Tests for the TF-IDF + logistic regression floor on the toy task."""

import tensorflow as tf

from keras_adapters.baselines import testing
from keras_adapters.baselines import tfidf_floor
from keras_adapters.data import examples as examples_lib


class TfidfFloorTest(tf.test.TestCase):

  def test_chooses_c_on_validation_and_scores_test(self):
    """The floor learns the toy task's class words; C is the best on validation; the row
    reports the test score in percent and the coefficients as parameters."""
    result = tfidf_floor.run_tfidf_floor(testing.TOY_SPEC, testing.toy_splits(40, 20, 20))
    self.assertEqual(set(result["validation"]), {str(c) for c in tfidf_floor.C_VALUES})
    self.assertEqual(result["validation"][str(result["c"])], max(result["validation"].values()))
    self.assertEqual(result["test"]["accuracy"], 1.0)
    row = tfidf_floor.comparison_row(result)
    self.assertEqual((row["method"], row["scores"], row["mean"]),
                     ("tfidf_logreg", [100.0], 100.0))
    # A binary logistic regression: one weight per n-gram feature and one intercept.
    self.assertEqual(row["trainable_parameters"], result["features"] + 1)
    self.assertIn("C=", row["note"])

  def test_refuses_sentence_pairs(self):
    spec = examples_lib.TaskSpec("pairs", ("a", "b"), ("x", "y"))
    with self.assertRaisesRegex(ValueError, "single texts"):
      tfidf_floor.run_tfidf_floor(spec, testing.toy_splits())


if __name__ == "__main__":
  tf.test.main()

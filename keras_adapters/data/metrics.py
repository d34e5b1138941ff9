"""Evaluation metrics for text tasks, computed as the GLUE evaluation server reports them.

scikit-learn and SciPy compute them; this module checks the inputs first, so that a wrong
shape, logits passed as class ids or a NaN score is an error that says what to pass.

Every metric takes the gold `labels` and the model's `predictions` as vectors of equal,
non-zero length: class ids for `accuracy`, `f1` and `matthews_corrcoef`, real-valued scores for
`pearson` and `spearman`. `compute_metrics` scores one split with the metrics a `TaskSpec` names.
"""

from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np
from scipy import stats
from sklearn import metrics as sklearn_metrics

from keras_adapters.data import examples

Metric = Callable[[np.ndarray, np.ndarray], float]


def _as_vector(values, name: str) -> np.ndarray:
  array = np.asarray(values)
  if array.ndim != 1:
    raise ValueError(f"{name} must be a vector (one value per example), got shape {array.shape}.")
  if array.size == 0:
    raise ValueError(f"{name} is empty: a metric needs at least one example.")
  if array.dtype.kind not in "biuf":
    raise ValueError(f"{name} must be numbers, got dtype {array.dtype}.")
  return array


def as_class_ids(values, num_classes: Optional[int] = None, name: str = "predictions"
                ) -> np.ndarray:
  """Checks that `values` are class ids and returns them as an int64 vector.

  Args:
    values: One class id per example: integers, or floats holding whole numbers.
    num_classes: If given, every id must lie in `[0, num_classes)`.
    name: What `values` are, used in error messages.

  Returns:
    The ids as a 1-D int64 array.

  Raises:
    ValueError: `values` are not a non-empty vector of whole numbers in range.
  """
  array = np.asarray(values)
  if array.ndim == 2 and array.shape[1] > 1:
    raise ValueError(
        f"{name} must hold one class id per example, got shape {array.shape}; for logits or "
        "probabilities pass np.argmax(values, axis=-1).")
  array = _as_vector(array, name)
  if array.dtype.kind == "f":
    fractional = array[~np.isfinite(array) | (array != np.round(array))]
    if fractional.size:
      raise ValueError(
          f"{name} must be class ids, got {fractional[0]}; for a regression task use "
          "`pearson`/`spearman`, for probabilities pass np.argmax(values, axis=-1).")
  ids = array.astype(np.int64)
  if num_classes is not None:
    outside = ids[(ids < 0) | (ids >= num_classes)]
    if outside.size:
      raise ValueError(
          f"{name} hold class id {outside[0]}, outside the {num_classes} classes "
          f"[0, {num_classes}).")
  return ids


def as_scores(values, name: str = "predictions") -> np.ndarray:
  """Checks that `values` are finite real scores and returns them as a float64 vector.

  Args:
    values: One score per example. A `[n, 1]` array (a Keras regression head's output) is
      accepted and flattened.
    name: What `values` are, used in error messages.

  Returns:
    The scores as a 1-D float64 array.

  Raises:
    ValueError: `values` are not a non-empty vector of finite numbers.
  """
  array = np.asarray(values)
  if array.ndim == 2 and array.shape[1] == 1:
    array = array[:, 0]
  array = _as_vector(array, name).astype(np.float64)
  if not np.all(np.isfinite(array)):
    raise ValueError(
        f"{name} contain NaN or infinity (at index {np.flatnonzero(~np.isfinite(array))[0]}); "
        "a diverged model or a broken label file gives these.")
  return array


def _same_length(labels: np.ndarray, predictions: np.ndarray) -> None:
  if len(labels) != len(predictions):
    raise ValueError(
        f"Got {len(labels)} labels but {len(predictions)} predictions; give one prediction "
        "per labelled example, in the same order.")


def _class_pair(labels, predictions, num_classes: Optional[int] = None
               ) -> Tuple[np.ndarray, np.ndarray]:
  labels = as_class_ids(labels, num_classes, "labels")
  predictions = as_class_ids(predictions, num_classes, "predictions")
  _same_length(labels, predictions)
  return labels, predictions


def _score_pair(labels, predictions) -> Tuple[np.ndarray, np.ndarray]:
  labels = as_scores(labels, "labels")
  predictions = as_scores(predictions, "predictions")
  _same_length(labels, predictions)
  return labels, predictions


def accuracy(labels, predictions) -> float:
  """Returns the fraction of examples whose predicted class id equals the label."""
  return float(sklearn_metrics.accuracy_score(*_class_pair(labels, predictions)))


def f1_score(labels, predictions) -> float:
  """Returns the binary F1 score of class 1, as GLUE reports it for MRPC and QQP.

  Args:
    labels: Gold class ids, each 0 or 1.
    predictions: Predicted class ids, each 0 or 1.

  Returns:
    `2 tp / (2 tp + fp + fn)`; 0.0 when neither labels nor predictions hold a 1, because
    nothing was found then.
  """
  labels, predictions = _class_pair(labels, predictions)
  both = np.concatenate([labels, predictions])
  not_binary = both[(both != 0) & (both != 1)]
  if not_binary.size:
    raise ValueError(
        f"f1 is the binary F1 of class 1 and needs class ids 0 and 1, got {not_binary[0]}; "
        "score a multi-class task with accuracy or matthews_corrcoef.")
  return float(sklearn_metrics.f1_score(labels, predictions, labels=[0, 1], pos_label=1,
                                        zero_division=0.0))


def matthews_corrcoef(labels, predictions) -> float:
  """Returns the Matthews correlation coefficient, GLUE's metric for CoLA.

  The multi-class form (Gorodkin, 2004), which equals the binary formula for two classes and
  is GLUE's R3 score for the diagnostic set.

  Args:
    labels: Gold class ids.
    predictions: Predicted class ids.

  Returns:
    A value in [-1, 1]; 0.0 when labels or predictions are all one class, where the
    coefficient is 0/0: a constant predictor carries no information.
  """
  labels, predictions = _class_pair(labels, predictions)
  if np.all(labels == labels[0]) or np.all(predictions == predictions[0]):
    return 0.0  # scikit-learn's value too, but it warns when both sides hold one class.
  return float(sklearn_metrics.matthews_corrcoef(labels, predictions))


def _correlation(correlate, labels, predictions) -> float:
  """`correlate(labels, predictions)`'s coefficient; 0.0 when either side is constant."""
  labels, predictions = _score_pair(labels, predictions)
  # Undefined there (SciPy warns and returns NaN): model selection must never see NaN.
  if np.all(labels == labels[0]) or np.all(predictions == predictions[0]):
    return 0.0
  return float(np.clip(correlate(labels, predictions).statistic, -1.0, 1.0))


def pearson(labels, predictions) -> float:
  """Returns Pearson's correlation of scores, reported by GLUE for STS-B.

  Args:
    labels: Gold scores.
    predictions: Predicted scores.

  Returns:
    A value in [-1, 1]; 0.0 when either side is constant, where the correlation is
    undefined, so that model selection never sees NaN.
  """
  return _correlation(stats.pearsonr, labels, predictions)


def spearman(labels, predictions) -> float:
  """Returns Spearman's rank correlation, GLUE's main STS-B metric.

  Args:
    labels: Gold scores.
    predictions: Predicted scores.

  Returns:
    Pearson's correlation of the ranks, ties sharing their average rank; 0.0 when either side
    is constant.
  """
  return _correlation(stats.spearmanr, labels, predictions)


METRICS: Mapping[str, Metric] = {
    "accuracy": accuracy,
    "f1": f1_score,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_metrics(spec: examples.TaskSpec, labels, predictions) -> Dict[str, float]:
  """Scores predictions with every metric of a task.

  Args:
    spec: The task; its `metrics` name entries of `METRICS`.
    labels: Gold labels: class ids, or scores for a regression task.
    predictions: Predicted class ids (not logits), or scores for a regression task (a
      `[n, 1]` regression output is accepted).

  Returns:
    Metric name to value, in the order of `spec.metrics` (the first is the one to select on).

  Raises:
    ValueError: An unknown metric name, or labels and predictions that do not fit the task.
  """
  unknown = [name for name in spec.metrics if name not in METRICS]
  if unknown:
    raise ValueError(
        f"Task {spec.name!r} asks for unknown metric(s) {unknown}; known metrics: "
        f"{', '.join(METRICS)}.")
  if spec.is_regression:
    labels, predictions = _score_pair(labels, predictions)
  else:
    labels, predictions = _class_pair(labels, predictions, spec.num_classes)
  return {name: METRICS[name](labels, predictions) for name in spec.metrics}

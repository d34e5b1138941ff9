"""The floor every method should beat: TF-IDF features and logistic regression (scikit-learn).

Word uni- and bigrams with sublinear TF-IDF weights feed a multinomial logistic regression;
its inverse regularisation strength `C` is chosen on the validation split, then the model is
refit on the training split with it and scored once on the test split.
"""

import time
from typing import Any, Dict, Mapping, Sequence

from sklearn import feature_extraction
from sklearn import linear_model
from sklearn import pipeline

from keras_adapters.data import examples as examples_lib
from keras_adapters.data import metrics as metrics_lib
from keras_adapters.utils import errors

METHOD = "tfidf_logreg"
C_VALUES = (0.1, 1.0, 10.0, 100.0)


def _fit(texts: Sequence[str], labels, c: float, seed: int) -> pipeline.Pipeline:
  model = pipeline.make_pipeline(
      feature_extraction.text.TfidfVectorizer(ngram_range=(1, 2), min_df=2,
                                              sublinear_tf=True),
      linear_model.LogisticRegression(C=c, max_iter=1000, random_state=seed))
  return model.fit(list(texts), labels)


def run_tfidf_floor(spec: examples_lib.TaskSpec,
                    splits: Mapping[str, examples_lib.TextExamples],
                    seed: int = 0) -> Dict[str, Any]:
  """Chooses `C` on validation, scores the chosen model on test.

  Args:
    spec: A classification task with one text field.
    splits: "train", "validation" and "test" examples.
    seed: Seed of the solver.

  Returns:
    `validation` scores per `C`, the chosen `C`, the `test` metrics, the n-gram features, the
    parameter count (coefficients and intercepts), the training examples and the seconds it
    all took.
  """
  if spec.is_regression or len(spec.text_fields) != 1:
    raise errors.UsageError(
        f"The TF-IDF floor classifies single texts; task {spec.name!r} has text fields "
        f"{list(spec.text_fields)} and labels {spec.label_names}.")
  start = time.time()
  train, validation, test = (splits[name] for name in ("train", "validation", "test"))
  metric = spec.metrics[0]

  def score(model, examples):
    return metrics_lib.compute_metrics(spec, examples.labels,
                                       model.predict(list(examples.texts[0])))

  validation_scores = {
      c: score(_fit(train.texts[0], train.labels, c, seed), validation)[metric]
      for c in C_VALUES}
  best_c = max(C_VALUES, key=lambda c: validation_scores[c])
  model = _fit(train.texts[0], train.labels, best_c, seed)
  classifier = model[-1]
  return dict(task=spec.name, metric=metric, validation={str(c): s for c, s in
                                                          validation_scores.items()},
              c=best_c, test=score(model, test), train_examples=len(train),
              features=len(model[0].vocabulary_),
              parameters=int(classifier.coef_.size + classifier.intercept_.size),
              seconds=time.time() - start)


def comparison_row(result: Mapping[str, Any], seed: int = 0) -> Dict[str, Any]:
  """The floor as a row of `method_comparison`'s table (test score in %, one run)."""
  score = 100.0 * result["test"][result["metric"]]
  return dict(method=METHOD, seeds=[seed], scores=[score], mean=score, sem=0.0,
              trainable_parameters=result["parameters"], trainable_percent_of_base=None,
              seconds_per_epoch=None, search_seconds=result["seconds"],
              train_examples=result["train_examples"],
              note=(f"TF-IDF word 1-2-grams + logistic regression (scikit-learn), C={result['c']:g}"
                    f" chosen on validation from {list(C_VALUES)}; trained on "
                    f"{result['train_examples']:,} training examples in "
                    f"{result['seconds']:.0f} s."))

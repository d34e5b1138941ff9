"""Ablation of trained adapters (the paper's Figure 6, left and centre).

Houlsby et al. remove the trained adapters of every contiguous span of layers `[first, last]`
and score the model again, without retraining. Removal is AdapterDrop's path
(`AdaptedBert.drop_adapters`): the blocks keep their trained LayerNorms and lose their two
adapters, so the model computes exactly what one built without adapters there
(`AdapterConfig(leave_out=...)`) with the same other weights computes.
"""

from typing import Callable, Dict, List, Mapping, Optional, Tuple

from keras_adapters.models import adapted_bert

Span = Tuple[int, int]


def layer_spans(num_layers: int) -> List[Span]:
  """Every contiguous span `(first, last)` of layers, inclusive, first layer varying slowest:
  `(0, 0), (0, 1), ..., (L-1, L-1)`, L(L+1)/2 spans."""
  return [(first, last) for first in range(num_layers) for last in range(first, num_layers)]


def the_adapted_bert(model) -> adapted_bert.AdaptedBert:
  """The one `AdaptedBert` inside a task model, or a `ValueError` saying what was found."""
  found = [layer for layer in [model] + list(model.submodules)
           if isinstance(layer, adapted_bert.AdaptedBert)]
  if len(found) != 1:
    raise ValueError(f"The model holds {len(found)} AdaptedBert encoders; removing adapters "
                     "needs exactly one (a build_classifier or load_task_model model).")
  return found[0]


def remove_adapters(model, first: int, last: int) -> None:
  """Removes the trained adapters of layers `first`..`last` (inclusive) of `model`'s encoder.

  Args:
    model: A task model with one `AdaptedBert` (e.g. from `load_task_model`); changed in
      place. Trace a new function afterwards: one traced before still computes the adapters.
    first: The first layer whose adapters go.
    last: The last one, at least `first`.

  Raises:
    ValueError: An empty or reversed span, or layers the encoder does not have.
  """
  if not 0 <= first <= last:
    raise ValueError(f"remove_adapters: first={first}, last={last} is no span of layers; give "
                     "0 <= first <= last.")
  the_adapted_bert(model).drop_adapters(range(first, last + 1))


def evaluate_spans(load_model: Callable[[], object],
                   score: Callable[[object], float],
                   num_layers: int,
                   done: Mapping[str, float],
                   on_result: Callable[[str, float], None]) -> Dict[str, float]:
  """Scores the trained model whole and with each span's adapters removed.

  Args:
    load_model: Builds the trained model afresh (removal changes a model for good).
    score: The model's score on the evaluation split.
    num_layers: Transformer layers of the encoder.
    done: Scores already measured, by `span_key`; they are not measured again.
    on_result: Called with each new key and score, e.g. to record progress.

  Returns:
    Every score by `span_key`: `"none"` for the whole model, `"first-last"` for a span.
  """
  scores = dict(done)
  for span in [None] + layer_spans(num_layers):
    key = span_key(span)
    if key in scores:
      continue
    model = load_model()
    if span is not None:
      remove_adapters(model, *span)
    scores[key] = float(score(model))
    on_result(key, scores[key])
  return scores


def span_key(span: Optional[Span]) -> str:
  """`"none"` for no removal, `"first-last"` for a span: a JSON key."""
  return "none" if span is None else f"{span[0]}-{span[1]}"


def change_matrix(scores: Mapping[str, float], num_layers: int) -> List[List[Optional[float]]]:
  """The heatmap: row `first`, column `last`, the score with that span removed minus the
  whole model's; `None` below the diagonal (no span) and where a span is not scored yet."""
  baseline = scores.get("none")
  return [[None if last < first or baseline is None or span_key((first, last)) not in scores
           else scores[span_key((first, last))] - baseline
           for last in range(num_layers)] for first in range(num_layers)]

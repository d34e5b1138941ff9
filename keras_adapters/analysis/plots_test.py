"""Tests for plots: every study's figure is written as a real, non-empty PNG."""

import os

from absl.testing import parameterized
from matplotlib import image
import tensorflow as tf

from keras_adapters.analysis import ablation
from keras_adapters.analysis import plots

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _point(mean, **values):
  return dict(values, mean=mean, sem=None if mean is None else 0.5, diverged=int(mean is None),
              trainable_parameters=values.pop("parameters", 1000))


def _summary(study, points, **extra):
  return dict(study=study, figure=f"figure of {study}", task="airline", metric="accuracy",
              eval_split="validation", points=points, note="airline: real tweets.",
              budget=dict(train_examples=1000, epochs=[2.0], batch_size=16,
                          eval_examples=1464), **extra)


_SCORES = {ablation.span_key(span): 80.0 - 2 * (span[1] - span[0])
           for span in ablation.layer_spans(3)}
_SUMMARIES = dict(
    ablation=_summary("ablation", [], ablation=dict(num_layers=3,
                                                   scores=dict(_SCORES, none=81.0))),
    init_scale=_summary("init_scale", [_point(80.0 - s, adapter_init_stddev=10.0 ** -s)
                                       for s in range(1, 8)]
                        + [_point(None, adapter_init_stddev=1.0)]),
    tradeoff=_summary("tradeoff", [_point(80.0 + m / 100, method="adapters", adapter_size=m,
                                          parameters=1000 * m) for m in (2, 8, 64)]
                      + [_point(79.0 + k, method="top_k", top_k=k, parameters=10**6 * k)
                         for k in (1, 2)]
                      + [_point(78.0, method="layer_norm", parameters=500),
                         _point(81.0, method="full", parameters=2 * 10**7)]),
    learning_rate=_summary("learning_rate", [
        _point(80.0 - i, method=method, learning_rate=rate)
        for method in ("adapters", "full") for i, rate in enumerate((2e-5, 1e-4, 1e-3))]),
    adapter_drop=_summary("adapter_drop", [_point(82.0 - n, method="adapters",
                                                  lowest_left_out=n) for n in range(5)]))


class PlotsTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters(*_SUMMARIES)
  def test_figure_is_a_png(self, study):
    path = plots.plot_study(_SUMMARIES[study], os.path.join(self.get_temp_dir(), study + ".png"))
    with open(path, "rb") as f:
      data = f.read()
    self.assertTrue(data.startswith(_PNG_SIGNATURE))
    self.assertGreater(len(data), 20_000)
    pixels = image.imread(path)
    self.assertGreater(pixels.shape[0] * pixels.shape[1], 300 * 300)
    self.assertGreater(float(pixels.std()), 0.05)  # Not a blank canvas.

  def test_tradeoff_waits_for_full_fine_tuning(self):
    summary = dict(_SUMMARIES["tradeoff"],
                   points=[p for p in _SUMMARIES["tradeoff"]["points"] if p["method"] != "full"])
    self.assertIsNone(plots.full_mean(summary["points"]))
    path = plots.plot_study(summary, os.path.join(self.get_temp_dir(), "partial.png"))
    self.assertGreater(os.path.getsize(path), 10_000)


if __name__ == "__main__":
  tf.test.main()

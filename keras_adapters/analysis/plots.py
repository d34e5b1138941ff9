"""The studies' figures, drawn like the paper's with matplotlib's Agg backend (no display).

Each takes a study's summary (`studies.summarize`, plus the ablation's spans) and writes a
PNG atomically; the title names the paper's figure it mirrors, the task and the budget.
"""

import io
import math
from typing import Any, Mapping, Optional

from matplotlib.backends import backend_agg
from matplotlib import figure as figure_lib
import numpy as np

from keras_adapters.analysis import ablation
from keras_adapters.analysis import method_comparison
from keras_adapters.utils import atomic_io

# The paper each study's figure mirrors: Houlsby et al.'s, but for the one that followed it.
_PAPER = "Houlsby et al. (2019)"
_PAPERS = dict(adapter_drop="Rücklé et al. (2021)")
_METHOD_STYLES = dict(adapters=("tab:orange", "o", "adapters"),
                      top_k=("tab:blue", "s", "fine-tune top k layers"),
                      layer_norm=("tab:green", "^", "LayerNorm only"),
                      full=("black", "D", "full fine-tuning"),
                      lora=("tab:purple", "v", "LoRA"),
                      ia3=("tab:brown", "P", "(IA)³"))


def plot_study(summary: Mapping[str, Any], path: str) -> str:
  """Draws the figure of `summary["study"]` to `path`; returns `path`."""
  draw = dict(ablation=_ablation, init_scale=_init_scale, tradeoff=_tradeoff,
              learning_rate=_learning_rate, adapter_drop=_adapter_drop)[summary["study"]]
  fig = figure_lib.Figure(figsize=(7.5, 5.5), layout="constrained")
  if summary.get("note"):
    # The constrained layout places the axes inside `rect`, leaving the foot to the note.
    fig.get_layout_engine().set(rect=(0.0, 0.04, 1.0, 0.96))
    fig.text(0.01, 0.005, summary["note"], fontsize=7, ha="left", va="bottom", wrap=True)
  draw(fig, summary)
  budget = summary["budget"]
  fig.suptitle(
      f"{_PAPERS.get(summary['study'], _PAPER)}, {summary['figure']}: {summary['task']}\n"
      f"{budget['train_examples']:,} training examples, "
      f"{'/'.join(f'{e:g}' for e in budget['epochs'])} epoch(s), batch "
      f"{budget['batch_size']}; {summary['eval_split']} {summary['metric']} on "
      f"{budget['eval_examples']:,} examples", fontsize=10)
  buffer = io.BytesIO()
  backend_agg.FigureCanvasAgg(fig).print_png(buffer)
  atomic_io.write_bytes(path, buffer.getvalue())
  return path


def _errorbars(axes, points, x_key, label, style=None):
  """Mean ± s.e.m. of the points that have a mean, against `x_key`."""
  shown = [p for p in points if p["mean"] is not None]
  color, marker, _ = style or ("tab:orange", "o", label)
  axes.errorbar([p[x_key] for p in shown], [p["mean"] for p in shown],
                yerr=[p["sem"] for p in shown], color=color, marker=marker, capsize=3,
                label=label)
  for p in points:
    if p["mean"] is None and p["diverged"]:
      # At the foot of the axes, in data coordinates along x so that the x range covers it.
      axes.plot([p[x_key]], [0.03], marker="x", color=color,
                transform=axes.get_xaxis_transform())
      axes.annotate("diverged", (p[x_key], 0.05), xycoords=("data", "axes fraction"),
                    ha="center", va="bottom", fontsize=7, color=color)


def _init_scale(fig, summary):
  axes = fig.add_subplot()
  _errorbars(axes, summary["points"], "adapter_init_stddev", "adapters")
  axes.set_xscale("log")
  axes.set_xlabel("standard deviation of the adapters' initial weights")
  axes.set_ylabel(f"{summary['eval_split']} {summary['metric']} (%), mean ± s.e.m.")
  axes.set_title("Robustness to the initialisation scale", fontsize=9)
  axes.grid(alpha=0.3)


def _adapter_drop(fig, summary):
  axes = fig.add_subplot()
  _errorbars(axes, summary["points"], "lowest_left_out", "adapters (m=64)")
  axes.set_xticks(sorted({p["lowest_left_out"] for p in summary["points"]}))
  axes.set_xlabel("lowest layers without adapters (frozen below the lowest adapters)")
  axes.set_ylabel(f"{summary['eval_split']} {summary['metric']} (%), mean ± s.e.m.")
  axes.set_title("Accuracy with the adapters dropped from the lowest layers", fontsize=9)
  axes.grid(alpha=0.3)


def _learning_rate(fig, summary):
  axes = fig.add_subplot()
  for method, style in _METHOD_STYLES.items():
    points = [p for p in summary["points"] if p["method"] == method]
    if points:
      _errorbars(axes, points, "learning_rate", style[2], style)
  axes.set_xscale("log")
  axes.set_xlabel("learning rate")
  axes.set_ylabel(f"best {summary['eval_split']} {summary['metric']} (%), mean ± s.e.m.")
  axes.set_title("Robustness to the learning rate", fontsize=9)
  axes.legend()
  axes.grid(alpha=0.3)


def _tradeoff(fig, summary):
  axes = fig.add_subplot()
  full = full_mean(summary["points"])
  for method, (color, marker, label) in _METHOD_STYLES.items():
    points = [p for p in summary["points"] if p["method"] == method and p["mean"] is not None]
    if not points or full is None:
      continue
    points.sort(key=lambda p: p["trainable_parameters"])
    axes.errorbar([p["trainable_parameters"] for p in points],
                  [p["mean"] - full for p in points], yerr=[p["sem"] for p in points],
                  color=color, marker=marker, capsize=3, label=label)
    for p in points:
      for field, letter in method_comparison.SIZE_TAGS:
        if p.get(field):
          axes.annotate(f"{letter}={p[field]}", (p["trainable_parameters"], p["mean"] - full),
                        fontsize=6, textcoords="offset points", xytext=(3, 3))
  axes.axhline(0.0, color="grey", linestyle="--", linewidth=0.8)
  axes.set_xscale("log")
  axes.set_xlabel("trained parameters per task")
  axes.set_ylabel(f"{summary['metric']} minus full fine-tuning's (points)")
  axes.set_title("Accuracy against trained parameters"
                 + ("" if full is not None else " (waiting for full fine-tuning)"), fontsize=9)
  if axes.get_legend_handles_labels()[0]:
    axes.legend(fontsize=8)
  axes.grid(alpha=0.3)


def full_mean(points) -> Optional[float]:
  """Full fine-tuning's mean score, which the trade-off subtracts; `None` before it ran."""
  return next((p["mean"] for p in points if p["method"] == "full"), None)


def _ablation(fig, summary):
  axes = fig.add_subplot()
  spans = summary.get("ablation", {})
  num_layers = spans.get("num_layers", 0)
  changes = ablation.change_matrix(spans.get("scores", {}), num_layers)
  values = np.array([[np.nan if v is None else v for v in row] for row in changes],
                    dtype=float).reshape(num_layers, num_layers)
  finite = values[np.isfinite(values)]
  bound = max(1e-9, float(np.max(np.abs(finite)))) if finite.size else 1.0
  image = axes.imshow(values, cmap="RdYlGn", vmin=-bound, vmax=bound)
  for first in range(num_layers):
    for last in range(num_layers):
      if not math.isnan(values[first, last]):
        axes.text(last, first, f"{values[first, last]:+.1f}", ha="center", va="center",
                  fontsize=8, fontweight="bold" if first == last else "normal")
  axes.set_xticks(range(num_layers))
  axes.set_yticks(range(num_layers))
  axes.set_xlabel("last layer ablated")
  axes.set_ylabel("first layer ablated")
  baseline = spans.get("scores", {}).get("none")
  axes.set_title("Change in accuracy (points) with the trained adapters of layers first..last "
                 "removed" + (f"\n(the whole adapted model: {baseline:.2f}%)"
                              if baseline is not None else ""), fontsize=9)
  fig.colorbar(image, ax=axes, label="points against the whole adapted model")

"""Tiny GLUE files in the exact layout of the GLUE download script, for tests.

Real GLUE data cannot be fetched offline; tests of anything that reads GLUE write a few random
examples per split with `write_tiny_glue` and read them with `glue.read_glue_split`.
"""

import os
from typing import Callable, Dict, Mapping

import numpy as np
import tensorflow as tf

from keras_adapters.data import glue

_ADJECTIVES = ("small", "old", "bright", "quiet", "famous", "local", "strange", "new")
_NOUNS = ("cat", "senator", "river", "company", "novel", "teacher", "storm", "market")
_VERBS = ("praised", "visited", "ignored", "described", "bought", "left", "followed", "saw")
_MNLI_GENRES = ("fiction", "government", "slate", "telephone", "travel")

# Values of the columns no reader uses, from the row number and the row's other values, so
# that every file has all of its official columns.
_Filler = Callable[[int, Mapping[str, str]], str]
_FILLERS: Mapping[str, _Filler] = {
    "source": lambda row, values: "gj04",
    # CoLA's source marks unacceptable sentences with "*".
    "original_label": lambda row, values: "*" if values["label"] == "0" else "",
    "#1 ID": lambda row, values: str(702876 + 2 * row),
    "#2 ID": lambda row, values: str(702877 + 2 * row),
    "qid1": lambda row, values: str(2 * row + 1),
    "qid2": lambda row, values: str(2 * row + 2),
    "genre": lambda row, values: _MNLI_GENRES[row % len(_MNLI_GENRES)],
    "filename": lambda row, values: "MSRvid",
    "year": lambda row, values: "2012test",
    "old_index": lambda row, values: f"{row + 1:04d}",
    "source1": lambda row, values: "none",
    "source2": lambda row, values: "none",
    "promptID": lambda row, values: str(31193 + row),
    "pairID": lambda row, values: f"{31193 + row}{'enc'[row % 3]}",
    "sentence1_binary_parse": lambda row, values: f"( {values['sentence1']} )",
    "sentence2_binary_parse": lambda row, values: f"( {values['sentence2']} )",
    "sentence1_parse": lambda row, values: f"(ROOT (S {values['sentence1']}))",
    "sentence2_parse": lambda row, values: f"(ROOT (S {values['sentence2']}))",
    **{f"label{annotator}": lambda row, values: values["gold_label"]
       for annotator in range(1, 6)},
}


def _sentence(rng: np.random.Generator, question: bool) -> str:
  adjective, noun, other = (rng.choice(words) for words in (_ADJECTIVES, _NOUNS, _NOUNS))
  verb = rng.choice(_VERBS)
  if question:
    return f"Which {other} has the {adjective} {noun} {verb}?"
  return f"The {adjective} {noun} {verb} the {other}."


def _file_labels(layout: glue.GlueLayout, num_examples: int, rng: np.random.Generator):
  if layout.file_labels is None:
    # Include both ends of the STS-B scale.
    scores = np.concatenate([[0.0, 5.0], rng.uniform(0.0, 5.0, size=num_examples - 2)])
    return [f"{score:.3f}" for score in rng.permutation(scores)]
  class_ids = rng.permutation(np.arange(num_examples) % len(layout.file_labels))
  return [layout.file_labels[class_id] for class_id in class_ids]


def write_tiny_glue(data_dir: str, task: str, num_examples: int = 8, seed: int = 0) -> str:
  """Writes every split of a GLUE task in the official layout, with random short examples.

  Labelled splits hold every class (or both ends of the STS-B scale); the second row's first
  text opens a quote it never closes, as real QQP and MNLI rows do.

  Args:
    data_dir: The GLUE data directory; the task folder (e.g. `SST-2/`) is created inside.
    task: A GLUE task name, "ax" included (see `glue.glue_layout`).
    num_examples: Examples per split; at least the number of classes (2 for STS-B).
    seed: Seed of the random sentences and labels.

  Returns:
    The task folder written.

  Raises:
    ValueError: `num_examples` is too small to hold every class.
  """
  layout = glue.glue_layout(task)
  needed = len(layout.file_labels) if layout.file_labels else 2
  if num_examples < needed:
    raise ValueError(
        f"write_tiny_glue needs num_examples >= {needed} to cover every {layout.spec.name} "
        f"label, got {num_examples}.")
  rng = np.random.default_rng(seed)
  folder = os.path.join(data_dir, layout.folder)
  tf.io.gfile.makedirs(folder)  # Local or a URL (`ram://` in tests of remote data).
  for file_name, tsv in layout.files.values():
    labels = _file_labels(layout, num_examples, rng) if tsv.label_column else None
    lines = [("\ufeff" if tsv.bom else "") + "\t".join(tsv.columns)] if tsv.has_header else []
    for row in range(num_examples):
      values: Dict[str, str] = {}
      for column in layout.text_columns:
        values[column] = _sentence(rng, question="question" in column)
      if row == 1:
        values[layout.text_columns[0]] = '"' + values[layout.text_columns[0]]
      if tsv.id_column:
        values[tsv.id_column] = str(row)
      if labels:
        values[tsv.label_column] = labels[row]
      lines.append("\t".join(
          values[column] if column in values else _FILLERS[column](row, values)
          for column in tsv.columns))
    with tf.io.gfile.GFile(os.path.join(folder, file_name), "w") as f:
      f.write("\n".join(lines) + "\n")
  return folder

"""Tiny SNLI 1.0 files in the layout `scripts/setup.sh` installs, for tests.

`write_tiny_snli` writes `<cache>/snli_1.0/snli_1.0_{train_subset,test}.jsonl` with every key
of the official files; point `KERAS_ADAPTERS_CACHE` at `cache` to read them as the built-in
task `snli`.
"""

import json
import os

from keras_adapters.hub import testing
from keras_adapters.data import snli

_LABELS = ("entailment", "neutral", "contradiction")


def _record(caption, label_index, gold_label):
  """One pair of the official format; the hypothesis words depend on the class."""
  premise = " ".join(testing.TINY_WORDS[caption:caption + 4])
  hypothesis = " ".join(testing.TINY_WORDS[caption + 4 + label_index:caption + 7 + label_index])
  return {
      "annotator_labels": [gold_label] * 5, "captionID": f"{caption}.jpg#0",
      "gold_label": gold_label, "pairID": f"{caption}.jpg#0r1{'enc'[label_index]}",
      "sentence1": premise, "sentence1_binary_parse": f"( {premise} )",
      "sentence1_parse": f"(ROOT (S {premise}))", "sentence2": hypothesis,
      "sentence2_binary_parse": f"( {hypothesis} )",
      "sentence2_parse": f"(ROOT (S {hypothesis}))"}


def write_tiny_snli(cache, num_train_captions=10, num_test_captions=4):
  """Writes three pairs per caption, one per class, the last caption's third without a gold
  label ("-"); train captions are numbered from 0, test captions after them.

  Args:
    cache: The cache root; the files go into `<cache>/snli_1.0`.
    num_train_captions: Captions of the training file.
    num_test_captions: Captions of the test file.

  Returns:
    The folder written.
  """
  folder = os.path.join(cache, "snli_1.0")
  os.makedirs(folder, exist_ok=True)
  first_caption = 0
  for name, captions in ((snli.TRAIN_FILE, num_train_captions),
                         (snli.TEST_FILE, num_test_captions)):
    records = [_record(caption, i, label)
               for caption in range(first_caption, first_caption + captions)
               for i, label in enumerate(_LABELS)]
    records[-1] = dict(records[-1], gold_label="-")
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      f.writelines(json.dumps(record) + "\n" for record in records)
    first_caption += captions
  return folder

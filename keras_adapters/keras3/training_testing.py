"""A tiny TF Hub base and preprocessing model that the Keras 3 runner takes, for fast tests.

keras-hub's `BertTokenizer` needs a `[MASK]` token, which the Keras 2 tests' tiny vocabulary
(`hub.testing.save_tiny_vocab`) lacks: this one has it in place of the last tiny word, so
its ids stay within the tiny encoder's (`hub.testing.TINY_CONFIG`) vocabulary.
"""

import functools
import os

from keras_adapters.hub import model_garden_export
from keras_adapters.hub import preprocessing
from keras_adapters.hub import testing as hub_testing

SEQ_LENGTH = 16
_VOCABULARY = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") + hub_testing.TINY_WORDS[:-1]


@functools.lru_cache(maxsize=None)
def tiny_handles():
  """(encoder, preprocessing model) handles of the tiny random TF Hub BERT
  (`hub.testing.TINY_CONFIG`), saved once per test session (or process,
  `hub.testing.built_once`); nothing may write to them."""
  def build(root):
    vocab_file = os.path.join(root, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
      f.write("\n".join(_VOCABULARY) + "\n")
    # The encoder carries the same vocabulary, as a TF Hub BERT carries its own.
    model_garden_export.export_encoder(
        os.path.join(root, "encoder"), bert_config=hub_testing.tiny_bert_config(), seed=0,
        vocab_file=vocab_file, do_lower_case=True)
    preprocessing.build_preprocessing_savedmodel(
        vocab_file, os.path.join(root, "preprocess"), default_seq_length=SEQ_LENGTH)
    return root
  root = hub_testing.built_once(("keras3_tiny_handles", SEQ_LENGTH), build)
  return os.path.join(root, "encoder"), os.path.join(root, "preprocess")

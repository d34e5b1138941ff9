"""The wordpiece tokenizer of a TF Hub BERT preprocessing SavedModel, for the SQuAD pipeline.

`official.nlp.data.squad_lib` tokenizes through an object with the interface of the Model
Garden's `FullTokenizer` (`tokenize(text)` -> wordpiece strings, `convert_tokens_to_ids`).
`PreprocessingTokenizer` provides it on top of the `tokenize` signature of the base model's
own preprocessing SavedModel (ours from `keras_adapters.default_preprocess_handle()`, or one
from TF Hub such as `bert_en_uncased_preprocess`), so the SQuAD features are made with
exactly the tokenization the encoder is served with:

* the vocab is the preprocessing model's vocab asset (`assets/vocab.txt`), which maps the
  ids that `tokenize` returns back to the wordpiece strings `squad_lib` works on;
* lower-casing is not stored in such a SavedModel (neither ours nor TF Hub's records it), so
  it is read off the model's behaviour: it lower-cases if it tokenizes upper-cased vocab
  words exactly as the words themselves. `squad_lib` needs it to map predicted wordpieces
  back onto the original text, and the QA export to build its offset-tracking tokenizer.

Every distinct string is tokenized once, in large batches through the SavedModel
(`prepare`), which is also far faster than tokenizing word by word in Python.
"""

import hashlib
import os
import re
from typing import Dict, Iterable, List, Mapping, Optional

from official.nlp.tools import tokenization
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.hub import compatibility

# Strings per call of the SavedModel's `tokenize`.
_BATCH = 20000
# Whole lower-case vocab words probed to read off lower-casing.
_NUM_PROBE_WORDS = 50
_PROBE_WORD = re.compile(r"[a-z][a-z0-9]*")


class PreprocessingTokenizer:
  """`FullTokenizer`'s interface over a BERT preprocessing SavedModel's `tokenize`.

  Attributes:
    vocab_file: The preprocessing model's vocab asset.
    vocab: Wordpieces in id order.
    do_lower_case: Whether the model lower-cases (and strips accents) before splitting.
    probe_words: Whole lower-case vocab words (up to 50) that showed the lower-casing.
    fingerprint: SHA-256 of the vocab and the lower-casing: what the features depend on.
  """

  def __init__(self, preprocess_handle: str,
               encoder_config: Optional[Mapping[str, int]] = None,
               encoder_tokenizer=None):
    """Loads the preprocessing SavedModel and reads its vocab and lower-casing.

    Args:
      preprocess_handle: TF Hub handle or local path of a BERT preprocessing SavedModel
        with a `tokenize` signature and a wordpiece vocab asset.
      encoder_config: The base encoder's architecture (`read_hub_encoder(...).config`), to
        check that it has an embedding for every token id; `None` skips the check.
      encoder_tokenizer: The encoder's own tokenizer (`read_hub_encoder(...).tokenizer`),
        whose vocabulary and casing the preprocessor must share; `None` skips the check.

    Raises:
      FileNotFoundError: `preprocess_handle` is a path that does not exist.
      ValueError: It is not a BERT preprocessing model for the encoder, has no wordpiece
        vocab asset, or its vocab does not match what its `tokenize` returns.
    """
    self._preprocessor = compatibility.load_preprocessor(preprocess_handle)
    compatibility.check_preprocessor(self._preprocessor, encoder_config,
                                     encoder_tokenizer=encoder_tokenizer,
                                     handle=os.fspath(preprocess_handle))
    path = hub.resolve(os.fspath(preprocess_handle))
    self.vocab_file = find_vocab_asset(path)
    self._ids = dict(tokenization.load_vocab(self.vocab_file))
    self.vocab = list(self._ids)
    self._cache: Dict[str, List[str]] = {}
    self.probe_words = [token for token in self.vocab
                        if _PROBE_WORD.fullmatch(token)][:_NUM_PROBE_WORDS]
    self.do_lower_case = self._reads_lower_case(path)
    with open(self.vocab_file, "rb") as f:
      digest = hashlib.sha256(f.read())
    digest.update(f"lower_case={self.do_lower_case}".encode())
    self.fingerprint = digest.hexdigest()

  def prepare(self, texts: Iterable[str]) -> None:
    """Tokenizes every new string of `texts` in batches, for `tokenize` to look up."""
    new = [text for text in dict.fromkeys(texts) if text not in self._cache]
    for start in range(0, len(new), _BATCH):
      batch = new[start:start + _BATCH]
      for text, ids in zip(batch, self.token_ids(batch)):
        self._cache[text] = [self.vocab[i] for i in ids]

  def tokenize(self, text: str) -> List[str]:
    """The wordpieces of `text` (the cached list: do not modify it)."""
    if text not in self._cache:
      self.prepare([text])
    return self._cache[text]

  def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
    return [self._ids[token] for token in tokens]

  def token_ids(self, texts: List[str]) -> List[List[int]]:
    """The wordpiece ids of each of `texts`, straight from the SavedModel."""
    tokens = self._preprocessor.tokenize(tf.constant(texts, tf.string))
    # [batch, (words), (wordpieces)] -> [batch, (wordpieces)].
    return tokens.merge_dims(1, 2).to_list()

  def _reads_lower_case(self, path: str) -> bool:
    """Whether the model tokenizes upper-cased vocab words as the words themselves.

    Also checks that the vocab asset is the one `tokenize` uses: each probed whole word must
    come back as its own id.
    """
    words = self.probe_words
    if not words:
      raise ValueError(f"The vocab {self.vocab_file} has no lower-case whole words, so "
                       "whether the preprocessing model lower-cases cannot be told; a BERT "
                       "wordpiece vocab has thousands.")
    as_is = self.token_ids(words)
    if as_is != [[self._ids[word]] for word in words]:
      raise ValueError(f"The vocab asset {self.vocab_file} does not match what the "
                       f"preprocessing model at {path!r} returns: its `tokenize` maps vocab "
                       "words to other ids. Pass a preprocessing model with its own vocab.")
    return self.token_ids([word.upper() for word in words]) == as_is


def find_vocab_asset(savedmodel_dir: str) -> str:
  """The wordpiece vocab file among a preprocessing SavedModel's assets.

  Args:
    savedmodel_dir: Local folder of the SavedModel.

  Returns:
    `assets/vocab.txt`, or the only `.txt` asset.

  Raises:
    ValueError: No single vocab file is found; the message lists the assets.
  """
  assets = os.path.join(savedmodel_dir, "assets")
  names = sorted(os.listdir(assets)) if os.path.isdir(assets) else []
  texts = [name for name in names if name.endswith(".txt")]
  if "vocab.txt" in texts:
    return os.path.join(assets, "vocab.txt")
  if len(texts) == 1:
    return os.path.join(assets, texts[0])
  raise ValueError(
      f"The preprocessing SavedModel at {savedmodel_dir!r} has no single wordpiece vocab "
      f"among its assets ({', '.join(names) or 'none'}). SQuAD needs a BERT wordpiece "
      "preprocessing model, such as TF Hub's bert_en_uncased_preprocess or "
      "keras_adapters.default_preprocess_handle().")

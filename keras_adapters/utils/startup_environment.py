"""What a command line of this project sets in its environment before TensorFlow loads.

TensorFlow reads its C++ log level, and Keras 3 (which TensorFlow loads) its backend, once, as
they load: so a command line (`keras_adapters.cli.cli`) sets both from its arguments alone,
before absl parses the flags and before TensorFlow is imported; and the tests' warm Python
(`warm_python`) forks such a command line from a server that loaded TensorFlow with the same
values.
"""

import importlib.util

BACKENDS = ("tensorflow", "jax")  # Keras 3's backends that the Keras 3 runs take.


def set_before_tensorflow(argv, environ):
  """The variables a command line run with `argv` (its `sys.argv`) adds to `environ` before
  TensorFlow loads: `TF_CPP_MIN_LOG_LEVEL=3` where unset, unless `--verbose` (the C++ start-up
  lines, CUDA probing on a machine without GPUs and CPU features, say nothing a user acts on);
  `KERAS_BACKEND` from `--backend` when that backend is installed (otherwise the command line
  refuses it in one line once its flags are parsed)."""
  added = {}
  if "--verbose" not in argv and "TF_CPP_MIN_LOG_LEVEL" not in environ:
    added["TF_CPP_MIN_LOG_LEVEL"] = "3"
  backend = _backend_in_argv(argv)
  if backend in BACKENDS and importlib.util.find_spec(backend) is not None:
    added["KERAS_BACKEND"] = backend
  return added


def _backend_in_argv(argv):
  """The value of `--backend=<b>` or `--backend <b>` in `argv`, the last given; else None."""
  found = None
  for index, argument in enumerate(argv):
    if argument.startswith("--backend="):
      found = argument.split("=", 1)[1]
    elif argument == "--backend" and index + 1 < len(argv):
      found = argv[index + 1]
  return found

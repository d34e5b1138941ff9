"""`python experiments/run_automl.py` runs `keras_adapters.cli.run_automl`, the command line
installed as `keras-adapters-automl`.

Imported (`from experiments import run_automl`), this is that module itself: its flags are
defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_automl

if __name__ == "__main__":
  run_automl.run()
else:
  sys.modules[__name__] = run_automl

"""`python experiments/run_classification.py` runs `keras_adapters.cli.run_classification`, the
command line installed as `keras-adapters-classify`.

Imported (`from experiments import run_classification`), this is that module itself: its flags
are defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_classification

if __name__ == "__main__":
  run_classification.run()
else:
  sys.modules[__name__] = run_classification

"""`python experiments/run_analysis.py` runs `keras_adapters.cli.run_analysis`, the command line
installed as `keras-adapters-analysis`.

Imported (`from experiments import run_analysis`), this is that module itself: its flags are
defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_analysis

if __name__ == "__main__":
  run_analysis.run()
else:
  sys.modules[__name__] = run_analysis

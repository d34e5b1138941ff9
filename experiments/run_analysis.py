"""`python experiments/run_analysis.py`: the repository's way to run `keras-adapters-analysis`,
whose code is `keras_adapters.cli.run_analysis`.

Imported (`from experiments import run_analysis`), this is that module itself: its flags are defined
once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_analysis

if __name__ == "__main__":
  run_analysis.run()
else:
  sys.modules[__name__] = run_analysis

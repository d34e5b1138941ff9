"""`python experiments/run_glue.py` runs `keras_adapters.cli.run_glue`, the command line installed
as `keras-adapters-glue`.

Imported (`from experiments import run_glue`), this is that module itself: its flags are defined
once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_glue

if __name__ == "__main__":
  run_glue.run()
else:
  sys.modules[__name__] = run_glue

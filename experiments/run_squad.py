"""`python experiments/run_squad.py` runs `keras_adapters.cli.run_squad`, the command line
installed as `keras-adapters-squad`.

Imported (`from experiments import run_squad`), this is that module itself: its flags are
defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import run_squad

if __name__ == "__main__":
  run_squad.run()
else:
  sys.modules[__name__] = run_squad

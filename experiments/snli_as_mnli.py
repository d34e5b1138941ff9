"""`python experiments/snli_as_mnli.py` runs `keras_adapters.cli.snli_as_mnli`, the command line
installed as `keras-adapters-snli-as-mnli`.

Imported (`from experiments import snli_as_mnli`), this is that module itself: its flags are
defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import snli_as_mnli

if __name__ == "__main__":
  snli_as_mnli.run()
else:
  sys.modules[__name__] = snli_as_mnli

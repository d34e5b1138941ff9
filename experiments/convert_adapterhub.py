"""`python experiments/convert_adapterhub.py` runs `keras_adapters.cli.convert_adapterhub`, the
command line installed as `keras-adapters-convert`.

Imported (`from experiments import convert_adapterhub`), this is that module itself: its flags
are defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import convert_adapterhub

if __name__ == "__main__":
  convert_adapterhub.run()
else:
  sys.modules[__name__] = convert_adapterhub

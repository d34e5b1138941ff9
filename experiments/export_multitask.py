"""`python experiments/export_multitask.py` runs `keras_adapters.cli.export_multitask`, the command
line installed as `keras-adapters-export-multitask`.

Imported (`from experiments import export_multitask`), this is that module itself: its flags are
defined once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import export_multitask

if __name__ == "__main__":
  export_multitask.run()
else:
  sys.modules[__name__] = export_multitask

"""`python experiments/export_multitask.py`: the repository's way to run `keras-adapters-export-multitask`,
whose code is `keras_adapters.cli.export_multitask`.

Imported (`from experiments import export_multitask`), this is that module itself: its flags are defined
once, and what a caller patches here is what runs.
"""

import sys

from keras_adapters.cli import export_multitask

if __name__ == "__main__":
  export_multitask.run()
else:
  sys.modules[__name__] = export_multitask

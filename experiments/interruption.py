"""`from experiments import interruption` is `keras_adapters.cli.interruption`, where the code
moved: the module itself, so that its flags are defined once and what a caller patches is what
runs."""

import sys

from keras_adapters.cli import interruption

sys.modules[__name__] = interruption

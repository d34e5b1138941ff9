"""`from experiments import common_flags` is `keras_adapters.cli.common_flags`, where the code
moved: the module itself, so that its flags are defined once and what a caller patches is what
runs."""

import sys

from keras_adapters.cli import common_flags

sys.modules[__name__] = common_flags

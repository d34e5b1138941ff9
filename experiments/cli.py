"""`from experiments import cli` is `keras_adapters.cli.cli`, where the code moved: the module
itself, so that its flags are defined once and what a caller patches is what runs."""

import sys

from keras_adapters.cli import cli

sys.modules[__name__] = cli

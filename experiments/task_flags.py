"""`from experiments import task_flags` is `keras_adapters.cli.task_flags`, where the code moved:
the module itself, so that its flags are defined once and what a caller patches is what runs."""

import sys

from keras_adapters.cli import task_flags

sys.modules[__name__] = task_flags

"""`AdapterConfig` and the checks of an adapter set's config, here since before they moved
to `keras_adapters.methods` (`methods/adapters/config.py`, `methods/set_config.py`)."""

# pylint: disable=unused-import
from keras_adapters import methods  # Registers them.
from keras_adapters.methods.adapters.config import AdapterConfig
from keras_adapters.methods.set_config import check_set_config
from keras_adapters.methods.set_config import config_from_dict

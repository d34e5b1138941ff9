"""Parameter-efficient methods that change a block's frozen projections, one folder each.

Each method's folder holds its config (a dataclass of settings), its definition (its weights,
computation and merge rule, in plain Python over an ops namespace: `tf` or `keras.ops`) and
its Keras 2 layer (a `ProjectionDelta` that computes with the definition), and registers them
under the method's name (`registry.register`); the encoder, `AdaptedBert`, the artifacts, the
command line and `keras_adapters.keras3` find a method only through the registry. Importing
this package registers every method and loads no Keras: a folder's `__init__` imports its
config and definition only, and names its layer by its dotted path.
"""

# pylint: disable=unused-import
from keras_adapters.methods import ia3
from keras_adapters.methods import lora

"""Parameter-efficient methods that change a block's frozen projections, one folder each.

Each method's folder holds its config (a dataclass of settings) and its layer (a
`ProjectionDelta`), and registers both under the method's name (`registry.register`); the
encoder, `AdaptedBert`, the artifacts and the command line find a method only through the
registry. Importing this package registers every method.
"""

# pylint: disable=unused-import
from keras_adapters.methods import ia3
from keras_adapters.methods import lora

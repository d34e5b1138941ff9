"""Parameter-efficient methods, one folder each: the bottleneck adapters, LoRA (with DoRA),
(IA)³.

Each method's folder holds its config (a dataclass of settings whose `method` attribute is
the method's name) and what computes it: for a method that changes a block's frozen
projections, its definition (its weights, computation and merge rule, in plain Python over an
ops namespace: `tf` or `keras.ops`) and its Keras 2 layer (a `ProjectionDelta` that computes
with the definition). Its `__init__` registers them (`registry.register`); the encoder,
`AdaptedBert`, the artifacts, the config tree and its flags, the comparisons and
`keras_adapters.keras3` find a method only through the registry. Importing this package
registers every method and loads no Keras: a folder's `__init__` imports its config and
definition only, and names its layer by its dotted path.
"""

# pylint: disable=unused-import
# In the order of their sections in the config tree and of the comparison's methods.
from keras_adapters.methods import adapters
from keras_adapters.methods import lora
from keras_adapters.methods import ia3

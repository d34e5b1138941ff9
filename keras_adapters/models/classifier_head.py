"""The classification head of both Keras stacks, on a pooled encoder output.

`keras_adapters.build_classifier` (Keras 2, `tf_keras`) and `keras_adapters.keras3.
build_classifier` (Keras 3, `keras`) build it with their own Keras module, passed in: the same
layers under the same names, so that an adapter artifact's head tensors (`head/0/kernel`, ...)
load into either. This module imports no Keras, so that the Keras 3 face loads no Keras 2.
"""

import dataclasses
import numbers
from typing import Optional, Tuple

from keras_adapters.utils import errors

# What a head reads: `pooled_output` (BERT's pooler), the mean of `sequence_output` over real
# tokens, or the first token's `sequence_output`.
POOLINGS = ("cls", "mean", "first_token")


@dataclasses.dataclass(frozen=True)
class HeadConfig:
  """What `build_classifier` put on the encoder, as recorded in an adapter artifact.

  Attributes:
    num_classes: Logits of the head; 1 for a regression task (one score).
    pooling: `"cls"`, `"mean"` or `"first_token"` (see `build_classifier`).
    dropout_rate: Dropout before each of the head's dense layers while training.
    label_names: Class names in logit order, once known (`save_adapters(label_names=...)`).
    kind: The head's kind, `"classifier"`.
    hidden_layers: Dense layers of the hidden size before the logits (AdapterHub's
      classification heads have `layers - 1` of them).
    hidden_activation: Their activation.
  """
  num_classes: int
  pooling: str = "cls"
  dropout_rate: float = 0.1
  label_names: Optional[Tuple[str, ...]] = None
  kind: str = "classifier"
  hidden_layers: int = 0
  hidden_activation: str = "tanh"


def check_head(num_classes, pooling, hidden_layers):
  """Refuses a head that cannot be built, before any layer is made.

  Raises:
    errors.UsageError: `num_classes` is not a positive integer, `pooling` not one of
      `POOLINGS`, or `hidden_layers` not an integer >= 0.
  """
  if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or (
      num_classes < 1):
    raise errors.UsageError(
        f"num_classes={num_classes!r}: give the number of classes (at least 2), or 1 for a "
        "regression task's single score.")
  if pooling not in POOLINGS:
    raise errors.UsageError(f"Unknown pooling {pooling!r}; choose one of {list(POOLINGS)}.")
  if isinstance(hidden_layers, bool) or not isinstance(hidden_layers, int) or hidden_layers < 0:
    raise errors.UsageError(f"hidden_layers={hidden_layers!r}: give a number of layers >= 0.")


def pool(outputs, pooling, mean):
  """The representation the head reads from an encoder's output dict, by `pooling`.

  Args:
    outputs: The encoder's outputs: `pooled_output` and `sequence_output`.
    pooling: One of `POOLINGS`.
    mean: Maps `sequence_output` to its mean over real tokens, in the caller's stack (the
      padding mask is the caller's input).
  """
  if pooling == "cls":
    return outputs["pooled_output"]
  if pooling == "first_token":
    return outputs["sequence_output"][:, 0]
  return mean(outputs["sequence_output"])


def logits(keras, pooled, num_classes, dropout_rate, hidden_layers, hidden_activation):
  """Dropout + dense layers from `pooled` to the logits `[batch, num_classes]`.

  Args:
    keras: The Keras module of the caller's stack, `tf_keras` or `keras`.
    pooled: The pooled encoder output, `[batch, hidden size]`.
    num_classes: Logits; 1 for a regression task's score.
    dropout_rate: Dropout before each dense layer while training.
    hidden_layers: Dropout + dense (hidden size) + `hidden_activation` layers before the
      logits' dropout + dense, as AdapterHub's classification heads of `layers=2` have one.
    hidden_activation: Their activation, a Keras activation name.
  """
  for index in range(hidden_layers):
    pooled = keras.layers.Dropout(dropout_rate, name=f"head_dropout_{index}")(pooled)
    pooled = keras.layers.Dense(
        pooled.shape[-1], activation=hidden_activation, name=f"head_hidden_{index}",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02))(pooled)
  pooled = keras.layers.Dropout(dropout_rate, name="head_dropout")(pooled)
  # In float32 under mixed precision too, as the Model Garden's heads: the softmax and loss on
  # them need float32, and exports serve them.
  return keras.layers.Dense(
      num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      dtype="float32", name="logits")(pooled)

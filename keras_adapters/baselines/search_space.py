"""The search space of the paper's "no BERT" AutoML baseline (Houlsby et al. 2019, Table 5).

All 21 knobs, as keras-tuner hyperparameters (their names below); a trial's values become one
`TrialConfig`, from which `deep_and_wide.build_classifier` builds the model.

| #  | Table 5                             | options                               | name |
|----|-------------------------------------|---------------------------------------|------|
| 1  | input embedding module              | `embeddings` (Table 6 stand-ins)      | embedding |
| 2  | fine-tune the embedding module      | T/F                                   | fine_tune_embedding |
| 3  | lowercase the text                  | T/F                                   | lower_case |
| 4  | remove non-alphanumeric text        | T/F                                   | remove_non_alphanumeric |
| 5  | use convolution                     | T/F                                   | use_convolution |
| 6  | convolution activation              | relu, relu6, leaky relu, swish, sigmoid, tanh | conv_activation |
| 7  | convolution batch norm              | T/F                                   | conv_batch_norm |
| 8  | convolution max n-gram length       | {2, 3}                                | conv_max_ngram |
| 9  | convolution dropout                 | [0.0, 0.4]                            | conv_dropout |
| 10 | convolution number of filters       | [50, 200]                             | conv_filters |
| 11 | convolution embedding dropout       | [0.0, 0.4]                            | conv_embedding_dropout |
| 12 | number of hidden layers             | {0, 1, 2, 3, 5}                       | num_hidden_layers |
| 13 | hidden layer size                   | {64, 128, 256}                        | hidden_size |
| 14 | hidden layer activation             | as #6                                 | hidden_activation |
| 15 | hidden layer normalization          | none, batch norm, layer norm          | hidden_normalization |
| 16 | hidden layer dropout                | {0, .05, .1, .2, .3, .4, .5}          | hidden_dropout |
| 17 | deep-tower learning rate            | {.001, .005, .01, .05, .1, .5}        | deep_learning_rate |
| 18 | deep-tower regularization weight    | {0, 1e-4, 1e-3, 1e-2}                 | deep_regularization |
| 19 | wide-tower learning rate            | as #17                                | wide_learning_rate |
| 20 | wide-tower regularization weight    | as #18                                | wide_regularization |
| 21 | number of training samples          | {1e5, 2e5, 5e5, 1e6, 2e6}             | training_fraction |

Knobs 6-11 apply only with the convolution, and the convolution only to an embedding with
per-token outputs (`embeddings.has_token_outputs`); knobs 13-16 only with hidden layers. An
inactive knob is `None` in the `TrialConfig`.

Knob 21 is rescaled: the paper's absolute sample counts would be 9 to 2,000 passes over a
small training set. Here the largest count is a cap relative to the training set,
`max_epochs` passes over it, and the others keep the paper's ratios: the choices are the
fractions 0.05, 0.1, 0.25, 0.5 and 1 of that cap (1, 2, 5, 10 and 20 epochs for the default
cap of 20, which is close to the 2e5 samples the paper chose for airline's 11,712 examples).
"""

import dataclasses
from typing import Optional, Sequence

import keras_tuner

from keras_adapters.baselines import activations
from keras_adapters.baselines import embeddings as embeddings_lib
from keras_adapters.utils import errors

PAPER_TRAINING_SAMPLES = (100_000, 200_000, 500_000, 1_000_000, 2_000_000)
TRAINING_FRACTIONS = tuple(n / PAPER_TRAINING_SAMPLES[-1] for n in PAPER_TRAINING_SAMPLES)
NGRAM_LENGTHS = (2, 3)
HIDDEN_LAYERS = (0, 1, 2, 3, 5)
HIDDEN_SIZES = (64, 128, 256)
NORMALIZATIONS = ("none", "batch_norm", "layer_norm")
HIDDEN_DROPOUTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
LEARNING_RATES = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5)
REGULARIZATION_WEIGHTS = (0.0, 1e-4, 1e-3, 1e-2)
DEFAULT_MAX_EPOCHS = 20.0
_CONV_FIELDS = ("conv_activation", "conv_batch_norm", "conv_max_ngram", "conv_dropout",
                "conv_filters", "conv_embedding_dropout")


@dataclasses.dataclass(frozen=True)
class TrialConfig:
  """One point of the search space; fields are the hyperparameter names of the table.

  `train_epochs` is knob 21 in passes over the training set.
  """
  embedding: str
  fine_tune_embedding: bool
  lower_case: bool
  remove_non_alphanumeric: bool
  use_convolution: bool
  conv_activation: Optional[str]
  conv_batch_norm: Optional[bool]
  conv_max_ngram: Optional[int]
  conv_dropout: Optional[float]
  conv_filters: Optional[int]
  conv_embedding_dropout: Optional[float]
  num_hidden_layers: int
  hidden_size: Optional[int]
  hidden_activation: Optional[str]
  hidden_normalization: Optional[str]
  hidden_dropout: Optional[float]
  deep_learning_rate: float
  deep_regularization: float
  wide_learning_rate: float
  wide_regularization: float
  train_epochs: float


class SearchSpace(keras_tuner.HyperModel):
  """Table 5 as a keras-tuner HyperModel whose `build` returns a `TrialConfig`.

  Building a configuration is cheap (no model), so keras-tuner can call it freely to
  discover the conditional knobs; the tuner builds the model from the configuration.
  """

  def __init__(self, embeddings: Sequence[str] = embeddings_lib.DEFAULT_EMBEDDINGS,
               max_epochs: float = DEFAULT_MAX_EPOCHS):
    """Sets the embeddings to choose from and the cap of knob 21.

    Args:
      embeddings: Names from `embeddings.EMBEDDINGS` or TF Hub handles (knob 1).
      max_epochs: Passes over the training set of the longest training (knob 21).

    Raises:
      ValueError: If `embeddings` is empty or repeats one, or `max_epochs` is not positive.
    """
    super().__init__(name="no_bert_search_space")
    if not embeddings or len(set(embeddings)) != len(embeddings):
      raise errors.UsageError(
          f"embeddings= must name distinct modules, got {list(embeddings)}.")
    if not max_epochs > 0:
      raise errors.UsageError(f"max_epochs= must be positive, got {max_epochs}.")
    self.embeddings = tuple(embeddings)
    self.max_epochs = float(max_epochs)

  def build(self, hp: keras_tuner.HyperParameters) -> TrialConfig:
    names = list(activations.ACTIVATIONS)
    embedding = hp.Choice("embedding", self.embeddings)
    # Inactive knobs (keras-tuner returns None for them) stay None in the configuration.
    use_convolution = None
    conv = dict.fromkeys(_CONV_FIELDS)
    with_tokens = [e for e in self.embeddings if embeddings_lib.has_token_outputs(e)]
    if with_tokens:
      with hp.conditional_scope("embedding", with_tokens):
        use_convolution = hp.Boolean("use_convolution")
        with hp.conditional_scope("use_convolution", [True]):
          conv = dict(
              conv_activation=hp.Choice("conv_activation", names),
              conv_batch_norm=hp.Boolean("conv_batch_norm"),
              conv_max_ngram=hp.Choice("conv_max_ngram", NGRAM_LENGTHS),
              conv_dropout=hp.Float("conv_dropout", 0.0, 0.4),
              conv_filters=hp.Int("conv_filters", 50, 200),
              conv_embedding_dropout=hp.Float("conv_embedding_dropout", 0.0, 0.4))
    num_hidden_layers = hp.Choice("num_hidden_layers", HIDDEN_LAYERS)
    with hp.conditional_scope("num_hidden_layers", [n for n in HIDDEN_LAYERS if n]):
      hidden = dict(
          hidden_size=hp.Choice("hidden_size", HIDDEN_SIZES),
          hidden_activation=hp.Choice("hidden_activation", names),
          hidden_normalization=hp.Choice("hidden_normalization", NORMALIZATIONS),
          hidden_dropout=hp.Choice("hidden_dropout", HIDDEN_DROPOUTS))
    return TrialConfig(
        embedding=embedding,
        fine_tune_embedding=hp.Boolean("fine_tune_embedding"),
        lower_case=hp.Boolean("lower_case"),
        remove_non_alphanumeric=hp.Boolean("remove_non_alphanumeric"),
        use_convolution=bool(use_convolution),
        **conv,
        num_hidden_layers=num_hidden_layers,
        **hidden,
        deep_learning_rate=hp.Choice("deep_learning_rate", LEARNING_RATES),
        deep_regularization=hp.Choice("deep_regularization", REGULARIZATION_WEIGHTS),
        wide_learning_rate=hp.Choice("wide_learning_rate", LEARNING_RATES),
        wide_regularization=hp.Choice("wide_regularization", REGULARIZATION_WEIGHTS),
        train_epochs=hp.Choice("training_fraction", TRAINING_FRACTIONS) * self.max_epochs)

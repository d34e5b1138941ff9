"""Task artifacts with random "trained" weights, for tests and benchmarks: on the tiny test
encoders they make fast tests; sizes and speed do not depend on the values."""

import numpy as np
import tf_keras as keras

from keras_adapters.hub import adapter_artifact
from keras_adapters.models import adapted_bert
from keras_adapters.models import adapter_config as adapter_config_lib
from keras_adapters.models import classifier
from keras_adapters.models import saving


def save_random_task_artifact(directory, hub_handle, preprocess_handle, *, num_classes=3,
                              text_fields=("text",), seq_length=12, pooling="mean",
                              adapter_config=None, label_names=None, seed=0):
  """Saves the artifact of a `build_classifier` task whose trained weights are random.

  Every weight the task trains is moved well away from its initial value (as training
  would), so tasks differ from each other and from the base.

  Args:
    directory: Artifact folder to write.
    hub_handle: Base encoder, e.g. `keras_adapters.hub.testing.tiny_hub_handle()`.
    preprocess_handle: Matching preprocessing, e.g. `tiny_preprocess_handle()`.
    num_classes: Classes of the head; 1 for a regression task.
    text_fields: The task's text inputs.
    seq_length: The task's packed length.
    pooling: Head pooling, `"cls"` or `"mean"`.
    adapter_config: The task's `AdapterConfig` (default m=4).
    label_names: Class names; default `class0`, `class1`, ... (none for regression).
    seed: Seed of the initial and the "trained" weights.

  Returns:
    `directory`.
  """
  keras.utils.set_random_seed(seed)
  bert = adapted_bert.AdaptedBert(
      hub_handle,
      adapter_config=adapter_config or adapter_config_lib.AdapterConfig(adapter_size=4))
  model = classifier.build_classifier(bert, num_classes, pooling=pooling)
  rng = np.random.default_rng(seed)
  for variable in model.trainable_variables:
    variable.assign(variable + rng.normal(scale=0.3, size=variable.shape))
  return saving.save_adapters(
      model, directory,
      label_names=label_names or (
          None if num_classes == 1 else [f"class{i}" for i in range(num_classes)]),
      preprocessing=adapter_artifact.PreprocessingConfig(preprocess_handle, text_fields,
                                                         seq_length))

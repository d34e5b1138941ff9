"""keras_adapters: Houlsby bottleneck adapters for frozen TF Hub BERT encoders."""

import os

# TF Hub and tf_keras are Keras 2 only: pick Keras 2 before TensorFlow resolves `tf.keras`.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

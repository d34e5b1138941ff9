"""The head both Keras stacks build: its refusals, and the same layers from either Keras."""

from absl.testing import parameterized
import keras
import tensorflow as tf
import tf_keras

from keras_adapters.models import classifier_head
from keras_adapters.utils import errors


def _head_layers(keras_module, hidden_layers):
  """(name, weight shapes) of each layer of the head on an 8-wide pooled input."""
  pooled = keras_module.Input(shape=(8,))
  logits = classifier_head.logits(keras_module, pooled, 3, 0.1, hidden_layers, "tanh")
  model = keras_module.Model(pooled, logits)
  return [(layer.name, [tuple(weight.shape) for weight in layer.weights])
          for layer in model.layers[1:]], logits.dtype


class ClassifierHeadTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0, 1)
  def test_both_stacks_build_the_same_layers(self, hidden_layers):
    layers_2, dtype_2 = _head_layers(tf_keras, hidden_layers)
    layers_3, dtype_3 = _head_layers(keras, hidden_layers)
    self.assertEqual(layers_2, layers_3)
    self.assertEqual([name for name, _ in layers_2],
                     [f"head_{kind}_0" for kind in ("dropout", "hidden")] * hidden_layers
                     + ["head_dropout", "logits"])
    self.assertEqual(layers_2[-1][1], [(8, 3), (3,)])
    self.assertEqual((tf.as_dtype(dtype_2), tf.as_dtype(dtype_3)), (tf.float32, tf.float32))

  @parameterized.parameters(
      (0, "cls", 0, "num_classes=0: give the number of classes"),
      (True, "cls", 0, "num_classes=True"),
      (2, "max", 0, r"Unknown pooling 'max'; choose one of \['cls', 'mean', 'first_token'\]"),
      (2, "cls", -1, "hidden_layers=-1: give a number of layers >= 0"))
  def test_refuses_a_head_that_cannot_be_built(self, num_classes, pooling, hidden_layers,
                                               message):
    with self.assertRaisesRegex(errors.UsageError, message):
      classifier_head.check_head(num_classes, pooling, hidden_layers)

  def test_pools_by_name(self):
    outputs = dict(pooled_output="pooler", sequence_output=tf.reshape(tf.range(6), [1, 3, 2]))
    self.assertEqual(classifier_head.pool(outputs, "cls", None), "pooler")
    self.assertAllEqual(classifier_head.pool(outputs, "first_token", None), [[0, 1]])
    self.assertEqual(classifier_head.pool(outputs, "mean", lambda sequence: "mean"), "mean")


if __name__ == "__main__":
  tf.test.main()

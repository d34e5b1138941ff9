"""Tests for build_classifier: encoder + dropout + dense head."""


from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.utils import precision


def _batch():
  mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
  ids = tf.constant([[2, 5, 9, 11, 3], [2, 7, 3, 0, 0]])
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=tf.zeros_like(ids))


class BuildClassifierTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(3)

  def _encoder(self):
    # No dropout inside the encoder, so only the head's dropout can make calls differ.
    return adapted_bert.AdaptedBert(self.handle, adapter_size=4, dropout_rate=0.0,
                                    attention_dropout_rate=0.0)

  @parameterized.named_parameters(("three_classes", 3), ("regression", 1))
  def test_output_shape(self, num_classes):
    """Logits are [batch, num_classes]: 3 for classification, 1 for regression."""
    model = classifier.build_classifier(self._encoder(), num_classes)
    self.assertIsInstance(model, keras.Model)
    self.assertCountEqual(model.input, adapted_bert_encoder.INPUT_KEYS)
    self.assertEqual(model.output_shape, (None, num_classes))
    logits = model(_batch())
    self.assertEqual(logits.shape, tf.TensorShape([2, num_classes]))
    self.assertEqual(model.get_layer("logits").kernel.shape, (16, num_classes))

  def test_logits_are_dense_on_pooled_output_at_inference(self):
    """At inference, logits = pooled_output @ W + b: the head dropout is off."""
    encoder = self._encoder()
    model = classifier.build_classifier(encoder, 3, name="my_classifier")
    self.assertEqual(model.name, "my_classifier")
    head = model.get_layer("logits")
    pooled = encoder(_batch(), training=False)["pooled_output"].numpy()
    expected = pooled @ head.kernel.numpy() + head.bias.numpy()
    self.assertAllClose(model(_batch(), training=False), expected, atol=1e-5)
    self.assertAllClose(model.predict(_batch(), verbose=0), expected, atol=1e-5)

  def test_adapterhub_head_hidden_layer_on_the_first_token(self):
    """hidden_layers=1, pooling="first_token": AdapterHub's two-layer classification head,
    W2 · tanh(W1 · h_CLS + b1) + b2 on the first token's sequence output, and the pooler
    frozen (the head never reads it)."""
    encoder = self._encoder()
    model = classifier.build_classifier(encoder, 3, pooling="first_token", hidden_layers=1)
    self.assertEqual((model.head_config.hidden_layers, model.head_config.hidden_activation),
                     (1, "tanh"))
    self.assertFalse(encoder.encoder.pooler_transform.trainable)
    hidden, logits = model.get_layer("head_hidden_0"), model.get_layer("logits")
    first = encoder(_batch(), training=False)["sequence_output"].numpy()[:, 0]
    expected = (np.tanh(first @ hidden.kernel.numpy() + hidden.bias.numpy())
                @ logits.kernel.numpy() + logits.bias.numpy())
    self.assertAllClose(model(_batch(), training=False), expected, atol=1e-5)

  def test_mean_pooling_averages_real_tokens_only(self):
    """pooling="mean": logits are a dense layer on the mean of the unpadded tokens."""
    encoder = self._encoder()
    model = classifier.build_classifier(encoder, 3, pooling="mean")
    head = model.get_layer("logits")
    batch = _batch()
    sequence = encoder(batch, training=False)["sequence_output"].numpy()
    mask = batch["input_mask"].numpy().astype(bool)
    means = np.stack([sequence[i][mask[i]].mean(axis=0) for i in range(len(mask))])
    expected = means @ head.kernel.numpy() + head.bias.numpy()
    self.assertAllClose(model(batch, training=False), expected, atol=1e-5)

  def test_model_records_its_head_and_adapter_set(self):
    """head_config describes the head; the model keeps serving the set active when built."""
    encoder = self._encoder()
    model = classifier.build_classifier(encoder, 3, dropout_rate=0.2, pooling="mean")
    self.assertEqual(model.head_config, classifier.HeadConfig(3, "mean", 0.2))
    self.assertEqual(model.adapter_name, "default")
    expected = model(_batch(), training=False)
    encoder.add_adapter("other")
    encoder.set_adapter("other")
    self.assertAllEqual(model(_batch(), training=False), expected)
    self.assertEqual(classifier.build_classifier(encoder, 2).adapter_name, "other")

  def test_unknown_pooling_is_refused(self):
    """A pooling that does not exist is an error listing the choices."""
    with self.assertRaisesRegex(ValueError, "cls.*mean"):
      classifier.build_classifier(self._encoder(), 3, pooling="max")

  def test_dropout_only_at_training(self):
    """The head dropout makes training calls random; inference calls are deterministic."""
    model = classifier.build_classifier(self._encoder(), 3, dropout_rate=0.5)
    self.assertEqual(model.get_layer("head_dropout").rate, 0.5)
    inference = model(_batch(), training=False).numpy()
    self.assertAllEqual(model(_batch(), training=False), inference)
    self.assertAllEqual(model(_batch()), inference)
    first = model(_batch(), training=True).numpy()
    second = model(_batch(), training=True).numpy()
    self.assertFalse(np.allclose(first, second))
    self.assertFalse(np.allclose(first, inference))

  def test_zero_dropout_is_deterministic_in_training(self):
    """With dropout_rate=0 everywhere, training and inference calls agree."""
    model = classifier.build_classifier(self._encoder(), 3, dropout_rate=0.0)
    self.assertAllClose(model(_batch(), training=True), model(_batch(), training=False),
                        atol=1e-6)

  def test_head_trains_with_the_encoder_policy(self):
    """The head's weights are trainable beside the encoder's adapters and LayerNorms."""
    encoder = self._encoder()
    model = classifier.build_classifier(encoder, 3)
    head = model.get_layer("logits")
    trainable_ids = {id(w) for w in model.trainable_weights}
    self.assertTrue({id(head.kernel), id(head.bias)} <= trainable_ids)
    self.assertLen(trainable_ids, len(encoder.trainable_weights) + 2)

  @parameterized.named_parameters(*layers_testing.MIXED_PRECISIONS)
  def test_mixed_precision_logits_near_the_float32_models(self, name, epsilon):
    """Built under a mixed policy and given a float32 model's (trained) weights, a classifier
    of each pooling, with a hidden head layer, computes in the policy but gives float32 logits
    (their dense layer is float32) near the float32 model's."""
    rng = np.random.default_rng(0)
    for pooling in classifier.POOLINGS:
      with self.subTest(pooling=pooling):
        reference = classifier.build_classifier(self._encoder(), 3, pooling=pooling,
                                                hidden_layers=1)
        for variable in reference.trainable_variables:
          variable.assign(variable + rng.normal(scale=0.3, size=variable.shape))
        with precision.policy_scope(name):
          mixed = classifier.build_classifier(self._encoder(), 3, pooling=pooling,
                                              hidden_layers=1)
        mixed.set_weights(reference.get_weights())
        self.assertEqual({v.dtype for v in mixed.variables}, {tf.float32})
        self.assertEqual(mixed.get_layer("head_hidden_0").compute_dtype, name)
        self.assertEqual(mixed.get_layer("logits").compute_dtype, "float32")
        logits = mixed(_batch(), training=False)
        self.assertEqual(logits.dtype, tf.float32)
        # Measured up to 1.1 epsilons.
        self.assertLess(layers_testing.mixed_precision_gap(
            logits, reference(_batch(), training=False), epsilon), 4)

  def test_float16_loss_scaled_training_keeps_float32_variables_finite(self):
    """A few tf.GradientTape steps of a mixed_float16 classifier with Keras' dynamic loss
    scaling move its float32 variables and keep them finite."""
    with precision.policy_scope("float16"):
      model = classifier.build_classifier(self._encoder(), 3)
    optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam(1e-2))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    before = [v.numpy() for v in model.trainable_variables]
    losses = []
    for _ in range(4):
      with tf.GradientTape() as tape:
        loss = loss_fn(tf.constant([0, 2]), model(_batch(), training=True))
        scaled_loss = optimizer.get_scaled_loss(loss)
      gradients = optimizer.get_unscaled_gradients(
          tape.gradient(scaled_loss, model.trainable_variables))
      optimizer.apply_gradients(zip(gradients, model.trainable_variables))
      losses.append(float(loss))
    self.assertEqual(loss.dtype, tf.float32)
    self.assertTrue(np.all(np.isfinite(losses)))
    self.assertLess(losses[-1], losses[0])
    self.assertEqual({v.dtype for v in model.variables}, {tf.float32})
    for variable, initial in zip(model.trainable_variables, before):
      self.assertTrue(np.all(np.isfinite(variable.numpy())), msg=variable.name)
      self.assertNotAllEqual(variable, initial, msg=variable.name)

  @parameterized.named_parameters(("cls", "cls", True), ("mean", "mean", False))
  def test_full_tuning_trains_the_pooler_only_when_the_head_reads_it(self, pooling, trains):
    """Mean pooling never reads the pooler, so it is frozen rather than counted as trained."""
    encoder = adapted_bert.AdaptedBert(self.handle, adapter_size=None, tuning="full")
    model = classifier.build_classifier(encoder, 3, pooling=pooling)
    pooler = encoder.encoder.pooler_transform
    self.assertEqual(pooler.trainable, trains)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(model(_batch(), training=True))
    gradients = tape.gradient(loss, model.trainable_weights)
    self.assertNotIn(None, gradients)


if __name__ == "__main__":
  tf.test.main()

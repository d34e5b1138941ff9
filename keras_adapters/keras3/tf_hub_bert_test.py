"""`from_tf_hub` against the TF Hub encoders it converts: each Model Garden export variant
of the test suite, and the embedded default base.

The variants are exported by the Model Garden (Keras 2) in a Python of their own, so that
this process stays Keras 3 only, as a Keras 3 user's does.
"""

import json
import os
import random
import subprocess
import tempfile
from unittest import mock

from absl.testing import parameterized
import keras
import keras_hub
import numpy as np
import tensorflow as tf

from keras_adapters import keras3 as kak
from keras_adapters.hub import proofs
from keras_adapters.keras3 import backbones
from keras_adapters.keras3 import testing
from keras_adapters.keras3 import tf_hub_bert
from keras_adapters.keras3 import tf_hub
from keras_adapters.utils import warm_python

# Seven names, as `keras_adapters.hub.testing.MODEL_GARDEN_VARIANTS` has them.
_VARIANTS = ("legacy_gelu_vocab", "legacy_exact_gelu_with_mlm", "legacy_relu_embedding_width",
             "bert_sentencepiece_copy_pooler", "bert_with_mlm",
             "bert_v2_embedding_width_with_mlm", "bert_v2_sentencepiece_relu")
_EXPORT = ("import json, sys; from keras_adapters.hub import testing as t; "
           "print(json.dumps({n: [t.export_model_garden_variant(n, sys.argv[1]), "
           "t.MODEL_GARDEN_VARIANTS[n].activation] for n in t.MODEL_GARDEN_VARIANTS}))")


def _inputs(vocabulary_size, seq_length=10):
  """Another batch than the conversion's probe: three rows, two padded, two segments."""
  rng = np.random.default_rng(7)
  mask = (np.arange(seq_length)[None] < np.array([[seq_length], [7], [3]])).astype("int32")
  segments = ((np.arange(seq_length)[None] >= np.array([[5], [4], [1]])) * mask)
  return dict(token_ids=(rng.integers(0, vocabulary_size, mask.shape) * mask).astype("int32"),
              segment_ids=segments.astype("int32"), padding_mask=mask)


class FromTfHubTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(dir=tf.compat.v1.test.get_temp_dir())
    result = subprocess.run(warm_python.command("-c", _EXPORT, cls.root), capture_output=True,
                            text=True, timeout=1800, check=False)
    if result.returncode:
      raise AssertionError(result.stderr[-3000:])
    cls.exports = json.loads(result.stdout.strip().splitlines()[-1])
    # TF Hub models' outputs, which several tests compare with: each computed once for the
    # class. (`from_tf_hub` itself reads each variant once per process.)
    cls.hub_outputs = {}

  def expected_outputs(self, handle, vocabulary_size, seq_length=10):
    """The TF Hub model at `handle` on `_inputs(vocabulary_size, seq_length)`."""
    key = (handle, vocabulary_size, seq_length)
    if key not in self.hub_outputs:
      self.hub_outputs[key] = tf.saved_model.load(handle)(
          tf_hub_bert.hub_inputs(_inputs(vocabulary_size, seq_length)), training=False)
    return self.hub_outputs[key]

  def assert_same_outputs(self, handle, backbone, seq_length=10):
    """On `_inputs(backbone.vocabulary_size, seq_length)`: within 1e-5 at the real tokens and
    in the pooled output. At padded positions, which no real token reads, the two attention
    implementations round differently (up to 1.1e-5 on the embedded default on an AVX-512
    CPU): there within 1e-4."""
    inputs = _inputs(backbone.vocabulary_size, seq_length)
    expected = self.expected_outputs(handle, backbone.vocabulary_size, seq_length)
    actual = backbone(inputs, training=False)
    real = inputs["padding_mask"].astype(bool)
    sequence = keras.ops.convert_to_numpy(actual["sequence_output"])
    self.assertAllClose(expected["sequence_output"].numpy()[real], sequence[real], atol=1e-5,
                        rtol=0, msg="sequence_output at the real tokens")
    self.assertAllClose(expected["sequence_output"].numpy()[~real], sequence[~real],
                        atol=1e-4, rtol=0, msg="sequence_output at padded positions")
    self.assertAllClose(expected["pooled_output"],
                        keras.ops.convert_to_numpy(actual["pooled_output"]), atol=1e-5, rtol=0,
                        msg="pooled_output")

  def test_the_suite_s_variants_are_all_here(self):
    self.assertCountEqual(self.exports, _VARIANTS)

  @parameterized.named_parameters(*[(name, name) for name in _VARIANTS])
  def test_each_variant_converts_with_its_own_activation(self, name):
    handle, activation = self.exports[name]
    backbone = kak.from_tf_hub(handle)
    self.assertIsInstance(backbone, keras_hub.models.BertBackbone)
    self.assertEqual(backbone.activation, activation)
    self.assert_same_outputs(handle, backbone)

  def test_a_converted_backbone_saves_and_loads_with_its_activation(self):
    handle, _ = self.exports["legacy_relu_embedding_width"]
    path = f"{self.root}/relu.keras"
    kak.from_tf_hub(handle).save(path)
    loaded = keras.saving.load_model(path)
    self.assertIsInstance(loaded, backbones.HubBertBackbone)
    self.assertEqual((loaded.activation, loaded.embedding_dim), ("relu", 8))
    self.assert_same_outputs(handle, loaded)

  def test_on_jax_a_variant_converts_to_the_same_outputs(self):
    """In a process of its own with `KERAS_BACKEND=jax`: the backbone's outputs on this test's
    batch, against the TF Hub model's here."""
    handle, _ = self.exports["bert_v2_embedding_width_with_mlm"]
    code = ("import json, sys, keras, numpy as np; from keras_adapters import keras3 as kak; "
            "from keras_adapters.keras3 import tf_hub_bert_test as t; "
            "b = kak.from_tf_hub(sys.argv[1]); o = b(t._inputs(b.vocabulary_size)); "
            "print(json.dumps([keras.backend.backend(), b.activation] + "
            "[keras.ops.convert_to_numpy(o[k]).tolist() for k in "
            "('sequence_output', 'pooled_output')]))")
    result = subprocess.run(warm_python.command("-c", code, handle), capture_output=True,
                            text=True, env=testing.jax_environ(), timeout=900,
                            check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    backend, activation, sequence, pooled = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual((backend, activation), ("jax", "gelu_approximate"))
    expected = self.expected_outputs(handle, 64)
    self.assertAllClose(expected["sequence_output"], sequence, atol=1e-5, rtol=0)
    self.assertAllClose(expected["pooled_output"], pooled, atol=1e-5, rtol=0)

  def test_a_base_converted_again_is_not_restored_and_seeds_its_backbone_alike(self):
    """The second conversion in a process builds from the kept read, and one in a new
    process from what the first proved (`proofs`): no SavedModel restored, no candidate
    probed, and from one random state the same weights and seeds as the first (whose probes
    draw none; this variant's activation is the second candidate)."""
    handle, _ = self.exports["legacy_gelu_vocab"]
    tf_hub_bert._bases.clear()  # pylint: disable=protected-access
    self.enter_context(mock.patch.dict(os.environ,
                                       {proofs.SETTING: self.create_tempdir().full_path}))
    keras.utils.set_random_seed(5)
    first = kak.from_tf_hub(handle)
    next_draw = random.random()
    for kept_in in ("process", "proofs"):
      with self.subTest(kept_in=kept_in):
        if kept_in == "proofs":
          tf_hub_bert._bases.clear()  # pylint: disable=protected-access
        keras.utils.set_random_seed(5)
        with mock.patch.object(tf.saved_model, "load", side_effect=AssertionError("restored")):
          again = kak.from_tf_hub(handle)
        self.assertEqual(random.random(), next_draw)
        self.assertEqual(again.activation, "gelu_approximate")
        seeds = [v for v in again.variables if "seed" in v.path]
        self.assertNotEmpty(seeds)
        # Layer names differ (a counter names each backbone's layers); the order does not.
        self.assertEqual(len(first.variables), len(again.variables))
        for expected, actual in zip(first.variables, again.variables):
          self.assertAllEqual(expected, actual, msg=actual.path)

  def test_the_embedded_default_converts_with_exact_gelu(self):
    backbone = kak.from_tf_hub()
    self.assertEqual((backbone.activation, backbone.num_layers, backbone.hidden_dim),
                     ("gelu", 6, 384))
    # Converted already in this machine's cache: found in this process, none started.
    tf_hub._in_keras2_process.cache_clear()  # pylint: disable=protected-access
    with mock.patch.object(tf_hub.subprocess, "run", side_effect=AssertionError("a process")):
      handle = tf_hub.local_folder(None, "hub")
    self.assert_same_outputs(handle, backbone, seq_length=16)


if __name__ == "__main__":
  tf.test.main()

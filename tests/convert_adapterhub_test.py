"""End to end: `experiments/convert_adapterhub.py` both ways, then the converted artifacts
loaded with `load_task_model` and served with `export_multitask`.

AdapterHub's own artifacts (the fixtures) run on the embedded default base; the multi-task
serving of converted placements runs on the tiny random encoder of
`keras_adapters.hub.testing`.
"""

import os

from absl import app
from absl import flags
from absl.testing import flagsaver
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from experiments import convert_adapterhub
from keras_adapters.hub import multitask_export
from keras_adapters.hub import task_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import adapterhub_test
from keras_adapters.layers import testing
from keras_adapters.models import saving

FLAGS = flags.FLAGS


def _convert(**flag_values):
  with flagsaver.flagsaver(**flag_values):
    convert_adapterhub.main(["convert_adapterhub"])


class ConvertAdapterHubTest(tf.test.TestCase):

  def test_fixtures_convert_both_ways_exactly(self):
    """AdapterHub's artifacts become artifacts whose task models give AdapterHub's logits
    (to 1e-4), and convert back to AdapterHub's own tensors."""
    for fixture in ("houlsby", "pfeiffer"):
      root = self.create_tempdir().full_path
      artifact = os.path.join(root, "artifact")
      _convert(from_adapterhub=os.path.join(adapterhub_test.FIXTURES, fixture),
               to_artifact=artifact)
      model = saving.load_task_model(artifact)
      inputs, expected = adapterhub_test.reference_inputs(fixture)
      self.assertLess(np.abs(model(inputs, training=False).numpy() - expected).max(),
                      adapterhub_test.TOLERANCE, msg=fixture)
      if fixture == "pfeiffer":
        back = os.path.join(root, "adapterhub")
        _convert(from_artifact=artifact, to_adapterhub=back)
        for filename in (adapterhub.WEIGHTS_FILE, adapterhub.HEAD_WEIGHTS_FILE):
          ours = safetensors_numpy.load_file(os.path.join(back, filename))
          theirs = safetensors_numpy.load_file(
              os.path.join(adapterhub_test.FIXTURES, fixture, filename))
          self.assertCountEqual(ours, theirs)
          for key, value in theirs.items():
            self.assertAllEqual(ours[key], value, msg=key)

  def test_converted_placement_serves_through_export_multitask(self):
    """An AdapterHub task with a non-Houlsby placement (own LayerNorms, post-add skip) and a
    two-layer head on the first token, converted, serves from a multi-task SavedModel as on
    its own. (Tasks mixing adapter positions are routed exactly: task_routing_test.)"""
    root = self.create_tempdir().full_path
    handle = hub_testing.tiny_hub_handle()
    source = adapterhub.save_adapterhub(
        adapterhub_test.random_task_model(
            handle, testing.PLACEMENT_VARIANTS["own_layer_norms_post_add"]),
        os.path.join(root, "adapterhub"), model_name="tiny-bert")
    artifact = os.path.join(root, "artifact")
    _convert(from_adapterhub=source, to_artifact=artifact, hub_handle=handle,
             preprocess_handle=hub_testing.tiny_preprocess_handle(), seq_length=16)
    model = saving.load_task_model(artifact)
    served = tf.saved_model.load(multitask_export.export_multitask(
        handle, {"task": artifact}, os.path.join(root, "multitask")))
    texts = tf.constant(["w1 w2 w3", "w4 w5 w6 w7", ""])
    inputs = task_export.pack_texts(hub_testing.tiny_preprocessor(), [texts], 16)
    self.assertAllClose(served.signatures["task"](text=texts)["probabilities"],
                        tf.nn.softmax(model(inputs, training=False)), atol=1e-5, rtol=0)

  def test_one_conversion_must_be_given(self):
    with self.assertRaisesRegex(app.UsageError, "Give one conversion"):
      _convert(from_adapterhub="somewhere")


if __name__ == "__main__":
  tf.test.main()

"""`import keras_adapters.keras3` loads no Keras 2 and leaves `tf.keras` alone, and one
process then uses both stacks: run in a fresh Python with no Keras chosen, as a user's."""

import json
import os
import subprocess
import sys
import textwrap

import tensorflow as tf

from keras_adapters.hub import testing as hub_testing

_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from keras_adapters import keras3 as kak
    import keras_adapters as ka

    def keras2_loaded():
      return sorted(m for m in ("tf_keras", "tensorflow_hub", "official") if m in sys.modules)

    facts = dict(after_keras3=keras2_loaded(),
                 same_configs=[kak.AdapterConfig is ka.AdapterConfig,
                               kak.LoRAConfig is ka.LoRAConfig, kak.IA3Config is ka.IA3Config])
    facts["after_configs"] = keras2_loaded()
    # Keras 3 on a keras-hub backbone, then Keras 2 on a TF Hub encoder, in this process.
    from keras_adapters.keras3 import testing
    backbone = kak.adapt(testing.tiny_backbone(), kak.LoRAConfig())
    facts["keras3_output"] = list(testing.sequence_output(backbone, testing.tiny_inputs()).shape)
    from keras_adapters.networks import adapted_bert_encoder
    bert = ka.AdaptedBert(sys.argv[1], adapter_config=ka.AdapterConfig(adapter_size=4))
    facts["keras2_output"] = list(bert(adapted_bert_encoder.dummy_inputs())[
        "sequence_output"].shape)
    import tensorflow as tf
    facts["tf_keras_version"] = tf.keras.__version__
    facts["variable"] = os.environ.get("TF_USE_LEGACY_KERAS")
    print(json.dumps(facts))
""")


class IsolationTest(tf.test.TestCase):

  def test_keras3_loads_no_keras2_and_both_stacks_run_in_one_process(self):
    environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, hub_testing.tiny_hub_handle()], capture_output=True,
        text=True, env=dict(environ, KERAS_BACKEND="tensorflow"), timeout=900, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(facts["after_keras3"], [])
    self.assertEqual(facts["same_configs"], [True, True, True])
    self.assertEqual(facts["after_configs"], [])
    self.assertEqual(facts["keras3_output"], [3, 8, 16])
    self.assertEqual(facts["keras2_output"][-1], 16)
    # Nothing chose Keras 2 for the process: `tf.keras` is Keras 3, as TensorFlow makes it.
    self.assertTrue(facts["tf_keras_version"].startswith("3."), facts["tf_keras_version"])
    self.assertIsNone(facts["variable"])


if __name__ == "__main__":
  tf.test.main()

"""`run_classification.py` on genuine Model Garden exports other than the default test encoder:
a BertEncoderV2 with a narrower embedding and an `mlm` subobject, and a SentencePiece encoder
with its SentencePiece preprocessing model; a preprocessing model of another casing; and an
AdapterHub placement given on the command line, checked in the BertEncoderV2's run (each run
trains, scores and exports)."""

import json
import os

import tensorflow as tf

from experiments import run_classification
from experiments import testing as cli_testing
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing

_SEQ_LENGTH = 12


class HubVariantsCliTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "hub_variants_cli_test")
    os.makedirs(cls.root, exist_ok=True)
    cls.data_path = cli_testing.write_two_class_csv(os.path.join(cls.root, "two.csv"))

  def _run(self, hub_handle, preprocess_handle, **extra):
    model_dir = self.create_tempdir().full_path
    argv = ["run_classification"] + [f"--{k}={v}" for k, v in dict(
        data_path=self.data_path, hub_handle=hub_handle, preprocess_handle=preprocess_handle,
        split_manifest=os.path.join(model_dir, "split.json"), model_dir=model_dir,
        results_dir=os.path.join(model_dir, "results"), max_train_examples="0", epochs="1",
        batch_size="8", max_seq_length=str(_SEQ_LENGTH), adapter_size="4", **extra).items()]
    return model_dir, cli_testing.run_main(run_classification.main, argv)

  def _assert_serves_strings(self, model_dir):
    export = os.path.join(model_dir, "export", "saved_model")
    served = tf.saved_model.load(export).signatures["serving_default"](
        text=tf.constant(["w1 w2 w3", "w25 w30"]))
    self.assertAllClose(tf.reduce_sum(served["probabilities"], axis=-1), [1.0, 1.0])

  def test_bert_v2_with_embedding_projection_and_mlm_and_an_adapterhub_placement(self):
    """A BertEncoderV2 export trains, scores and serves strings; in the same run,
    --adapter_config='{...}' gives AdapterHub's Pfeiffer placement: one adapter per layer,
    after the feed-forward block, which the artifact records."""
    handle = testing.export_model_garden_variant("bert_v2_embedding_width_with_mlm",
                                                 os.path.join(self.root, "variants"))
    model_dir, printed = self._run(
        handle, testing.tiny_preprocess_handle(_SEQ_LENGTH),
        adapter_config='{"mh_adapter": false, "original_ln_before": true}')
    self.assertRegex(printed, r"\ntest: accuracy \d+\.\d\d%")
    self._assert_serves_strings(model_dir)
    with open(os.path.join(model_dir, "export", "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      recorded = json.load(f)["adapter_config"]
    self.assertEqual((recorded["mh_adapter"], recorded["original_ln_before"],
                      recorded["adapter_size"]), (False, True, 4))
    tensors = adapter_artifact.read_tensors(os.path.join(model_dir, "export", "adapters"))
    self.assertEmpty([name for name in tensors if "attention_adapter" in name])
    self.assertNotEmpty([name for name in tensors if "feedforward_adapter" in name])

  def test_sentencepiece_encoder_and_preprocessing(self):
    encoder, preprocess = testing.tiny_sentencepiece_handles(_SEQ_LENGTH)
    model_dir, printed = self._run(encoder, preprocess)
    self.assertRegex(printed, r"\ntest: accuracy \d+\.\d\d%")
    self._assert_serves_strings(model_dir)

  def test_preprocessing_of_another_casing_is_refused_before_training(self):
    cased = testing.tiny_preprocess_handle(lower_case=False)
    with self.assertRaisesRegex(ValueError, r"keeps case \(cased\) but the encoder was trained "
                                            r"uncased"):
      self._run(testing.tiny_hub_handle(), cased)


if __name__ == "__main__":
  tf.test.main()

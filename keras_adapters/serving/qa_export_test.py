"""Tests of the question-answering SavedModel, with a model whose answers are known."""

import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.serving import qa_export
from keras_adapters.hub import testing
from keras_adapters.layers import testing as layers_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import span_labeler
from keras_adapters.networks import adapted_bert_encoder
from keras_adapters.data import squad
from keras_adapters.data import squad_features
from keras_adapters.data import squad_tokenizer
from keras_adapters.utils import precision

_SETTINGS = squad_features.WindowSettings(max_seq_length=24, doc_stride=8, max_query_length=4)
_FILLER = " ".join(f"w{i}" for i in range(10, 50))
# Each answer runs from "w1" to "w2"; around them, words outside the tiny vocab with capitals,
# accents (precomposed and combining), punctuation and double spaces.
_CASES = (
    ("start", "W1 w2 " + _FILLER, "W1 w2"),
    ("middle", _FILLER + " Ünï  W1 Café, Ete\u0301 w2. " + _FILLER, "W1 Café, Ete\u0301 w2"),
    ("end", _FILLER + " (w1 w2)", "w1 w2"),
)


def _rigged_span_labeler(tokenizer):
  """A span labeler whose best span runs from the token w1 to the token w2."""
  inputs = {key: keras.Input(shape=(None,), dtype=tf.int32, name=key)
            for key in adapted_bert_encoder.INPUT_KEYS}
  ids = inputs["input_word_ids"]
  logits = {name: 10.0 * tf.cast(tf.equal(ids, tokenizer.vocab.index(word)), tf.float32)
            for name, word in (("start_logits", "w1"), ("end_logits", "w2"))}
  return keras.Model(inputs, logits)


class QaExportTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, cls.root)
    cls.tokenizer = squad_tokenizer.PreprocessingTokenizer(testing.tiny_preprocess_handle())
    cls.model = _rigged_span_labeler(cls.tokenizer)
    export_dir = qa_export.export_qa(cls.model, cls.tokenizer, os.path.join(cls.root, "qa"),
                                     settings=_SETTINGS)
    cls.serve = tf.saved_model.load(export_dir).signatures["serving_default"]

  def answer(self, contexts, question="w3"):
    result = self.serve(question=tf.constant([question] * len(contexts)),
                        context=tf.constant(contexts))
    return {key: value.numpy() for key, value in result.items()}

  def test_answers_with_the_span_and_its_character_offsets(self):
    result = self.answer([context for _, context, _ in _CASES])
    for index, (name, context, answer) in enumerate(_CASES):
      with self.subTest(name):
        start = context.index(answer)
        self.assertEqual(result["answer"][index].decode(), answer)
        self.assertEqual((result["answer_start"][index], result["answer_end"][index]),
                         (start, start + len(answer)))
        self.assertAllClose(result["score"][index], 20.0)

  def test_same_answers_as_the_evaluation_over_windows(self):
    path = os.path.join(self.root, "dev.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"data": [{"title": "t", "paragraphs": [
          {"context": context, "qas": [{"id": name, "question": "w3", "answers": [
              {"text": answer, "answer_start": context.index(answer)}]}]}
          for name, context, answer in _CASES]}]}, f)
    data = squad.read_squad_file(path, training=False)
    features = squad_features.load_features(data, self.tokenizer, _SETTINGS, training=False,
                                            cache_dir=os.path.join(self.root, "cache"))
    self.assertGreater(len(features), 3 * len(_CASES))  # Every context takes several windows.
    predictions, _ = squad_features.postprocess(
        squad_features.read_examples(data, training=False), features,
        *squad_features.predict_logits(self.model, features), vocab=self.tokenizer.vocab,
        do_lower_case=True)
    served = self.answer([context for _, context, _ in _CASES])["answer"]
    served = {name: text.decode() for (name, _, _), text in zip(_CASES, served)}
    self.assertEqual(predictions["start"], served["start"])
    self.assertEqual(predictions["end"], served["end"])
    # The evaluation cannot align an answer holding unknown wordpieces with the text, and
    # takes its whole whitespace words, here with the period after "w2"; the export keeps
    # the span's exact characters.
    self.assertEqual(predictions["middle"], served["middle"] + ".")

  def test_long_question_and_empty_context(self):
    result = self.answer(["", _CASES[0][1]], question=" ".join(["w4"] * 30))
    self.assertEqual(result["answer"].tolist(), [b"", b"W1 w2"])
    self.assertEqual(result["score"][0], -np.inf)
    self.assertEqual((result["answer_start"][0], result["answer_end"][0]), (0, 0))

  def test_a_mixed_precision_model_serves_float32_scores(self):
    """A span labeler built and exported under each mixed policy serves strings and returns
    float32 scores near those of the float32 model with the same weights, over windows."""
    contexts = [context for _, context, _ in _CASES]

    def serve(model, name):
      export_dir = qa_export.export_qa(model, self.tokenizer, os.path.join(self.root, name),
                                       settings=_SETTINGS)
      return tf.saved_model.load(export_dir).signatures["serving_default"](
          question=tf.constant(["w3"] * len(contexts)), context=tf.constant(contexts))

    keras.utils.set_random_seed(0)
    reference = span_labeler.build_span_labeler(
        adapted_bert.AdaptedBert(testing.tiny_hub_handle(), adapter_size=4))
    rng = np.random.default_rng(0)
    for variable in reference.trainable_variables:
      variable.assign(variable + rng.normal(scale=0.3, size=variable.shape))
    expected = serve(reference, "float32")["score"]
    for name, _, epsilon in layers_testing.MIXED_PRECISIONS:
      with self.subTest(precision=name):
        with precision.policy_scope(name):
          mixed = span_labeler.build_span_labeler(
              adapted_bert.AdaptedBert(testing.tiny_hub_handle(), adapter_size=4))
          mixed.set_weights(reference.get_weights())
          served = serve(mixed, name)
        self.assertEqual(served["score"].dtype, tf.float32)
        self.assertEqual(served["answer"].dtype, tf.string)
        # The best span's start + end logit: measured up to 1.0 epsilons.
        self.assertLess(layers_testing.mixed_precision_gap(served["score"], expected, epsilon),
                        4)

  def test_tokenization_unlike_the_preprocessing_model_is_refused(self):
    with mock.patch.object(self.tokenizer, "do_lower_case", False):
      with self.assertRaisesRegex(ValueError, r"would tokenize .* differently from the "
                                  r"preprocessing model \(lower_case=False"):
        qa_export.export_qa(self.model, self.tokenizer, os.path.join(self.root, "refused"),
                            settings=_SETTINGS)
    self.assertFalse(os.path.exists(os.path.join(self.root, "refused")))


if __name__ == "__main__":
  tf.test.main()

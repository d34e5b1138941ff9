"""Values the base encoder cannot serve are refused up front, against its own configuration:
a sequence length above its position embeddings (in `run_task` and `export_task`; the CLIs in
`cli_errors_test`), a preprocessing model whose token ids run past the encoder's vocabulary.
The checks themselves are tested in `hub/compatibility_test`.

The tiny random encoder has 32 position embeddings and 64 token embeddings.
"""

import os

import tensorflow as tf

from keras_adapters.serving import task_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing

class BaseLimitsTest(tf.test.TestCase):

  def test_run_task_refuses_before_writing_anything(self):
    spec, splits = testing.colour_task()
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with self.assertRaisesRegex(ValueError, "max_seq_length=40 is more than the base "
                                "encoder's 32 position embeddings"):
      classification.run_task(spec, splits, testing.run_config(max_seq_length=40), model_dir)
    self.assertFalse(os.path.exists(model_dir))

  def test_export_task_refuses_a_length_the_encoder_cannot_serve(self):
    model = classifier.build_classifier(
        adapted_bert.AdaptedBert(hub_testing.tiny_hub_handle(), adapter_size=4), 3)
    export_dir = os.path.join(self.create_tempdir().full_path, "saved_model")
    with self.assertRaisesRegex(ValueError, "seq_length=512 is more than the base encoder's 32"):
      task_export.export_task(model, hub_testing.tiny_preprocessor(), export_dir,
                              seq_length=512, label_names=["a", "b", "c"])
    self.assertFalse(os.path.exists(export_dir))

  def test_token_ids_beyond_the_vocabulary_are_refused(self):
    """A preprocessing model of a 100-wordpiece vocab for a 64-embedding encoder: refused
    before training as another vocabulary than the one the encoder records (for encoders
    that record none, compatibility_test checks the ids against the embeddings)."""
    handle = hub_testing.tiny_preprocess_handle(vocab_size=100)
    spec, splits = testing.colour_task()
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with self.assertRaisesRegex(ValueError, "tokenizes with another vocabulary than the "
                                "encoder's own wordpiece vocabulary .*Pass the preprocessing "
                                "model that comes with the encoder"):
      classification.run_task(spec, splits, testing.run_config(preprocess_handle=handle),
                           model_dir)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()

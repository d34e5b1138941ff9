"""Data and arguments that are probably a mistake are not taken at face value: a label with
spaces around it, a negative subset size, one class to learn from, a head without outputs,
label names that do not match the logits.
"""

import os

from absl import flags
from absl.testing import flagsaver
import numpy as np
import tensorflow as tf

# Defines the flags of run_classification.py.
from experiments import run_classification  # pylint: disable=unused-import
from keras_adapters.serving import task_export
from keras_adapters.hub import testing as hub_testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing

FLAGS = flags.FLAGS


class SuspiciousDataTest(tf.test.TestCase):

  def test_a_label_with_a_trailing_space_is_the_same_class(self):
    path = os.path.join(self.create_tempdir().full_path, "reviews.csv")
    with open(path, "w", encoding="utf-8") as f:
      f.write("text,label\nw1 w2,good\nw3,good \nw4,bad\nw5, bad\n")
    with self.assertLogs("absl", "WARNING") as logs:
      spec, examples = text_classification.read_text_classification(path)
    self.assertEqual(spec.label_names, ("bad", "good"))
    self.assertEqual(examples.labels.tolist(), [1, 1, 0, 0])
    self.assertIn("2 labels have spaces around them, e.g. 'good ' at", logs.output[0])

  def test_a_negative_training_subset_is_a_flag_error(self):
    with flagsaver.flagsaver():
      with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                  "flag --max_train_examples=-5: -5 is not a non-negative"):
        FLAGS(["run_classification", "--max_train_examples=-5"])

  def test_one_class_to_learn_from_is_refused_before_training(self):
    spec, splits = testing.colour_task()
    train = splits["train"]
    one_class = examples_lib.TextExamples(ids=train.ids, texts=train.texts,
                                          labels=np.zeros(len(train), np.int32))
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    with self.assertRaisesRegex(ValueError,
                                "The training split of task 'colours' has examples of one class "
                                r"only, 'red' \(18 examples\): a classifier learns nothing"):
      classification.run_task(spec, dict(splits, train=one_class), testing.run_config(), model_dir)
    self.assertFalse(os.path.exists(model_dir))
    # Before a split is even made and recorded.
    with self.assertRaisesRegex(ValueError, "Task 'colours' has examples of one class only"):
      splits_lib.make_split_manifest(spec, one_class)

  def test_labels_outside_the_classes_are_refused_before_training(self):
    spec, splits = testing.colour_task()
    test = splits["test"]
    labels = test.labels.copy()
    labels[2] = 7
    with self.assertRaisesRegex(ValueError, r"Split 'test' of task 'colours' has the label 7 "
                                r"\(example 'x2'\), outside the class ids 0\.\.\.2"):
      classification.check_splits(spec, dict(splits, test=examples_lib.TextExamples(
          ids=test.ids, texts=test.texts, labels=labels)))

  def test_a_head_without_outputs_is_refused(self):
    encoder = adapted_bert.AdaptedBert(hub_testing.tiny_hub_handle(), adapter_size=4)
    for bad in (0, -1, 2.5, True):
      with self.assertRaisesRegex(ValueError, f"num_classes={bad!r}: give the number of "
                                  "classes"):
        classifier.build_classifier(encoder, bad)

  def test_label_names_must_name_every_logit(self):
    model = classifier.build_classifier(
        adapted_bert.AdaptedBert(hub_testing.tiny_hub_handle(), adapter_size=4), 2)
    export_dir = os.path.join(self.create_tempdir().full_path, "saved_model")
    preprocessor = hub_testing.tiny_preprocessor()
    with self.assertRaisesRegex(ValueError, r"label_names=\['a', 'b', 'c'\] names 3 classes, "
                                "but the model has 2 logits"):
      task_export.export_task(model, preprocessor, export_dir, seq_length=16,
                              label_names=["a", "b", "c"])
    with self.assertRaisesRegex(ValueError, "label_names=None exports a regression task's one "
                                "score, but the model has 2 outputs"):
      task_export.export_task(model, preprocessor, export_dir, seq_length=16)
    self.assertFalse(os.path.exists(export_dir))


if __name__ == "__main__":
  tf.test.main()

"""Tests of a whole SQuAD run on a tiny random encoder and a hand-made SQuAD file."""

import dataclasses
import json
import os
import shutil
import socket
import tempfile
from unittest import mock

import tensorflow as tf

from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.hub import testing
from keras_adapters.models import saving
from keras_adapters.data import squad
from keras_adapters.tasks import question_answering
from keras_adapters.data import squad_testing
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import run_lock

_SQUAD_CONFIG = question_answering.SquadConfig(doc_stride=8, max_query_length=4,
                                               max_answer_length=5)


def _no_training():
  """Makes any training step fail the test."""
  return mock.patch.object(trainer_lib.Trainer, "_train_loop",
                           side_effect=AssertionError("trained again"))


class RunSquadTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, cls.root)
    cls.data = squad.read_squad_file(
        squad_testing.write_tiny_squad(os.path.join(cls.root, "squad.json")), training=True)
    cls.config = config_definitions.ExperimentConfig.from_settings(
        hub_handle=testing.tiny_hub_handle(), preprocess_handle=testing.tiny_preprocess_handle(),
        tuning="full", adapter_size=None, learning_rate=2e-2, epochs=30.0, batch_size=4,
        max_seq_length=32)
    cls.model_dir = os.path.join(cls.root, "overfit")
    cls.export_dir = os.path.join(cls.root, "export")
    # Trained and evaluated on the same four questions; exported by a second call, which
    # finds the run finished and must not train again.
    cls.results = cls.run_squad(cls.config, cls.model_dir)
    with _no_training():
      cls.exported = cls.run_squad(cls.config, cls.model_dir, export_dir=cls.export_dir)

  @classmethod
  def run_squad(cls, config, model_dir, squad_config=_SQUAD_CONFIG, **kwargs):
    return question_answering.run_squad(cls.data, cls.data, config, squad_config, model_dir,
                                  feature_cache_dir=os.path.join(cls.root, "features"),
                                  progress_bar=False, **kwargs)

  def read_json(self, name):
    with open(os.path.join(self.model_dir, name), encoding="utf-8") as f:
      return json.load(f)

  def references(self):
    return {qa["id"]: qa["answers"][0] for paragraph in self.data.articles[0]["paragraphs"]
            for qa in paragraph["qas"]}

  def test_overfitting_a_handful_of_questions_reaches_exact_match_100(self):
    self.assertEqual(self.results["metrics"], dict(exact_match=100.0, f1=100.0))
    self.assertEqual(self.read_json(question_answering.EVAL_RESULTS_FILE), self.results["metrics"])
    self.assertEqual(self.read_json(question_answering.PREDICTIONS_FILE),
                     {qid: answer["text"] for qid, answer in self.references().items()})
    nbest = self.read_json(question_answering.NBEST_FILE)
    self.assertCountEqual(nbest, self.references())
    for entries in nbest.values():
      self.assertLessEqual(len(entries), 20)
      self.assertCountEqual(entries[0], ["text", "probability", "start_logit", "end_logit"])
    self.assertEqual((self.results["train_questions"], self.results["eval_questions"]), (4, 4))
    # The 42-word context takes three windows.
    self.assertEqual(self.results["train_windows"], 6)

  def test_exported_savedmodel_answers_with_the_right_span(self):
    serve = tf.saved_model.load(os.path.join(self.export_dir, "saved_model")).signatures[
        "serving_default"]
    paragraphs = self.data.articles[0]["paragraphs"]
    result = serve(question=tf.constant([p["qas"][0]["question"] for p in paragraphs]),
                   context=tf.constant([p["context"] for p in paragraphs]))
    references = self.references()
    for index, paragraph in enumerate(paragraphs):
      answer = references[paragraph["qas"][0]["id"]]
      self.assertEqual(result["answer"][index].numpy().decode(), answer["text"])
      self.assertEqual(int(result["answer_start"][index]), answer["answer_start"])
      self.assertEqual(int(result["answer_end"][index]),
                       answer["answer_start"] + len(answer["text"]))
    self.assertTrue(os.path.isfile(os.path.join(self.export_dir, "adapters",
                                                "adapter_config.json")))

  def test_adapter_artifact_restores_the_trained_model(self):
    trained = question_answering.build_model(self.config)
    trainer_lib.restore_trained_weights(trained, tf.train.latest_checkpoint(self.model_dir))
    restored = question_answering.build_model(self.config)
    saving.load_adapters(restored, os.path.join(self.export_dir, "adapters"))
    ids = tf.constant([[2, 40, 41, 3, 50, 51, 12, 3]])
    inputs = dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                  input_type_ids=tf.constant([[0, 0, 0, 0, 1, 1, 1, 1]]))
    self.assertAllClose(restored(inputs, training=False), trained(inputs, training=False))

  def test_finished_run_is_exported_and_returned_without_training(self):
    self.assertEqual(self.exported, dict(self.results, export_dir=self.export_dir,
                                         total_seconds=self.exported["total_seconds"],
                                         provenance=self.exported["provenance"]))
    # The export was a session of its own: it adds how it was made to the training's.
    self.assertEqual(self.exported["provenance"][:-1], self.results["provenance"])
    self.assertLen(self.results["provenance"], 1)
    with _no_training():
      self.assertEqual(self.run_squad(self.config, self.model_dir, export_dir=self.export_dir),
                       self.exported)

  def test_other_questions_are_answered_again_without_training(self):
    model_dir = os.path.join(self.root, "reanswered")
    shutil.copytree(self.model_dir, model_dir)
    with _no_training():
      results = self.run_squad(self.config, model_dir,
                               dataclasses.replace(_SQUAD_CONFIG, max_eval_examples=2))
    self.assertEqual((results["eval_questions"], results["train_questions"]), (2, 4))
    with open(os.path.join(model_dir, question_answering.PREDICTIONS_FILE), encoding="utf-8") as f:
      self.assertLen(json.load(f), 2)

  def test_held_out_training_questions_are_scored_and_never_trained_on(self):
    """holdout_questions=1: one seeded training question is answered and scored in place of
    the evaluation file; the other three train; another evaluation file is refused."""
    model_dir = os.path.join(self.root, "held_out")
    results = self.run_squad(self.config.replace(epochs=1.0), model_dir,
                             dataclasses.replace(_SQUAD_CONFIG, holdout_questions=1))
    self.assertEqual((results["train_questions"], results["eval_questions"]), (3, 1))
    with open(os.path.join(model_dir, question_answering.PREDICTIONS_FILE),
              encoding="utf-8") as f:
      (held_out,) = json.load(f)
    task = question_answering.QuestionAnsweringTask(
        self.data, self.data, self.config, dataclasses.replace(_SQUAD_CONFIG,
                                                               holdout_questions=1),
        feature_cache_dir=os.path.join(self.root, "features"))
    self.assertEqual(task.eval_ids, [held_out])
    self.assertNotIn(held_out, task.train_ids)
    self.assertLen(task.train_ids, 3)
    other = squad.read_squad_file(squad_testing.write_tiny_squad(
        os.path.join(self.create_tempdir().full_path, "other.json"), seed=1),
        training=False)
    with self.assertRaisesRegex(ValueError, "pass the training file as the evaluation data"):
      question_answering.QuestionAnsweringTask(
          self.data, other, self.config, dataclasses.replace(_SQUAD_CONFIG,
                                                             holdout_questions=1),
          feature_cache_dir=self.root)

  def test_other_settings_in_a_run_folder_are_refused(self):
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                r"learning_rate=0.02 there, learning_rate=0.001 now"):
      self.run_squad(self.config.replace(learning_rate=1e-3), self.model_dir)
    with self.assertRaisesRegex(run_records.RunSettingsError,
                                r"training data of 4 examples \(sha256:\w+\) there, 2 "):
      self.run_squad(self.config, self.model_dir,
                     dataclasses.replace(_SQUAD_CONFIG, max_train_examples=2))

  def test_a_busy_model_dir_is_refused_naming_its_run(self):
    """While another run holds model_dir, a second one is refused; the finished run left no
    lock."""
    model_dir = os.path.join(self.root, "busy")
    shutil.copytree(self.model_dir, model_dir)
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE)))
    with open(os.path.join(model_dir, run_lock.LOCK_FILE), "w", encoding="utf-8") as f:
      json.dump(dict(host=socket.gethostname(), pid=os.getppid(), token="theirs"), f)
    with _no_training(), self.assertRaisesRegex(
        run_lock.ModelDirBusyError, rf"in use by another run \(process {os.getppid()} "):
      self.run_squad(self.config, model_dir)

  def test_window_longer_than_the_encoder_is_refused_before_training(self):
    with self.assertRaisesRegex(ValueError, r"max_seq_length=64 is more than the base "
                                r"encoder's 32 position embeddings"):
      self.run_squad(self.config.replace(max_seq_length=64),
                     os.path.join(self.root, "too_long"))
    self.assertFalse(os.path.exists(os.path.join(self.root, "too_long")))

  def test_resumes_after_a_kill(self):
    config = self.config.replace(tuning="adapters", adapter_size=4, epochs=1.0,
                                 checkpoint_every_steps=1)
    model_dir = os.path.join(self.root, "killed")
    save = trainer_lib.Trainer._save

    def save_then_die(trainer, step):
      save(trainer, step)
      raise KeyboardInterrupt("killed after the first checkpoint")

    with mock.patch.object(trainer_lib.Trainer, "_save", save_then_die):
      with self.assertRaises(KeyboardInterrupt):
        self.run_squad(config, model_dir)
    self.assertEqual(tf.train.latest_checkpoint(model_dir), os.path.join(model_dir, "ckpt-1"))
    self.assertFalse(os.path.exists(os.path.join(model_dir, run_records.RESULTS_FILE)))
    with self.assertRaisesRegex(run_records.RunSettingsError, r"seed=0 there, seed=1 now"):
      self.run_squad(config.replace(seed=1), model_dir)
    results = self.run_squad(config, model_dir)
    self.assertEqual((results["resumed_from_step"], results["num_train_steps"]), (1, 3))
    self.assertEqual(tf.train.latest_checkpoint(model_dir), os.path.join(model_dir, "ckpt-3"))


class ResultsMarkdownTest(tf.test.TestCase):

  def test_runs_then_published_figures(self):
    def entry(tuning, f1, trainable, minutes):
      return dict(config=dict(tuning=tuning, epochs=1.0, batch_size=32, learning_rate=1e-3),
                  metrics=dict(exact_match=f1 - 10, f1=f1),
                  parameters=dict(trainable=trainable, trainable_percent_of_base=trainable / 1e5),
                  train_questions=20000, train_windows=20251, train_seconds=60 * minutes,
                  eval_questions=10570)

    lines = question_answering.results_markdown(dict(
        adapters=entry("adapters", 80.5, 606338, 30.0),
        full=entry("full", 81.25, 22713986, 40.0))).splitlines()
    self.assertIn("| adapters | 70.50 | 80.50 | -0.75 | 606,338 | 6.06 | 20,000 (20,251) | 1 | "
                  "32 | 0.001 | 30.0 | 10,570 |", lines)
    self.assertIn("| full | 71.25 | 81.25 | – | 22,713,986 | 227.14 | 20,000 (20,251) | 1 | "
                  "32 | 0.001 | 40.0 | 10,570 |", lines)
    for name, f1 in question_answering.ANCHORS:
      self.assertIn(f"| {name} | {f1} |", lines)
    self.assertIn("| Houlsby et al. 2019 (BERT), adapters m=64 | 90.4 |", lines)

if __name__ == "__main__":
  tf.test.main()

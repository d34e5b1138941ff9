"""Runs whose folders are URLs: TensorFlow's in-memory file system, `ram://`, stands for
`gs://` (Cloud TPU's `--model_dir=gs://...`).

Every record (`run.json`, `results.json`, the completion marker, the lock), checkpoint and
export must go through `tf.io.gfile`: the runs below are trained, interrupted, resumed,
returned, refused and exported in-process on `ram://` while the working directory and the
temporary folder are empty local folders that must stay empty (a folder named `ram:` is what
a path handled as local would leave).
"""

import contextlib
import json
import os
import signal
import tempfile
from unittest import mock
import uuid

import tensorflow as tf
import tensorflow_hub as hub

import keras_adapters
from keras_adapters.hub import testing as hub_testing
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import squad
from keras_adapters.tasks import question_answering
from keras_adapters.data import squad_testing
from keras_adapters.analysis import sweep
from keras_adapters.core import config_definitions
from keras_adapters.core import run_records
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.training import trainer as trainer_lib
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance
from keras_adapters.utils import run_lock


def _files(folder):
  """Every file under `folder`, by its path inside it."""
  return sorted(os.path.join(parent, name)[len(folder) + 1:]
                for parent, _, names in tf.io.gfile.walk(folder) for name in names)


@contextlib.contextmanager
def _sigterm_after_checkpoint(step):
  """SIGTERM to this process once the checkpoint of `step` is saved, as a scheduler sends it:
  the Trainer stops there with `TrainingInterrupted`."""
  save = trainer_lib.Trainer._save  # pylint: disable=protected-access

  def save_then_stop(trainer, saved_step):
    save(trainer, saved_step)
    if saved_step == step:
      os.kill(os.getpid(), signal.SIGTERM)

  with mock.patch.object(trainer_lib.Trainer, "_save", save_then_stop):
    yield


@contextlib.contextmanager
def _recording_start_steps():
  """Yields the list of the steps each `Trainer.train` started (or found finished) at."""
  train, starts = trainer_lib.Trainer.train, []

  def recording_train(trainer):
    result = train(trainer)
    starts.append(result.start_step)
    return result

  with mock.patch.object(trainer_lib.Trainer, "train", recording_train):
    yield starts


class RemoteFileSystemTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Made (locally, where tests keep them) before any local write is watched.
    cls.hub_handle = hub_testing.tiny_hub_handle()
    cls.preprocess_handle = hub_testing.tiny_preprocess_handle(testing.SEQ_LENGTH)
    hub_testing.tiny_preprocess_handle()

  def setUp(self):
    super().setUp()
    self.root = f"ram://remote_filesystem_test/{uuid.uuid4().hex}"

  @contextlib.contextmanager
  def nothing_written_locally(self):
    """Runs the block in an empty working directory with an empty temporary folder, and
    checks that both stay so (but for the code AutoGraph generates, which TensorFlow writes
    to the temporary folder for its own use)."""
    cwd, tmp = self.create_tempdir().full_path, self.create_tempdir().full_path
    previous = os.getcwd()
    os.chdir(cwd)
    try:
      with mock.patch.object(tempfile, "tempdir", tmp), mock.patch.dict(os.environ,
                                                                         TMPDIR=tmp):
        yield
    finally:
      os.chdir(previous)
    self.assertEqual(os.listdir(cwd), [])
    self.assertEqual([name for name in os.listdir(tmp)
                      if not name.startswith("__autograph_generated_file")], [])

  def test_a_classification_run_lives_on_the_url(self):
    """Interrupted at step 2 of 6, resumed there, returned without training, other settings
    refused, a busy folder refused; the export serves and its artifact reloads from
    `ram://`."""
    spec, splits = testing.colour_task()
    # 18 examples in batches of 8: 3 steps an epoch, 6 in all.
    config = testing.run_config(epochs=2.0, checkpoint_every_steps=2)
    model_dir, export_dir = f"{self.root}/run", f"{self.root}/export"

    def run(run_config=config, **kwargs):
      return classification.run_task(spec, splits, run_config, model_dir, progress_bar=False,
                                  **kwargs)

    with self.nothing_written_locally():
      with _sigterm_after_checkpoint(2), self.assertRaisesRegex(
          trainer_lib.TrainingInterrupted, f"at step 2 of 6, saved in {model_dir}/ckpt-2"):
        run(export_dir=export_dir)
      self.assertEqual(tf.train.latest_checkpoint(model_dir), f"{model_dir}/ckpt-2")
      self.assertFalse(tf.io.gfile.exists(f"{model_dir}/{run_lock.LOCK_FILE}"))

      with _recording_start_steps() as starts:
        results = json.loads(json.dumps(run(export_dir=export_dir)))  # As recorded.
      self.assertEqual(starts, [2])
      # The stopped session is named too: the run may have trained under two commits.
      self.assertLen(results[provenance.KEY], 2)
      self.assertEqual(atomic_io.read_json(f"{model_dir}/{run_records.RESULTS_FILE}"),
                       results)

      with mock.patch.object(trainer_lib.Trainer, "_build",
                             side_effect=AssertionError("trained again")):
        self.assertEqual(run(export_dir=export_dir), results)
      with self.assertRaisesRegex(run_records.RunSettingsError,
                                  "learning_rate=0.01 there, learning_rate=0.02 now"):
        run(config.replace(learning_rate=0.02))
      atomic_io.write_json(f"{model_dir}/{run_lock.LOCK_FILE}", dict(
          host="elsewhere", pid=1, token="theirs", command="run_classification.py"))
      with self.assertRaisesRegex(run_lock.ModelDirBusyError, "on host elsewhere"):
        run()
      tf.io.gfile.remove(f"{model_dir}/{run_lock.LOCK_FILE}")

      texts = list(splits["test"].texts[0])
      served = tf.saved_model.load(f"{export_dir}/saved_model").signatures[
          "serving_default"](text=tf.constant(texts))["probabilities"]
      model = keras_adapters.load_task_model(f"{export_dir}/adapters")
      logits = classification.predict(model, splits["test"], hub.load(self.preprocess_handle),
                                   config)
      self.assertAllClose(served, tf.nn.softmax(logits), atol=1e-5)
      self.assertEqual(model.head_config.label_names, testing.LABEL_NAMES)

    files = _files(self.root)
    for expected in ("run/run.json", "run/results.json", "run/sessions.json", "run/ckpt-6.index",
                     f"run/{trainer_lib.COMPLETION_MARKER}",
                     "export/saved_model/saved_model.pb", "export/adapters/adapter_config.json",
                     "export/adapters/adapter_model.safetensors"):
      self.assertIn(expected, files)
    self.assertEmpty([path for path in files if ".partial-" in path])

  def test_a_squad_run_lives_on_the_url(self):
    """Trained, answered (the official files), cached windows and exported on `ram://`;
    rerun, it trains nothing."""
    data_path = squad_testing.write_tiny_squad(
        os.path.join(self.create_tempdir().full_path, "squad.json"))
    data = squad.read_squad_file(data_path, training=True)
    config = config_definitions.ExperimentConfig.from_settings(
        hub_handle=self.hub_handle, preprocess_handle=hub_testing.tiny_preprocess_handle(),
        tuning="full", adapter_size=None, epochs=1.0, batch_size=4, max_seq_length=32)
    squad_config = question_answering.SquadConfig(doc_stride=8, max_query_length=4,
                                            max_answer_length=5)
    model_dir, export_dir = f"{self.root}/squad", f"{self.root}/export"

    def run():
      return question_answering.run_squad(data, data, config, squad_config, model_dir,
                                    feature_cache_dir=f"{self.root}/features",
                                    export_dir=export_dir, progress_bar=False)

    with self.nothing_written_locally():
      results = json.loads(json.dumps(run()))  # As recorded.
      with mock.patch.object(trainer_lib.Trainer, "_train_loop",
                             side_effect=AssertionError("trained again")):
        self.assertEqual(run(), results)
    self.assertEqual(atomic_io.read_json(f"{model_dir}/{question_answering.EVAL_RESULTS_FILE}"),
                     results["metrics"])
    self.assertCountEqual(atomic_io.read_json(f"{model_dir}/{question_answering.PREDICTIONS_FILE}"),
                          data.question_ids)
    self.assertLen(tf.io.gfile.listdir(f"{self.root}/features"), 2)  # Train and eval windows.
    self.assertIn("saved_model/saved_model.pb", _files(export_dir))

  def test_a_split_manifest_on_the_url_is_made_then_reused(self):
    spec, splits = testing.colour_task()
    path = f"{self.root}/splits/colours.json"
    with self.nothing_written_locally():
      first = splits_lib.split_with_manifest(path, spec, splits["train"])
      again = splits_lib.split_with_manifest(path, spec, splits["train"])
      with self.assertRaisesRegex(ValueError, "made with seed 0 .* not seed 1"):
        splits_lib.split_with_manifest(path, spec, splits["train"], seed=1)
    self.assertEqual([list(split.ids) for split in first], [list(split.ids) for split in again])

  def test_a_sweep_copies_a_finished_run_on_the_url_without_its_results(self):
    run_dir, rerun_dir = f"{self.root}/trial", f"{self.root}/rerun"
    for name in ("ckpt-6.index", "checkpoint", run_records.RESULTS_FILE,
                 f"{trainer_lib.SUMMARIES_DIR}/train/events", "export/saved_model.pb"):
      atomic_io.write_text(f"{run_dir}/{name}", name)
    atomic_io.write_text(f"{rerun_dir}/stale", "")
    spec, splits = testing.colour_task()
    with self.nothing_written_locally():
      results = sweep.rerun_finished(spec, splits, testing.run_config(), run_dir, rerun_dir,
                                     run_fn=lambda *args, **kwargs: {"rerun": True})
    self.assertEqual(results, {"rerun": True})
    self.assertEqual(_files(rerun_dir), ["checkpoint", "ckpt-6.index", "export/saved_model.pb"])


if __name__ == "__main__":
  tf.test.main()

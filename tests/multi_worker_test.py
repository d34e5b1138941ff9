"""Multi-worker training: two worker processes on 127.0.0.1, configured by `TF_CONFIG`.

The workers train a tiny adapted encoder with `MultiWorkerMirroredStrategy` into one
`model_dir`. A first pair is killed after the chief's checkpoint of step 2 and a second pair
started on the same folder: it resumes from that checkpoint and ends with the weights of a
one-process run with the same global batch, only the chief's files left. One pair of runs checks
both (each pair of workers costs two processes importing TensorFlow). `_worker_main` is what
each worker process runs.
"""

import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras

from keras_adapters.hub import testing
from keras_adapters.models import adapted_bert
from keras_adapters.models import classifier
from keras_adapters.training import distribution
from keras_adapters.training import trainer
from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUM_WORKERS = 2
_GLOBAL_BATCH = 8
_NUM_STEPS = 4
_SEQ_LENGTH = 8
# Two replicas sum their halves of the batch in another order than one device does.
_TOLERANCE = 1e-5


def _dataset_fn(shuffle_seed):
  rng = np.random.default_rng(0)
  num_examples = 4 * _GLOBAL_BATCH
  features = {
      "input_word_ids": rng.integers(4, testing.TINY_CONFIG["vocab_size"],
                                     (num_examples, _SEQ_LENGTH)).astype(np.int32),
      "input_mask": np.ones((num_examples, _SEQ_LENGTH), np.int32),
      "input_type_ids": np.zeros((num_examples, _SEQ_LENGTH), np.int32)}
  labels = rng.integers(0, 3, num_examples).astype(np.int32)
  return (tf.data.Dataset.from_tensor_slices((features, labels))
          .shuffle(num_examples, seed=shuffle_seed).batch(_GLOBAL_BATCH, drop_remainder=True))


def _make_trainer(handle, model_dir, strategy, eval_fn=None):
  def model_fn():
    # No dropout: its masks would differ between one device and two workers.
    encoder = adapted_bert.AdaptedBert(handle, adapter_size=4, dropout_rate=0.0,
                                       attention_dropout_rate=0.0)
    return classifier.build_classifier(encoder, 3, dropout_rate=0.0, pooling="mean")
  return trainer.Trainer(
      model_fn, keras.losses.SparseCategoricalCrossentropy(
          from_logits=True, reduction=keras.losses.Reduction.NONE),
      _dataset_fn, num_train_steps=_NUM_STEPS, learning_rate=1e-2, model_dir=model_dir,
      strategy=strategy, checkpoint_every_steps=2, seed=3, progress_bar=False,
      eval_fn=eval_fn, eval_every_steps=3 if eval_fn else None)


def _worker_main(handle, model_dir, block_at_step_3):
  """Trains as the worker `TF_CONFIG` names; optionally blocks at step 3 until killed."""
  def block(model):
    del model
    with open(os.path.join(model_dir, f"blocked_{os.getpid()}"), "w", encoding="utf-8"):
      pass
    time.sleep(600)  # Until the test's SIGKILL.
  strategy = distribution.get_strategy("multi_worker_mirrored")
  assert strategy.num_replicas_in_sync == _NUM_WORKERS, strategy.num_replicas_in_sync
  _make_trainer(handle, model_dir, strategy, eval_fn=block if block_at_step_3 else None).train()


def _free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _start_workers(handle, model_dir, log_dir, block_at_step_3=False):
  workers = [f"127.0.0.1:{port}" for port in _free_ports(_NUM_WORKERS)]
  code = ("import os, sys; os.environ['TF_USE_LEGACY_KERAS'] = '1'; "
          f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
          "import multi_worker_test; "
          "multi_worker_test._worker_main(sys.argv[1], sys.argv[2], sys.argv[3] == 'block')")
  processes = []
  for index in range(_NUM_WORKERS):
    tf_config = json.dumps({"cluster": {"worker": workers},
                            "task": {"type": "worker", "index": index}})
    log = open(os.path.join(log_dir, f"worker{index}.log"), "w", encoding="utf-8")
    processes.append(subprocess.Popen(
        warm_python.command("-c", code, handle, model_dir,
                            "block" if block_at_step_3 else "run"),
        cwd=_REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CONFIG=tf_config, TF_CPP_MIN_LOG_LEVEL="2")))
    log.close()
  return processes


class MultiWorkerTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = testing.tiny_hub_handle()
    cls.reference = _make_trainer(cls.handle, tf.compat.v1.test.get_temp_dir() + "/reference",
                                  tf.distribute.get_strategy())
    cls.reference.train()

  def _logs(self, log_dir):
    return "\n".join(open(os.path.join(log_dir, name), encoding="utf-8").read()[-2000:]
                     for name in sorted(os.listdir(log_dir)))

  def _wait(self, processes, log_dir, timeout=300):
    for process in processes:
      try:
        code = process.wait(timeout=timeout)
      except subprocess.TimeoutExpired:
        for p in processes:
          p.kill()
        self.fail(f"A worker did not finish in {timeout} s:\n{self._logs(log_dir)}")
      self.assertEqual(code, 0, self._logs(log_dir))

  def assertMatchesReference(self, model_dir):
    model = self.reference.model
    checkpoint = tf.train.latest_checkpoint(model_dir)
    self.assertEqual(os.path.basename(checkpoint), f"ckpt-{_NUM_STEPS}")
    restored = keras.models.clone_model(model)
    trainer.restore_trained_weights(restored, checkpoint)
    for actual, expected in zip(restored.trainable_weights, model.trainable_weights):
      self.assertAllClose(actual, expected, atol=_TOLERANCE, rtol=0, msg=expected.name)

  def test_killed_workers_resume_from_the_chiefs_checkpoint_and_train_like_one_process(self):
    model_dir, log_dir = self.create_tempdir().full_path, self.create_tempdir().full_path
    processes = _start_workers(self.handle, model_dir, log_dir, block_at_step_3=True)
    deadline = time.time() + 300
    while len([n for n in os.listdir(model_dir) if n.startswith("blocked_")]) < _NUM_WORKERS:
      if time.time() > deadline or any(p.poll() is not None for p in processes):
        for p in processes:
          p.kill()
        self.fail(f"The workers did not reach step 3:\n{self._logs(log_dir)}")
      time.sleep(0.2)
    for process in processes:
      os.kill(process.pid, signal.SIGKILL)
      process.wait()
    self.assertEqual(os.path.basename(tf.train.latest_checkpoint(model_dir)), "ckpt-2")

    self._wait(_start_workers(self.handle, model_dir, log_dir), log_dir)
    self.assertMatchesReference(model_dir)
    # The chief's folder alone: the other worker's temporary folder is gone.
    self.assertNotIn("workertemp_1", os.listdir(model_dir))
    self.assertIn(trainer.COMPLETION_MARKER, os.listdir(model_dir))


if __name__ == "__main__":
  tf.test.main()

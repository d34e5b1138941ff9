"""Tests for stopping a training loop by SIGTERM or Ctrl-C at a step boundary."""

import os
import signal
import threading

import tensorflow as tf

from keras_adapters.utils import stop_requests


class RequestedTest(tf.test.TestCase):

  def test_sigterm_or_a_first_ctrl_c_is_recorded_and_the_handlers_restored(self):
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    for number in (signal.SIGTERM, signal.SIGINT):
      with stop_requests.requested() as stop:
        os.kill(os.getpid(), number)
      self.assertEqual(stop, [number])
      self.assertEqual({number: signal.getsignal(number) for number in before}, before)

  def test_a_second_ctrl_c_stops_at_once(self):
    with self.assertRaises(KeyboardInterrupt):
      with stop_requests.requested() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
    self.assertEqual(stop, [signal.SIGINT])

  def test_disabled_or_off_the_main_thread_the_handlers_stay(self):
    seen = []
    def change(enabled):
      with stop_requests.requested(enabled=enabled):
        seen.append(signal.getsignal(signal.SIGTERM))
    before = signal.getsignal(signal.SIGTERM)
    change(enabled=False)
    thread = threading.Thread(target=change, args=(True,))
    thread.start()
    thread.join()
    self.assertEqual(seen, [before, before])


class TrainingInterruptedTest(tf.test.TestCase):

  def test_names_the_step_and_checkpoint_and_the_shell_s_status(self):
    stop = stop_requests.TrainingInterrupted(signal.SIGTERM, 3, 10, "/runs/a/checkpoint.npz")
    self.assertIsInstance(stop, KeyboardInterrupt)
    self.assertEqual(stop.exit_status, 143)
    self.assertEqual(str(stop), "Stopped by SIGTERM at step 3 of 10, saved in "
                     "/runs/a/checkpoint.npz: rerun the same command to resume from it.")


if __name__ == "__main__":
  tf.test.main()

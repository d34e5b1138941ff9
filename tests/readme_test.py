"""The README's usage example runs and prints what the README says it prints."""

import contextlib
import io
import os
import re

import tensorflow as tf

_README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


class ReadmeTest(tf.test.TestCase):

  def test_usage_example(self):
    """The first Python block, up to training, runs on the default model as written."""
    with open(_README, encoding="utf-8") as f:
      block = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    setup, _ = block.split("model.compile(", 1)
    printed = re.search(r"^# (trainable params: .*)$", setup, re.M).group(1)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
      exec(setup, {})  # pylint: disable=exec-used
    self.assertEqual(output.getvalue().splitlines()[0], printed)

  def test_many_tasks_example(self):
    """The second Python block runs as written: two adapter sets on one base, one deleted."""
    with open(_README, encoding="utf-8") as f:
      block = re.findall(r"```python\n(.*?)```", f.read(), re.S)[1]
    scope = {}
    exec("import keras_adapters as ka\n" + block, scope)  # pylint: disable=exec-used
    self.assertEqual(list(scope["encoder"].adapter_configs), ["default"])
    self.assertEqual(scope["airline"].adapter_name, "default")


if __name__ == "__main__":
  tf.test.main()

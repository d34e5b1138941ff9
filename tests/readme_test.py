"""The README starts with its two set-up commands, and its quick start prints what it says on
the embedded default base (tests/docs_test.py runs every block of it, and of the docs, whole)."""

import contextlib
import io
import os
import re

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN_COMMAND = "bash scripts/setup.sh && .venv/bin/python experiments/run_classification.py"
TEST_COMMAND = ("bash scripts/setup.sh && .venv/bin/lint-imports && "
                ".venv/bin/python -m pytest -q")


def _read(path):
  with open(os.path.join(_REPO, path), encoding="utf-8") as f:
    return f.read()


class ReadmeTest(tf.test.TestCase):

  def test_the_set_up_commands_come_first(self):
    """The README's first two commands are the main job and the tests, as CI runs them."""
    readme = _read("README.md")
    commands = re.findall(r"^    (\S.*)$", readme, re.M)
    self.assertEqual(commands[:2], [MAIN_COMMAND, TEST_COMMAND])
    self.assertLess(readme.index(TEST_COMMAND), readme.index("```"))
    self.assertEqual(_read(".ci/run").splitlines()[-1], TEST_COMMAND)

  def test_the_readme_is_short(self):
    self.assertLessEqual(len(_read("README.md").splitlines()), 200)

  def test_quick_start_prints_its_parameters(self):
    """The quick start, up to training, runs on the default model as written."""
    block = re.search(r"```python\n(.*?)```", _read("README.md"), re.S).group(1)
    setup, _ = block.split("model.compile(", 1)
    printed = re.search(r"^# (trainable params: .*)$", setup, re.M).group(1)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
      exec(setup, {})  # pylint: disable=exec-used
    self.assertEqual(output.getvalue().splitlines()[0], printed)


if __name__ == "__main__":
  tf.test.main()

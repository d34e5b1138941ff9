"""The command lines reach a pip user: one console script per module of keras_adapters.cli
that runs, each resolving to a callable there, and `python -m keras_adapters.cli.<module>`;
the repository's `experiments/<module>.py` is the package's module itself."""

import configparser
import glob
import json
import os
import subprocess
import sys
import types
from unittest import mock

from absl import flags
import tensorflow as tf

from keras_adapters.utils import warm_python

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CLI_DIR = os.path.join(_REPO_ROOT, "keras_adapters", "cli")


def _console_scripts():
  """{script name: "module:function"} as setup.cfg declares them."""
  config = configparser.ConfigParser()
  config.read(os.path.join(_REPO_ROOT, "setup.cfg"))
  lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
  return dict((part.strip() for part in line.split("=")) for line in lines)


def _runnable_modules():
  """The modules of keras_adapters.cli that run as a program (its tests aside)."""
  names = []
  for path in sorted(glob.glob(os.path.join(_CLI_DIR, "*.py"))):
    with open(path, encoding="utf-8") as f:
      if not path.endswith("_test.py") and 'if __name__ == "__main__":' in f.read():
        names.append(os.path.splitext(os.path.basename(path))[0])
  return names


# Imports each "module:function" of stdin's list in turn, as a console script would, and prints
# whether it is a callable and whether `experiments.<module>` is that module. Between two, the
# flags and modules of the last are dropped: some command lines define flags of the same name
# (`--task`), never run in one process.
_RESOLVE = """
import importlib, json, sys
from absl import flags
found = {}
for target in json.load(sys.stdin):
  flags_before, modules_before = set(flags.FLAGS), set(sys.modules)
  module_name, function = target.split(":")
  module = importlib.import_module(module_name)
  repository_name = "experiments." + module_name.rpartition(".")[2]
  found[target] = [callable(getattr(module, function, None)),
                   importlib.import_module(repository_name) is module]
  for name in set(flags.FLAGS) - flags_before:
    delattr(flags.FLAGS, name)
  for name in set(sys.modules) - modules_before:
    if name.startswith(("keras_adapters.cli.", "experiments.")):
      del sys.modules[name]
print(json.dumps(found))
"""


def _run(command, **kwargs):
  return subprocess.run(warm_python.command(*command), cwd=_REPO_ROOT, capture_output=True,
                        text=True, check=False, **kwargs)


class ConsoleScriptsTest(tf.test.TestCase):

  def test_one_console_script_per_command_line_each_a_callable(self):
    scripts = _console_scripts()
    self.assertTrue(all(name.startswith("keras-adapters-") for name in scripts), scripts)
    self.assertEqual(sorted(target.split(":")[0].rpartition(".")[2]
                            for target in scripts.values()), _runnable_modules())
    shared = [f"keras_adapters.cli.{name}:__name__"
              for name in ("cli", "common_flags", "task_flags", "interruption")]
    result = _run(["-c", _RESOLVE], input=json.dumps(list(scripts.values()) + shared))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    found = json.loads(result.stdout.splitlines()[-1])
    # Each console script's function is a callable; and every module, the shared ones too,
    # is the same object through the repository's experiments/ path.
    self.assertEqual(found, {target: [target not in shared, True]
                             for target in list(scripts.values()) + shared})

  def test_python_m_runs_the_module(self):
    # absl's help ends the program with status 1.
    result = _run(["-m", "keras_adapters.cli.run_classification", "--helpfull"])
    self.assertNotIn("Traceback", result.stderr)
    self.assertIn("Trains, evaluates and exports a text classifier", result.stdout)
    self.assertIn("--max_train_examples", result.stdout)

  def test_a_console_script_helps_with_its_commands_doc_and_flags(self):
    # pip's generated `keras-adapters-classify` is a `__main__` without a docstring or flags
    # that calls `run`.
    from keras_adapters.cli import cli  # pylint: disable=g-import-not-at-top
    from keras_adapters.cli import run_classification  # pylint: disable=g-import-not-at-top
    stub = types.ModuleType("__main__")
    with mock.patch.dict(sys.modules, {"__main__": stub}), \
        mock.patch.object(sys, "argv", ["/venv/bin/keras-adapters-classify"]):
      cli._help_from(run_classification)  # pylint: disable=protected-access
      shown = flags.FLAGS.main_module_help()
    self.assertEqual(stub.__doc__, run_classification.__doc__)
    self.assertIn("--[no]full", shown)  # The command's own flags, not only absl's.


if __name__ == "__main__":
  tf.test.main()

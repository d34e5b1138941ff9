"""How a results or benchmark file was made: command, code version, packages and date.

Every writer of a committed record stores `record()` under `KEY`, so that a figure can be
traced to the command and the commit that produced it and rerun:

  atomic_io.write_json(path, provenance.stamped(results))
"""

import datetime
import importlib.metadata
import os
import subprocess
import sys
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from keras_adapters.utils import cpu_kernels

KEY = "provenance"

# The packages whose versions change results: the numerics (tensorflow, tf-keras, numpy), the
# encoders and preprocessing (tf-models-official, tensorflow-hub, tensorflow-text) and the
# no-BERT search (keras-tuner).
PACKAGES = ("tensorflow", "tf-keras", "tf-models-official", "tensorflow-hub",
            "tensorflow-text", "keras-tuner", "numpy")

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where the committed records live. Edits there do not change the code: a run that rewrites
# a record, then another that records its provenance, still ran the commit's code.
RECORD_FOLDERS = ("results", "bench/results")


def stamped(values: Mapping[str, Any], repo_dir: str = REPO_DIR) -> Dict[str, Any]:
  """`values` with this process's `record()` of `repo_dir` under `KEY`."""
  return dict(values, **{KEY: record(repo_dir=repo_dir)})


def record(argv: Optional[Sequence[str]] = None, repo_dir: str = REPO_DIR,
           now: Optional[datetime.datetime] = None) -> Dict[str, Any]:
  """The provenance of a record written now by this process.

  Args:
    argv: The command line; `sys.argv` by default.
    repo_dir: The repository whose commit is recorded; this package's by default.
    now: The time to record; the current time by default.

  Returns:
    `command` (the program relative to the repository, then its arguments), `code`
    (see `code_version`), `packages` (name → version, `None` where not installed) and
    `date_utc` (ISO 8601, seconds) and `machine` (the CPU, its vector extensions and the
    kernels chosen: `cpu_kernels.machine_record`), which every time in the record depends on.
  """
  argv = list(sys.argv if argv is None else argv)
  now = now or datetime.datetime.now(datetime.timezone.utc)
  return dict(command=command_line(argv, repo_dir), code=code_version(repo_dir),
              packages=package_versions(), machine=cpu_kernels.machine_record(),
              date_utc=now.astimezone(datetime.timezone.utc).isoformat(timespec="seconds"))


def command_line(argv: Sequence[str], repo_dir: str = REPO_DIR) -> Optional[str]:
  """`argv` as one shell line, its program relative to `repo_dir` where it lies inside."""
  if not argv:
    return None
  program = argv[0]
  inside = os.path.abspath(program).startswith(os.path.abspath(repo_dir) + os.sep)
  if inside:
    program = os.path.relpath(os.path.abspath(program), repo_dir)
  return subprocess.list2cmdline([program] + list(argv[1:]))


def code_version(repo_dir: str = REPO_DIR,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                 ) -> Dict[str, Any]:
  """The commit of `repo_dir` and whether its tracked files, the records aside, differ from it.

  Without git, or outside a git work tree (an installed copy), `commit` and `clean` are
  `None` and `reason` says why: the record still says what it does not know.

  Args:
    repo_dir: The repository.
    run: `subprocess.run`, replaceable in tests.

  Returns:
    `commit` (40 hex digits or `None`), `clean` (bool or `None`) and, when unknown, `reason`.
  """
  try:
    head = run(["git", "rev-parse", "HEAD"], cwd=repo_dir, capture_output=True, text=True,
               check=False)
    # Untracked files (caches, runs) do not change the code that ran; edits to tracked ones
    # do, but for the records.
    status = run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude){folder}" for folder in RECORD_FOLDERS)],
                 cwd=repo_dir, capture_output=True, text=True, check=False)
  except OSError as e:
    return dict(commit=None, clean=None, reason=f"git could not run: {e}")
  if head.returncode or status.returncode:
    message = (head.stderr or status.stderr).strip().splitlines()[-1:] or ["no message"]
    return dict(commit=None, clean=None,
                reason=f"{repo_dir} is not a git work tree: {message[0]}")
  return dict(commit=head.stdout.strip(), clean=not status.stdout.strip())


def package_versions(packages: Sequence[str] = PACKAGES) -> Dict[str, Optional[str]]:
  """Installed version of each distribution in `packages`, `None` where it is missing."""
  versions = {}
  for name in packages:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = None
  return versions

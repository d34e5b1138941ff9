"""Prints requirements.lock.txt: every package keras_adapters and all its extras need, pinned
to the version installed in this environment.

The set is walked from the package's own declared requirements (setup.cfg) through each
dependency's, so a package installed by hand that nothing declares stays out of the lock.

  .venv/bin/python scripts/lock.py > requirements.lock.txt
"""

import importlib.metadata
import sys

from packaging import markers
from packaging import requirements
from packaging import utils

_ROOT = "keras_adapters"
_HEADER = """\
# The exact versions CI and scripts/setup.sh install (pip install -c requirements.lock.txt):
# keras_adapters' ranges (setup.cfg, extras included) resolved on Python 3.11, Linux x86-64.
# Regenerate after changing a range or adding a dependency or an extra in setup.cfg:
#   bash scripts/setup.sh       (a new package resolves freely; the others keep these pins)
#   .venv/bin/python scripts/lock.py > requirements.lock.txt
# To move everything to the newest versions the ranges allow: empty this file (keep it),
# rm -rf .venv, then the two commands above.
"""


def _applies(requirement, extras):
  """Whether `requirement` is needed on this Python when its dependent has `extras`."""
  if requirement.marker is None:
    return True
  return any(requirement.marker.evaluate(dict(markers.default_environment(), extra=extra))
             for extra in extras or {""})


def locked_versions(root=_ROOT):
  """{canonical name: installed version} of what `root` with all its extras needs."""
  root_extras = importlib.metadata.metadata(root).get_all("Provides-Extra") or []
  pending = [(root, frozenset(root_extras))]
  seen = set()
  versions = {}
  while pending:
    name, extras = pending.pop()
    distribution = importlib.metadata.distribution(name)
    key = utils.canonicalize_name(distribution.metadata["Name"])
    if (key, extras) in seen:
      continue
    seen.add((key, extras))
    if name != root:
      versions[key] = distribution.version
    for line in distribution.requires or []:
      requirement = requirements.Requirement(line)
      if _applies(requirement, extras):
        pending.append((requirement.name, frozenset(requirement.extras)))
  return versions


def main():
  sys.stdout.write(_HEADER)
  for name, version in sorted(locked_versions().items()):
    sys.stdout.write(f"{name}=={version}\n")


if __name__ == "__main__":
  main()

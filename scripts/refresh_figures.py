"""Rewrites every figure the README and the docs quote from a results file as the file gives
it now (`<!-- = ... -->` markers, see tests/readme_figures_test.py), after a rerun changed
the files:

  python scripts/refresh_figures.py

Then read the sentences around each changed figure (`git diff`): a claim may no longer hold.
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

from tests import readme_figures_test  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  for page in readme_figures_test.PAGES:
    path = os.path.join(_REPO, page)
    with open(path, encoding="utf-8") as f:
      text = f.read()
    try:
      refreshed = readme_figures_test.refresh(text)
    except readme_figures_test.FigureError as error:
      sys.exit(f"refresh_figures.py: error: {page}: {error}")
    if refreshed != text:
      with open(path, "w", encoding="utf-8") as f:
        f.write(refreshed)
      print(f"Rewritten: {page}")


if __name__ == "__main__":
  main()

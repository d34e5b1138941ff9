"""Every figure the README and the docs quote from a results file equals the file's value.

The README and every page under `docs/` mark what they quote with HTML comments, invisible
once rendered (each page on its own: a page names the file of its figures before them):

- `<!-- figures: results/airline/analysis/ablation.json -->` names the file that the next
  figures come from (until the next such marker);
- `12.3<!-- = runs.full.median_ms / runs.adapters.median_ms - 1 .1% -->` quotes a figure:
  the text just before the marker (bold `**` aside) must end with the value of the expression
  over that file's JSON, formatted by the last word (a Python format spec: `.2f`, `,.0f`,
  `+.2f`, `.1%`). An expression reads keys as names and attributes (`summary.ms.ours`),
  indexes (`rows[0]`, `scores["0-4"]`), and takes `+ - * /`, `min`, `max`, `abs`,
  `median`, `len` and `tally` (`tally(cases, "verdict")["clear error"]`: how many of a list's
  records hold each value of a key);
- `<!-- same as results/suite.md -->` says that the lines after it are the file's, verbatim:
  a generated table, kept whole.

So a rerun that changes a file fails this test until the README and the docs say the new
figure: `python scripts/refresh_figures.py` rewrites every marked figure from its file
(`refresh`); the sentences around a changed figure are then the writer's to reread.
"""

import ast
import collections
import glob
import json
import operator
import os
import re
import statistics
from typing import Any, List

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The pages that quote figures: the README and the docs site's.
PAGES = ["README.md"] + sorted(
    os.path.relpath(path, _REPO)
    for path in glob.glob(os.path.join(_REPO, "docs", "**", "*.md"), recursive=True))
_MARKER = re.compile(r"<!--\s*(figures:|=|same as)\s*(.*?)\s*-->", re.S)
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv}
_FUNCTIONS = dict(min=min, max=max, abs=abs, median=statistics.median, len=len,
                  tally=lambda records, key: collections.Counter(r[key] for r in records))


def evaluate(expression: str, record: Any) -> Any:
  """The value of `expression` over the JSON `record`, without Python's eval."""

  def value(node):
    if isinstance(node, ast.Expression):
      return value(node.body)
    if isinstance(node, ast.Constant):
      return node.value
    if isinstance(node, ast.Name):
      return record[node.id]
    if isinstance(node, ast.Attribute):
      return value(node.value)[node.attr]
    if isinstance(node, ast.Subscript):
      return value(node.value)[value(node.slice)]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
      return _OPERATORS[type(node.op)](value(node.left), value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
      return -value(node.operand)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS):
      return _FUNCTIONS[node.func.id](*[value(arg) for arg in node.args])
    if isinstance(node, (ast.List, ast.Tuple)):
      return [value(item) for item in node.elts]
    raise ValueError(f"{ast.dump(node)} is not allowed in a figure's expression")

  return value(ast.parse(expression, mode="eval"))


def check(readme: str, repo_dir: str = _REPO, page: str = "README.md") -> List[str]:
  """Every mismatch between `readme`'s marked figures and their files, as messages.

  Args:
    readme: The text of the README or of a docs page.
    repo_dir: The folder the markers' paths are relative to.
    page: Its path, for the messages.

  Returns:
    One message per figure or copied block that differs from its file, names a missing file
    or key, or stands before any `figures:` marker; empty when the README is honest.
  """
  errors, record, source = [], None, None
  lines = readme.splitlines()
  for match in _MARKER.finditer(readme):
    kind = match.group(1)
    argument = " ".join(match.group(2).split())  # A marker may wrap onto the next line.
    line = readme.count("\n", 0, match.start()) + 1
    where = f"{page}:{line}"
    try:
      if kind == "figures:":
        source = argument
        with open(os.path.join(repo_dir, source), encoding="utf-8") as f:
          record = json.load(f)
      elif kind == "same as":
        with open(os.path.join(repo_dir, argument), encoding="utf-8") as f:
          expected = f.read().rstrip("\n").splitlines()
        quoted = lines[line:line + len(expected)]
        if quoted != expected:
          differing = next(i for i, (a, b) in enumerate(zip(quoted + [""] * len(expected),
                                                            expected)) if a != b)
          errors.append(f"{where}: line {line + differing + 1} is "
                        f"{(quoted + [''])[differing]!r}, {argument} has "
                        f"{expected[differing]!r}")
      else:
        errors += _check_figure(readme[:match.start()], argument, record, source, where)
    except (OSError, KeyError, IndexError, TypeError, ValueError, SyntaxError) as e:
      errors.append(f"{where}: {kind} {argument}: {type(e).__name__}: {e}")
  return errors


# A quoted figure as the text writes it: a sign, digits with thousands commas, decimals, an
# exponent, a percent sign; bold `**` may close it.
_QUOTED = re.compile(r"([-+\u2212]?)(\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?%?)(\**)\Z")


class FigureError(ValueError):
  """A marked figure that its file cannot give."""


def refresh(readme: str, repo_dir: str = _REPO) -> str:
  """`readme` with every marked figure rewritten as its file gives it now; the copied blocks
  are left as they are. A minus keeps the text's way of writing it ("-" or U+2212, the
  README's); an ASCII "-" before a figure without a sign stays, as it may be a dash.

  Raises:
    FigureError: A figure's expression does not evaluate over its file (a key the file
      lacks: the record is older than the text, or the expression is misspelt).
  """
  pieces, record, source, end = [], None, None, 0
  for match in _MARKER.finditer(readme):
    kind, argument = match.group(1), " ".join(match.group(2).split())
    if kind == "figures:":
      source = argument
      with open(os.path.join(repo_dir, argument), encoding="utf-8") as f:
        record = json.load(f)
    elif kind == "=":
      expression, spec = argument.rsplit(None, 1)
      quoted = _QUOTED.search(readme, end, match.start())
      if quoted is not None:
        sign, _, bold = quoted.groups()
        try:
          figure = format(evaluate(expression, record), spec)
        except (KeyError, IndexError, TypeError, ValueError) as error:
          raise FigureError(f"<!-- = {argument} --> does not evaluate over {source} "
                            f"({type(error).__name__}: {error}): rerun the command that "
                            "writes it, or mend the expression.") from None
        if figure.startswith("-"):
          figure = ("-" if sign == "-" else "\u2212") + figure[1:]
        start = quoted.start() if figure[0] in "-+\u2212" or sign == "\u2212" else quoted.start(2)
        pieces += [readme[end:start], figure + bold]
        end = match.start()
  return "".join(pieces) + readme[end:]


def _check_figure(before: str, argument: str, record: Any, source: str, where: str):
  if record is None:
    return [f"{where}: a figure before any <!-- figures: <file> --> marker"]
  expression, spec = argument.rsplit(None, 1)
  expected = format(evaluate(expression, record), spec)
  # README text writes a minus as U+2212.
  quoted = before.rstrip("*").replace("\u2212", "-")
  # \Z, not $: a figure may start a line after one that ends with a comma.
  if quoted.endswith(expected) and not re.search(r"[\d.,]\Z", quoted[:-len(expected)]):
    return []
  return [f"{where}: the text says {quoted[-12:]!r} where {source} gives {expected!r} "
          f"({expression})"]


class ReadmeFiguresTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.pages = {}
    for page in PAGES:
      with open(os.path.join(_REPO, page), encoding="utf-8") as f:
        self.pages[page] = f.read()

  def test_every_quoted_figure_equals_its_file(self):
    for page, text in self.pages.items():
      self.assertEqual(check(text, page=page), [], page)

  def test_refresh_rewrites_the_figures_that_differ_and_nothing_else(self):
    root = self.create_tempdir().full_path
    with open(os.path.join(root, "r.json"), "w", encoding="utf-8") as f:
      json.dump(dict(a=83.456, b=-0.5, n=1234567), f)
    page = ("<!-- figures: r.json -->A **80.00<!-- = a .2f -->** and \u22120.10<!-- = b .2f "
            "-->, n 1,000<!-- = n ,d --> of 2 runs, 5.0e-01<!-- = -b .1e -->-1, "
            "(-1.5<!-- = b .1f -->, +0.1<!-- = -b +.1f -->)")
    refreshed = refresh(page, root)
    self.assertEqual(refreshed, "<!-- figures: r.json -->A **83.46<!-- = a .2f -->** and "
                     "\u22120.50<!-- = b .2f -->, n 1,234,567<!-- = n ,d --> of 2 runs, "
                     "5.0e-01<!-- = -b .1e -->-1, (-0.5<!-- = b .1f -->, +0.5<!-- = -b +.1f -->)")
    self.assertEqual(check(refreshed, root), [])
    self.assertEqual(refresh(refreshed, root), refreshed)
    # A key the record lacks (a record older than the text) names the marker and the file.
    with self.assertRaisesRegex(FigureError, r"<!-- = train.lora .2f --> does not evaluate "
                                r"over r.json \(KeyError: 'train'\): rerun the command"):
      refresh("<!-- figures: r.json -->1.00<!-- = train.lora .2f -->", root)

  def test_the_docs_quote_their_results(self):
    markers = [kind for text in self.pages.values() for kind, _ in _MARKER.findall(text)]
    self.assertGreaterEqual(markers.count("="), 280)
    self.assertGreaterEqual(markers.count("same as"), 5)
    # Results at a glance: the README's headline figures are checked too.
    self.assertGreaterEqual([kind for kind, _ in _MARKER.findall(self.pages["README.md"])]
                            .count("="), 4)

  def test_the_issue_23_corrections_would_be_caught(self):
    """The old figures, put back where the docs now quote them, each fail the check."""
    for new, old in (("costs 6%<!--", "costs 12%<!--"), ("6.4%<!--", "8%<!--"),
                     ("2.86<!--", "1.7<!--"), ("4.93<!--", "3.17<!--"),
                     ("−0.55<!--", "−0.7<!--")):
      [page] = [page for page, text in self.pages.items() if new in text]
      self.assertLen(check(self.pages[page].replace(new, old, 1), page=page), 1)

  def test_a_figure_may_start_a_line(self):
    folder = self.create_tempdir().full_path
    with open(os.path.join(folder, "tally.json"), "w", encoding="utf-8") as f:
      json.dump(dict(errors=46, results=18), f)
    text = ("<!-- figures: tally.json -->46<!-- = errors d --> clear errors,\n"
            "18<!-- = results d --> correct results")
    self.assertEqual(check(text, folder), [])
    self.assertLen(check(text.replace("\n18<", "\n1,18<"), folder), 1)

  def test_a_changed_figure_fails(self):
    folder = self.create_tempdir().full_path
    os.makedirs(os.path.join(folder, "bench"))
    with open(os.path.join(folder, "bench", "speed.json"), "w", encoding="utf-8") as f:
      json.dump(dict(runs=[dict(median_ms=854.9), dict(median_ms=1076.9)]), f)
    with open(os.path.join(folder, "table.md"), "w", encoding="utf-8") as f:
      f.write("| a | b |\n|---|---|\n| 1 | 2 |\n")
    honest = ("<!-- figures: bench/speed.json -->A step takes **855<!-- = runs[0].median_ms "
              ".0f -->** ms, **0.79<!-- = runs[0].median_ms / runs[1].median_ms .2f -->** of "
              "a full one, 20.6%<!-- = 1 - runs[0].median_ms / runs[1].median_ms .1% --> "
              "less.\n<!-- same as table.md -->\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    self.assertEqual(check(honest, folder), [])
    for old, new, message in (
        ("**855<", "**854<", "says ' takes **854' where bench/speed.json gives '855'"),
        ("**855<", "**1855<", "gives '855'"),
        ("0.79<", "0.80<", "gives '0.79'"),
        ("20.6%<", "21%<", "gives '20.6%'"),
        ("| 1 | 2 |\n", "| 1 | 3 |\n", "line 5 is '| 1 | 3 |', table.md has '| 1 | 2 |'"),
        ("median_ms .0f", "p90_ms .0f", "KeyError"),
        ("speed.json -->A", "slow.json -->A", "FileNotFoundError")):
      tampered = honest.replace(old, new, 1)
      self.assertNotEqual(tampered, honest)
      errors = check(tampered, folder)
      self.assertNotEmpty(errors)
      self.assertIn(message, errors[0])

  def test_expressions_are_not_python(self):
    with self.assertRaisesRegex(ValueError, "not allowed"):
      evaluate("__import__('os').getcwd()", {})
    self.assertEqual(evaluate('median(a["x-y"]) * 2 - b[1]', {"a": {"x-y": [1, 5, 3]},
                                                             "b": [0, 1]}), 5)
    cases = dict(cases=[dict(verdict="clear error"), dict(verdict="correct result"),
                        dict(verdict="clear error")])
    self.assertEqual(evaluate('tally(cases, "verdict")["clear error"]', cases), 2)
    self.assertEqual(evaluate('len(cases)', cases), 3)


if __name__ == "__main__":
  tf.test.main()

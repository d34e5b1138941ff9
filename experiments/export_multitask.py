r"""Builds one SavedModel that serves several trained tasks on one copy of their base.

Train each task with the existing CLIs (each writes an adapter artifact under
`<export_dir>/adapters`), then:

  python experiments/export_multitask.py \
      --tasks=airline=runs/airline/export/adapters,bbc_news=runs/bbc_news/export/adapters \
      --export_dir=runs/multitask/saved_model

The SavedModel has one signature per task, named after it (that task's raw text in, its
`probabilities` or `scores` out, as its own SavedModel gives them), and `routed` (also
`serving_default`): a batch mixing tasks, `task` (each row's task name), `text` and, if some
task reads pairs, `text_pair`, answered in one pass of the shared encoder with `label`,
`probabilities` and/or `scores`. It loads with `tf.saved_model.load` (after
`import tensorflow_text`) or TF Serving, without this package.
"""

import os

# Set before TensorFlow loads: its C++ start-up lines (CUDA probing on a machine without GPUs,
# CPU features) say nothing a user acts on.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
import logging
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging

from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import multitask_export

flags.DEFINE_list("tasks", None,
                  "The tasks to serve, as name=artifact_folder pairs, e.g. "
                  "airline=runs/airline/export/adapters,bbc_news=runs/bbc_news/export/adapters. "
                  "A name (letters, digits, _) names the task's signature.")
flags.DEFINE_string("export_dir", "runs/multitask/saved_model", "SavedModel folder to write.")
flags.DEFINE_string("hub_handle", None,
                    "The shared base encoder; default: the one the artifacts were saved with.")
flags.DEFINE_string("preprocess_handle", None,
                    "The preprocessing model of every task; default: the ones the artifacts "
                    "record.")
flags.DEFINE_bool("overwrite", False,
                  "Replace --export_dir even if it is a non-empty folder that is not a "
                  "SavedModel.")
flags.mark_flag_as_required("tasks")

FLAGS = flags.FLAGS

# The library's arguments, as this script's flags, for its error messages.
_FLAG_NAMES = {"overwrite=True": "--overwrite", "preprocess_handle=": "--preprocess_handle="}


def parse_tasks(items):
  """`--tasks` items `name=folder` as an ordered dict, or a usage error saying what to give."""
  tasks = {}
  for item in items:
    name, separator, directory = item.partition("=")
    if not separator or not name or not directory:
      raise app.UsageError(f"--tasks: {item!r} is not name=artifact_folder, e.g. "
                           "airline=runs/airline/export/adapters.")
    if name in tasks:
      raise app.UsageError(f"--tasks names {name!r} twice.")
    tasks[name] = directory
  return tasks


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  tasks = parse_tasks(FLAGS.tasks)
  # SavedModel writing logs its internals at INFO and WARNING.
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  if not FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.ERROR)
  try:
    base_handle = FLAGS.hub_handle or adapter_artifact.base_handle(
        adapter_artifact.read_adapter_config(next(iter(tasks.values()))))
    export_dir = multitask_export.export_multitask(
        base_handle, tasks, FLAGS.export_dir, preprocess_handle=FLAGS.preprocess_handle,
        overwrite=FLAGS.overwrite)
  except ValueError as error:  # The library's errors about the artifacts and the base.
    message = str(error)
    for argument, flag in _FLAG_NAMES.items():
      message = message.replace(argument, flag)
    sys.exit(f"export_multitask.py: error: {message}")
  size = sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(export_dir) for name in names)
  print(f"Wrote {export_dir} ({size / 2**20:.1f} MiB): signatures "
        f"{', '.join(tasks)} (one task each) and {multitask_export.ROUTED_SIGNATURE} "
        "(= serving_default, mixed batches).")


if __name__ == "__main__":
  app.run(main)

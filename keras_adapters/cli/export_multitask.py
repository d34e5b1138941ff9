r"""Builds one SavedModel that serves several trained tasks on one copy of their base.

Train each task with the existing CLIs (each writes an adapter artifact under
`<export_dir>/adapters`), then:

  keras-adapters-export-multitask \
      --tasks=airline=runs/airline/export/adapters,bbc_news=runs/bbc_news/export/adapters \
      --export_dir=runs/multitask/saved_model

The SavedModel has one signature per task, named after it (that task's raw text in, its
`probabilities` or `scores` out, as its own SavedModel gives them), and `routed` (also
`serving_default`): a batch mixing tasks, `task` (each row's task name), `text` and, if some
task reads pairs, `text_pair`, answered in one pass of the shared encoder with `label`,
`probabilities` and/or `scores`. It loads with `tf.saved_model.load` (after
`import tensorflow_text`) or TF Serving, without this package.

In a clone of the repository, `python experiments/export_multitask.py` runs the same.
"""

import os

from absl import app
from absl import flags

# Before TensorFlow loads (see cli).
from keras_adapters.cli import cli
from keras_adapters.hub import adapter_artifact
from keras_adapters.serving import multitask_export
import tensorflow as tf  # pylint: disable=g-bad-import-order

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
  if not tasks:
    raise app.UsageError("--tasks is empty: give the tasks to serve as name=artifact_folder "
                         "pairs, e.g. --tasks=airline=runs/airline/export/adapters.")
  return tasks


def main(argv):
  del argv  # cli.run refuses arguments.
  tasks = parse_tasks(FLAGS.tasks)
  # The library's errors about the artifacts and the base name its arguments; cli.run shows
  # them as this script's flags.
  base_handle = FLAGS.hub_handle or adapter_artifact.base_handle(
      adapter_artifact.read_adapter_config(next(iter(tasks.values()))))
  export_dir = multitask_export.export_multitask(
      base_handle, tasks, FLAGS.export_dir, preprocess_handle=FLAGS.preprocess_handle,
      overwrite=FLAGS.overwrite)
  size = sum(tf.io.gfile.stat(os.path.join(root, name)).length
             for root, _, names in tf.io.gfile.walk(export_dir) for name in names)
  print(f"Wrote {export_dir} ({size / 2**20:.1f} MiB): signatures "
        f"{', '.join(tasks)} (one task each) and {multitask_export.ROUTED_SIGNATURE} "
        "(= serving_default, mixed batches).")


def run():
  """The console script `keras-adapters-export-multitask`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

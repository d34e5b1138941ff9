r"""Writes SNLI in the GLUE MNLI layout, so that the GLUE pair pipeline runs on real pairs.

No GLUE data can be fetched offline; SNLI 1.0 (installed by `scripts/setup.sh`) is real
sentence-pair data with MNLI's three classes. This writes the recorded split of the built-in
task `snli` (`keras_adapters/cli/splits/snli.json`) as `<glue_dir>/MNLI/*.tsv`: training split to
`train.tsv`, validation split to `dev_matched.tsv`, SNLI's official test set to
`dev_mismatched.tsv` (so it is scored, as "validation_mismatched") and, unlabelled, to the
two test files. `run_glue.py` then trains on it unchanged:

  keras-adapters-snli-as-mnli --glue_dir=data/snli_glue
  keras-adapters-glue --task=mnli --data_dir=data/snli_glue \
      --model_dir=runs/snli_glue

Its tables say "mnli": the scores are SNLI's. The embedded base model (all-MiniLM-L6-v2) was
itself fine-tuned on SNLI pairs, so its SNLI scores are not those of an unseen task.

In a clone of the repository, `python experiments/snli_as_mnli.py` runs the same.
"""

import os

from absl import flags

from keras_adapters.cli import cli
from keras_adapters.data import builtin_datasets
from keras_adapters.data import snli
from keras_adapters.data import splits as splits_lib

flags.DEFINE_string("glue_dir", None, "GLUE data folder to write MNLI/ into.")
flags.DEFINE_string(
    "split_manifest",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "splits", "snli.json"),
    "The recorded split of the built-in task snli, the one run_classification.py uses.")
flags.mark_flag_as_required("glue_dir")

FLAGS = flags.FLAGS


def main(argv):
  del argv  # cli.run refuses arguments.
  _, splits = builtin_datasets.split_builtin_task("snli", FLAGS.split_manifest)
  split_ids = {name: split.ids for name, split in zip(splits_lib.SPLIT_NAMES, splits)}
  paths = snli.write_mnli_layout(FLAGS.glue_dir, snli.data_dir(), split_ids)
  print(f"SNLI in the GLUE MNLI layout: {', '.join(paths)} (train {len(splits[0]):,}, "
        f"validation {len(splits[1]):,}, test {len(splits[2]):,} pairs).")
  print(f"Train with: python experiments/run_glue.py --task=mnli --data_dir={FLAGS.glue_dir}"
        "\nCaveat: the embedded base model was itself fine-tuned on SNLI pairs.")


def run():
  """The console script `keras-adapters-snli-as-mnli`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

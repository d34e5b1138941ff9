r"""Converts adapters between AdapterHub or peft (PyTorch) and this library's artifacts.

From AdapterHub (what `model.save_adapter(dir, name, with_head=True, use_safetensors=True)`
wrote) to an adapter artifact, which then loads with `load_task_model` and serves through
`export_task_from_artifact` and `keras-adapters-export-multitask`:

  keras-adapters-convert \
      --from_adapterhub=my_adapterhub_adapter --to_artifact=runs/converted/adapters

From an adapter artifact (trained here) to AdapterHub, which loads it with
`model.load_adapter(dir, with_head=True, use_safetensors=True)` into a `BertAdapterModel`:

  keras-adapters-convert \
      --from_artifact=runs/airline/export/adapters --to_adapterhub=airline_adapterhub

AdapterHub's bottleneck adapters, LoRA and (IA)³ convert both ways. So do peft's LoRA
adapters of BERT sequence classifiers (`save_pretrained` of a `LoraConfig(task_type="SEQ_CLS")`
model), with --from_peft / --to_peft in place of --from_adapterhub / --to_adapterhub:

  keras-adapters-convert \
      --from_peft=my_peft_lora --to_artifact=runs/converted/adapters
  keras-adapters-convert \
      --from_artifact=runs/airline_lora/export/adapters --to_peft=airline_peft

Both sides run on the same released base (the embedded default all-MiniLM-L6-v2 unless
--base_handle names another); the adapters, their placement options and the classification
head move exactly.

In a clone of the repository, `python experiments/convert_adapterhub.py` runs the same.
"""

import os

from absl import app
from absl import flags

# Before TensorFlow loads (see cli).
from keras_adapters.cli import cli
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import default_model
from keras_adapters.interop import adapterhub
from keras_adapters.interop import peft
from keras_adapters.models import saving

flags.DEFINE_string("from_adapterhub", None,
                    "An AdapterHub adapter folder (adapter_config.json, adapter.safetensors, "
                    "head_config.json, model_head.safetensors) to convert to --to_artifact.")
flags.DEFINE_string("to_artifact", None, "The adapter artifact folder to write.")
flags.DEFINE_string("from_artifact", None,
                    "An adapter artifact (written by this library's CLIs or save_adapters) to "
                    "convert to --to_adapterhub.")
flags.DEFINE_string("to_adapterhub", None, "The AdapterHub adapter folder to write.")
flags.DEFINE_string("from_peft", None,
                    "A peft LoRA adapter folder (adapter_config.json, "
                    "adapter_model.safetensors) of a BERT sequence classifier to convert to "
                    "--to_artifact.")
flags.DEFINE_string("to_peft", None, "The peft adapter folder to write (from --from_artifact, "
                    "a LoRA task with a one-layer head on BERT's pooler).")
flags.DEFINE_string("base_handle", None,
                    "The base's TF Hub encoder; default: the embedded default (from AdapterHub) "
                    "or the base the artifact records (to AdapterHub).")
flags.DEFINE_string("base_preprocess_handle", None,
                    "From AdapterHub: the base's preprocessing model, recorded in the artifact; "
                    "default: the embedded default's (needed with --base_handle).")
flags.DEFINE_list("text_fields", ["text"],
                  "From AdapterHub: the task's text inputs, one or two (a sentence pair).")
flags.DEFINE_integer("seq_length", 128, "From AdapterHub: the length texts are packed to.")
flags.DEFINE_string("model_name", None,
                    "To AdapterHub or peft: the base's Hugging Face name; default: the "
                    "embedded default's when the artifact runs on it.")
flags.DEFINE_enum("layer_norms", "error", ["error", "file"],
                  "To AdapterHub: 'error' refuses a task whose training changed the base's "
                  "LayerNorms (an AdapterHub adapter cannot carry them); 'file' writes them "
                  "beside the adapter with the PyTorch lines that load them.")
flags.DEFINE_bool("overwrite", False,
                  "Write into the output folder even if it holds files of another kind (only "
                  "the files of the written adapter are replaced; others stay).")

FLAGS = flags.FLAGS


def from_adapterhub():
  """Converts --from_adapterhub to the artifact --to_artifact; returns its folder."""
  return _to_artifact(adapterhub.load_adapterhub, FLAGS.from_adapterhub, "adapterhub")


def from_peft():
  """Converts --from_peft to the artifact --to_artifact; returns its folder."""
  return _to_artifact(peft.load_peft, FLAGS.from_peft, "peft")


def _to_artifact(load, source, library):
  """Loads `source` with `load` (a library's loader) and writes it to --to_artifact."""
  if FLAGS.base_handle and not FLAGS.base_preprocess_handle:
    raise app.UsageError("--base_handle names another base than the default: give its "
                         "preprocessing model too, --base_preprocess_handle.")
  model = load(source, base_handle=FLAGS.base_handle)
  preprocessing = adapter_artifact.PreprocessingConfig(
      FLAGS.base_preprocess_handle or default_model.default_preprocess_handle(),
      tuple(FLAGS.text_fields), FLAGS.seq_length)
  saving.save_adapters(model, FLAGS.to_artifact, label_names=model.head_config.label_names,
                       preprocessing=preprocessing, overwrite=FLAGS.overwrite,
                       metadata=dict(converted_from=library, source=source))
  return FLAGS.to_artifact


def to_adapterhub():
  """Converts the artifact --from_artifact to the AdapterHub folder --to_adapterhub."""
  model = saving.load_task_model(FLAGS.from_artifact, base_handle=FLAGS.base_handle)
  return adapterhub.save_adapterhub(model, FLAGS.to_adapterhub, model_name=FLAGS.model_name,
                                    layer_norms=FLAGS.layer_norms, overwrite=FLAGS.overwrite)


def to_peft():
  """Converts the artifact --from_artifact to the peft folder --to_peft."""
  model = saving.load_task_model(FLAGS.from_artifact, base_handle=FLAGS.base_handle)
  return peft.save_peft(model, FLAGS.to_peft, base_model_name_or_path=FLAGS.model_name,
                        overwrite=FLAGS.overwrite)


def main(argv):
  del argv  # cli.run refuses arguments.
  sources = (FLAGS.from_adapterhub, FLAGS.from_peft, FLAGS.from_artifact)
  targets = (FLAGS.to_artifact, FLAGS.to_adapterhub, FLAGS.to_peft)
  # (conversion, source, target, target flag, what the target holds).
  conversions = [(from_adapterhub, FLAGS.from_adapterhub, FLAGS.to_artifact, "to_artifact",
                  adapter_artifact.ARTIFACT),
                 (from_peft, FLAGS.from_peft, FLAGS.to_artifact, "to_artifact",
                  adapter_artifact.ARTIFACT),
                 (to_adapterhub, FLAGS.from_artifact, FLAGS.to_adapterhub, "to_adapterhub",
                  adapter_artifact.ADAPTERHUB),
                 (to_peft, FLAGS.from_artifact, FLAGS.to_peft, "to_peft", adapter_artifact.PEFT)]
  chosen = [conversion for conversion in conversions if conversion[1] and conversion[2]]
  if len(chosen) != 1 or sum(map(bool, sources)) != 1 or sum(map(bool, targets)) != 1:
    raise app.UsageError(
        "Give one conversion: --from_adapterhub=DIR or --from_peft=DIR with "
        "--to_artifact=DIR, or --from_artifact=DIR with --to_adapterhub=DIR or --to_peft=DIR.")
  convert, source, target, target_flag, kind = chosen[0]
  # Before any work: a conversion never writes over its own source, nor over files of
  # another kind without --overwrite.
  if os.path.realpath(os.path.expanduser(source)) == os.path.realpath(
      os.path.expanduser(target)):
    raise app.UsageError(f"--{target_flag}={target} is the folder being converted: writing "
                         "there would destroy the source. Pick another folder.")
  adapter_artifact.check_output_folder(target, kind, FLAGS.overwrite)
  print(f"Wrote {convert()}.")


def run():
  """The console script `keras-adapters-convert`: `main` on the command line's flags."""
  cli.run(main)


if __name__ == "__main__":
  run()

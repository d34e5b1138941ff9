"""LoRA on the default base: our training step against AdapterHub's and peft's, and merged
inference against the plain base.

Training: a LoRA step (r=8, alpha=8 on query and value of every layer; A and B and the head
trained; the base, its LayerNorms included, frozen, as peft and AdapterHub keep it) on the
AdapterHub harness's batch of 32 x 128 token ids (`synthetic_batch.npz`, 2 classes), by

* keras_adapters: `AdaptedBert(handle, adapter_config=LoRAConfig(r=8, alpha=8))` with the
  classification head, the `Trainer`'s step (`harness.make_train_step`);
* AdapterHub (`adapters` 1.3): `adapters.LoRAConfig(r=8, alpha=8)`, `train_adapter`;
* peft 0.21: `get_peft_model(BertForSequenceClassification, LoraConfig(task_type="SEQ_CLS",
  r=8, lora_alpha=8, target_modules=["query", "value"]))`;

the PyTorch sides by bench/peer_step.py in the harness's venv (`--peer_python`), all on
all-MiniLM-L6-v2. They are timed in turns, ours, AdapterHub, peft, ours, ... (`--rounds`), each
setup in a fresh process: `--warmup_steps` untimed steps, then `--steps` steps each timed alone
(forward, loss, backward, one optimiser update, the loss read back as a number); the figure is
their median. Each round gives the ratio of our median to the faster peer's; the headline is
the median over rounds (the issue's target: at most 0.60).

`--precision=bfloat16` trains every side with bfloat16 compute and float32 weights: ours under
Keras' `mixed_bfloat16` policy (`--mixed_precision=bfloat16`), the peers under
`torch.autocast("cpu", dtype=torch.bfloat16)`. Both reach the CPU's bfloat16 instructions
(AVX512_BF16) through oneDNN where it has them; inference stays float32. Give it its own
file, so the float32 record stays:

  python bench/lora_speed.py --precision=bfloat16 \
      --output=bench/results/lora_speed_bfloat16.json

Inference, in one fresh process after the training rounds, every setup in turns
(`--infer_steps` timed calls each, after `--warmup_steps`) on the same batch: the plain
base with a head, the LoRA task model unmerged and merged (`keras_adapters.merge`), all on the
harness's token ids; and two single-task SavedModels (`export_task`) answering the same 32
texts through their serving signature: the plain base's and the LoRA task's, merged at export
(the default). The texts are long enough to fill all 128 positions, so both SavedModels run
the same token ids (`export.real_token_share` says how many are real tokens). Figures: merged
/ plain SavedModel (target: at most 1.03), merged / plain and unmerged / plain in Keras, and
the largest difference between merged and unmerged logits (target: at most 1e-5) and between
the merged SavedModel's and the unmerged model's probabilities. The LoRA task has random
trained weights (B is not zero), as a trained task would.

The results keep the CPU's model and vector extensions (`machine`), the machine's load
averages before and after, and the CPU other processes used during the PyTorch steps. The
recorded run (bench/results/lora_speed.json) is the defaults', with the harness's venv
installed (`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`, which also has
peft):

  python bench/lora_speed.py

Without the harness's venv it says where it looked and exits 0 without writing anything.
Results go to bench/results/lora_speed.json and Markdown tables on stdout.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import shutil
import statistics
import tempfile

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # pylint: disable=unused-import  (the preprocessing models' ops)
import tf_keras as keras

import harness
from keras_adapters.data import builtin_datasets
from keras_adapters.models import classifier
from keras_adapters.models import merging
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing
from keras_adapters.serving import task_export
from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import precision

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH_DIR = os.path.join(_REPO_DIR, "bench")
_NUM_CLASSES = 2
RANK = 8
ALPHA = 8.0
PEERS = ("adapterhub", "peft")
# The targets, as upper bounds.
TARGETS = dict(train_ours_over_faster_peer=0.60, infer_merged_export_over_plain_export=1.03,
               max_abs_difference_merged_vs_unmerged=1e-5)
# Inference setups, in the order they take turns.
INFER_SETUPS = ("plain", "lora_unmerged", "lora_merged", "export_plain", "export_merged")
# Airline texts joined per request: enough to fill 128 tokens.
_TEXTS_PER_REQUEST = 12

flags.DEFINE_integer("rounds", 3, "Turns of (ours, AdapterHub, peft) training steps.",
                     lower_bound=1)
flags.DEFINE_integer("steps", 8, "Timed training steps per setup and round.", lower_bound=1)
flags.DEFINE_integer("infer_steps", 15, "Timed forward passes per inference setup, in turns.",
                     lower_bound=1)
flags.DEFINE_integer("warmup_steps", 3, "Untimed calls first, per setup and round (ours trace "
                     "the graph in the first).", lower_bound=0)
harness.define_peer_flags()
harness.define_child_processes_flag()
flags.DEFINE_string("hub_handle", None,
                    "TF Hub BERT encoder; default: the embedded all-MiniLM-L6-v2, the peers' "
                    "model.")
flags.DEFINE_string("preprocess_handle", None,
                    "Its matching preprocessing SavedModel; default: the embedded one.")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                  "Compute dtype of every side's training step (weights stay float32).")
flags.DEFINE_integer("seq_length", 128, "Packed length of the SavedModels' requests.",
                     lower_bound=2)
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "lora_speed.json"),
                    "Where to write the results (JSON).")
flags.DEFINE_string("work_dir", None, "Internal: the folder of the exports.")
flags.DEFINE_string("child", None, "Internal: `train`, `export` or `infer`, measured in this "
                    "process, its JSON printed.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "infer_steps", "warmup_steps", "peer_dir", "hub_handle",
                    "preprocess_handle", "seq_length", "precision", "work_dir")


def lora_config():
  return keras_adapters.LoRAConfig(r=RANK, alpha=ALPHA, target_modules=("query", "value"))


def _peer_batch():
  """The harness's batch as our encoder's inputs, and its labels."""
  with np.load(os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")) as batch:
    inputs = dict(input_word_ids=batch["input_ids"], input_mask=batch["attention_mask"],
                  input_type_ids=batch["token_type_ids"])
    return ({key: tf.constant(value, tf.int32) for key, value in inputs.items()},
            tf.constant(batch["labels"], tf.int32))


def _measure_train():
  """Our LoRA training step, timed alone in this process on the harness's batch."""
  keras.utils.set_random_seed(0)
  with precision.policy_scope(FLAGS.precision):
    model = classifier.build_classifier(
        keras_adapters.AdaptedBert(FLAGS.hub_handle, adapter_config=lora_config()),
        _NUM_CLASSES)
    step = harness.make_train_step(model, FLAGS.warmup_steps + FLAGS.steps)
  inputs, labels = _peer_batch()
  seconds = harness.time_calls(lambda: step(inputs, labels).numpy(), steps=FLAGS.steps,
                               warmup_steps=FLAGS.warmup_steps)
  return dict(library="keras_adapters", precision=model.compute_dtype,
              warmup_steps=FLAGS.warmup_steps,
              timed_steps=len(seconds), **harness.parameter_counts(model),
              trainable_layer_norm=sum(int(np.prod(v.shape)) for v in model.trainable_variables
                                       if "layer_norm" in v.name.lower()),
              **harness.summarize_ms(seconds), peak_rss_mib=harness.peak_rss_mib())


def _artifact_dir():
  return os.path.join(FLAGS.work_dir, "lora_task")


def _export_dirs():
  return {name: os.path.join(FLAGS.work_dir, name) for name in ("export_plain", "export_merged")}


def _export():
  """The LoRA task's artifact (random trained weights) and both single-task SavedModels."""
  model_testing.save_random_task_artifact(
      _artifact_dir(), FLAGS.hub_handle, FLAGS.preprocess_handle, num_classes=_NUM_CLASSES,
      seq_length=FLAGS.seq_length, pooling="cls", adapter_config=lora_config())
  dirs = _export_dirs()
  task_export.export_task_from_artifact(_artifact_dir(), dirs["export_merged"],
                                        base_handle=FLAGS.hub_handle,
                                        preprocess_handle=FLAGS.preprocess_handle)
  plain = harness.build_model(FLAGS.hub_handle, "full", _NUM_CLASSES)
  task_export.export_task(plain, hub.load(FLAGS.preprocess_handle), dirs["export_plain"],
                          seq_length=FLAGS.seq_length,
                          label_names=[f"class{i}" for i in range(_NUM_CLASSES)])
  return dict(export_bytes={name: harness.folder_bytes(path) for name, path in dirs.items()})


def request_texts(texts, count, per_request=_TEXTS_PER_REQUEST):
  """`count` requests, each `per_request` consecutive texts joined (cycling over `texts`)."""
  if not texts:
    raise ValueError("No texts to make requests of.")
  return [" ".join(texts[(i * per_request + j) % len(texts)] for j in range(per_request))
          for i in range(count)]


def _measure_infer():
  """Every inference setup in turns in this process, and the differences between them."""
  inputs, _ = _peer_batch()
  batch_size = int(inputs["input_word_ids"].shape[0])
  plain = harness.build_model(FLAGS.hub_handle, "full", _NUM_CLASSES)
  unmerged = saving.load_task_model(_artifact_dir(), base_handle=FLAGS.hub_handle)
  merged = saving.load_task_model(_artifact_dir(), base_handle=FLAGS.hub_handle)
  merged_projections = merging.merge(merged)
  forwards = {name: harness.make_forward(model)
              for name, model in (("plain", plain), ("lora_unmerged", unmerged),
                                  ("lora_merged", merged))}
  _, examples = builtin_datasets.load_builtin_task("airline")
  texts = tf.constant(request_texts(list(examples.texts[0]), batch_size))
  preprocessor = hub.load(FLAGS.preprocess_handle)
  packed = task_export.pack_texts(preprocessor, [texts], FLAGS.seq_length)
  serving = {name: tf.saved_model.load(path).signatures["serving_default"]
             for name, path in _export_dirs().items()}
  runs = {name: (lambda f=forward: f(inputs).numpy()) for name, forward in forwards.items()}
  runs.update({name: (lambda f=function: f(text=texts)["probabilities"].numpy())
               for name, function in serving.items()})
  seconds = harness.time_interleaved({name: runs[name] for name in INFER_SETUPS},
                                     rounds=FLAGS.infer_steps, warmup_steps=FLAGS.warmup_steps)
  unmerged_probabilities = tf.nn.softmax(forwards["lora_unmerged"](packed), axis=-1).numpy()
  return dict(
      times={name: harness.summarize_ms(s) for name, s in seconds.items()},
      warmup_steps=FLAGS.warmup_steps, timed_steps=FLAGS.infer_steps,
      merged_projections=merged_projections,
      max_abs_difference_merged_vs_unmerged=float(
          np.abs(runs["lora_merged"]() - runs["lora_unmerged"]()).max()),
      max_abs_difference_merged_export_vs_unmerged_probabilities=float(
          np.abs(runs["export_merged"]() - unmerged_probabilities).max()),
      max_abs_logit_unmerged=float(np.abs(runs["lora_unmerged"]()).max()),
      max_abs_difference_merged_vs_plain=float(
          np.abs(runs["lora_merged"]() - runs["plain"]()).max()),
      export=dict(batch_size=batch_size, seq_length=FLAGS.seq_length,
                  real_token_share=float(np.mean(packed["input_mask"].numpy()))),
      peak_rss_mib=harness.peak_rss_mib())


def _measure_peer(library):
  """One PyTorch side's step, by bench/peer_step.py in the harness's venv, fresh process."""
  return harness.run_peer_step(
      FLAGS.peer_python, harness.peer_env(), library=library, method="lora",
      batch=os.path.join(FLAGS.peer_dir, "synthetic_batch.npz"), threads=os.cpu_count(),
      warmup=FLAGS.warmup_steps, steps=FLAGS.steps, precision=FLAGS.precision)


def round_ratios(train):
  """The training ratios of one round.

  Args:
    train: Setup (`keras_adapters`, `adapterhub`, `peft`) → its figures (`median_ms`).

  Returns:
    Ratio name → value, and `faster_peer`: the peer whose step was faster this round.
  """
  ms = {name: figures["median_ms"] for name, figures in train.items()}
  faster_peer = min(PEERS, key=lambda name: ms[name])
  return dict(faster_peer=faster_peer,
              train_ours_over_faster_peer=ms["keras_adapters"] / ms[faster_peer],
              train_ours_over_adapterhub=ms["keras_adapters"] / ms["adapterhub"],
              train_ours_over_peft=ms["keras_adapters"] / ms["peft"])


def infer_ratios(infer):
  """The inference ratios, from the inference child's `times` (setup → `median_ms`)."""
  ms = {name: figures["median_ms"] for name, figures in infer["times"].items()}
  return dict(infer_merged_export_over_plain_export=ms["export_merged"] / ms["export_plain"],
              infer_merged_over_plain=ms["lora_merged"] / ms["plain"],
              infer_unmerged_over_plain=ms["lora_unmerged"] / ms["plain"])


def _figure(name, value, **extra):
  figure = (harness.against_target(value, TARGETS[name]) if name in TARGETS
            else dict(value=value))
  return dict(figure, **extra)


def summarize(rounds, infer):
  """Medians over rounds, the ratios against their targets, the largest differences.

  Args:
    rounds: One dict per training round with `train` (setup → figures with `median_ms`) and
      `ratios` (from `round_ratios`).
    infer: The inference child's figures (`times`: setup → `median_ms`, the differences).

  Returns:
    `train_ms` (setup → median over rounds of its median), `infer_ms` (setup → median),
    `ratios` (name → value, `against_target` where the issue sets one; the training ratios'
    value is the median over rounds, with the per-round values) and the largest differences
    (merged vs unmerged logits against its target).
  """
  median = statistics.median
  ratios = {}
  for name in rounds[0]["ratios"]:
    if name != "faster_peer":
      values = [r["ratios"][name] for r in rounds]
      ratios[name] = _figure(name, median(values), per_round=values)
  ratios["train_ours_over_faster_peer"]["faster_peer_per_round"] = [
      r["ratios"]["faster_peer"] for r in rounds]
  ratios.update({name: _figure(name, value) for name, value in infer_ratios(infer).items()})
  return dict(
      train_ms={name: median([r["train"][name]["median_ms"] for r in rounds])
                for name in rounds[0]["train"]},
      infer_ms={name: figures["median_ms"] for name, figures in infer["times"].items()},
      ratios=ratios,
      max_abs_difference_merged_vs_unmerged=_figure(
          "max_abs_difference_merged_vs_unmerged",
          infer["max_abs_difference_merged_vs_unmerged"]),
      max_abs_difference_merged_export_vs_unmerged_probabilities=infer[
          "max_abs_difference_merged_export_vs_unmerged_probabilities"])


def machine_load(before, after, peer_foreign_cores):
  """How busy the machine was: load averages before and after the run, and the mean CPU other
  processes used during the PyTorch sides' timed steps; `quiet` if the 1-minute load was
  below 1.5 before the run and the peers saw less than 0.15 foreign cores on average."""
  foreign = statistics.fmean(peer_foreign_cores) if peer_foreign_cores else None
  return dict(load_average_before=list(before), load_average_after=list(after),
              peer_steps_mean_foreign_cpu_cores=foreign,
              quiet=before[0] < 1.5 and (foreign is None or foreign < 0.15))


def _table(summary):
  names = {"keras_adapters": "keras_adapters (ours)", "adapterhub": "AdapterHub 1.3",
           "peft": "peft 0.21"}
  tables = [harness.markdown_table(
      ["LoRA training step (r=8, 32 x 128)", "Median ms"],
      [[names[name], ms] for name, ms in summary["train_ms"].items()])]
  infer_names = {"plain": "plain base (Keras, token ids)",
                 "lora_unmerged": "LoRA unmerged (Keras, token ids)",
                 "lora_merged": "LoRA merged (Keras, token ids)",
                 "export_plain": "plain base SavedModel (texts)",
                 "export_merged": "LoRA merged SavedModel (texts)"}
  tables.append(harness.markdown_table(
      ["Inference (32 x 128)", "Median ms"],
      [[infer_names[name], ms] for name, ms in summary["infer_ms"].items()]))
  rows = [[name.replace("_", " "), ratio["value"],
           ", ".join(f"{v:.3f}" for v in ratio.get("per_round", [])),
           f"<= {ratio['target']}" if "target" in ratio else "",
           ratio["met"] if "met" in ratio else ""]
          for name, ratio in summary["ratios"].items()]
  difference = summary["max_abs_difference_merged_vs_unmerged"]
  rows.append(["max abs difference merged vs unmerged logits", f"{difference['value']:.1e}",
               "", f"<= {difference['target']:.0e}", difference["met"]])
  tables.append(harness.markdown_table(["Figure", "Value", "Per round", "Target", "Met"], rows))
  return "\n\n".join(tables)


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  # Before anything is timed: a precision that a cap on the CPU kernels would crash.
  cpu_kernels.check_sixteen_bit(FLAGS.precision)
  if FLAGS.child:
    measure = dict(train=_measure_train, export=_export, infer=_measure_infer)[FLAGS.child]
    harness.report_to_parent(measure())
    return
  batch_path = os.path.join(FLAGS.peer_dir, "synthetic_batch.npz")
  for path in (FLAGS.peer_python, batch_path):
    if not os.path.exists(path):
      print(f"Skipped: the AdapterHub harness is not installed ({path} does not exist). "
            "Install it with `bash <peer_dir>/install.sh ~/.cache/adapterhub-peer/venv` (see "
            "its README), or point --peer_dir / --peer_python at it.")
      return
  # Resolved once here, so that every child measures the same encoder.
  harness.resolve_hub_handle()
  harness.resolve_preprocess_handle()
  load_before = os.getloadavg()
  FLAGS.work_dir = tempfile.mkdtemp(prefix="lora_speed_")
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  script = os.path.abspath(__file__)
  rounds = []
  try:
    print("Making the LoRA task and its SavedModels...", flush=True)
    exports = harness.run_timing_child(script, "export", forwarded, _export)
    for number in range(1, FLAGS.rounds + 1):
      train = {}
      print(f"[round {number}/{FLAGS.rounds}] training step, ours...", flush=True)
      train["keras_adapters"] = harness.run_child(script, "train", forwarded)
      for library in PEERS:
        print(f"[round {number}/{FLAGS.rounds}] training step, {library}...", flush=True)
        train[library] = _measure_peer(library)
      rounds.append(dict(train=train, ratios=round_ratios(train)))
    print("Inference, every setup in turns...", flush=True)
    infer = harness.run_timing_child(script, "infer", forwarded, _measure_infer)
  finally:
    shutil.rmtree(FLAGS.work_dir, ignore_errors=True)
  peer_foreign = [r["train"][library]["foreign_cpu_cores"]["mean"]
                  for r in rounds for library in PEERS]
  summary = summarize(rounds, infer)
  first = rounds[0]["train"]
  record = dict(
      benchmark="lora_speed", machine=harness.machine_info(),
      machine_load=machine_load(load_before, os.getloadavg(), peer_foreign),
      versions=dict(peers=first["peft"]["versions"]),
      settings=dict({name: value for name, value in forwarded.items() if name != "work_dir"},
                    peer_dir=os.path.relpath(FLAGS.peer_dir, _REPO_DIR), rounds=FLAGS.rounds,
                    r=RANK, alpha=ALPHA, target_modules=["query", "value"],
                    num_classes=_NUM_CLASSES,
                    threads=dict(ours=f"TensorFlow's default: as many as the machine's cores "
                                      f"({os.cpu_count()} here)",
                                 peers={name: first[name]["threads"] for name in PEERS})),
      trainable_params={name: (figures["trainable_params"] if name == "keras_adapters"
                               else figures["params"]["trainable"])
                        for name, figures in first.items()},
      exports=exports, summary=summary, rounds=rounds, infer=infer)
  harness.write_record(FLAGS.output, record)
  print(_table(summary))
  if not record["machine_load"]["quiet"]:
    print(f"Warning: measured under load ({record['machine_load']}).")
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

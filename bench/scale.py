"""Cost as the work grows: BERT-base and BERT-large shapes, 512 tokens, many tasks, AVX2.

Training steps (`rows`, mode "train"): for each shape, each length (32 x 128 and 8 x 512
tokens) and each method (adapters m=64 with the LayerNorms and the head, LoRA r=8 alpha=8 on
query and value with the head, full fine-tuning), ours (`AdaptedBert` with the classification
head, the `Trainer`'s step: `harness.make_train_step`) and AdapterHub's (`adapters` 1.3,
bench/peer_step.py in the harness's venv: `DoubleSeqBnConfig` m=64 with the LayerNorms,
`LoRAConfig(r=8, alpha=8)`, or every parameter) are timed one after the other, ours then
theirs, each in a fresh process: `--warmup_steps` untimed steps, then `--steps` steps each
timed alone (forward, loss, backward, one optimiser update, the loss read back as a number);
`step_ms` is their median. `peak_mb` is the process's resident high-water mark (VmHWM,
`ru_maxrss`) minus its resident memory just before the model is built (TensorFlow or PyTorch
already loaded): what the model, its activations, gradients and optimiser take.

Shapes: "default" is the embedded all-MiniLM-L6-v2 (6 layers, width 384; AdapterHub loads the
same trained weights); "base" (L=12, H=768, A=12, I=3072) and "large" (L=24, H=1024, A=16,
I=4096) are genuine TF Hub exports with random weights, written once by the Model Garden's
exporter (`export_tfhub_lib`, through `model_garden_export.export_encoder`) into the cache
(`--work_dir`, never committed) and loaded by `AdaptedBert` as a user's Hub handle; AdapterHub
gets a `BertConfig` of the same shape with random weights. Random token ids, all real tokens.

Inference (mode "infer"): per shape and length, the plain encoder with its head and the same
with adapters, in one fresh process, in turns (`--infer_steps` calls each).

Many tasks (`tasks`): adapter tasks (m=64, random trained weights, `--distinct_tasks` of
them cycled) on the default base, one multi-task SavedModel per count in `--num_tasks`:
export seconds, size on disk, then in a fresh process the load seconds, the resident memory
the loaded model adds (`rss_mb`), the routed signature's latency on a batch of 32 texts whose
requests name min(tasks, 32) different tasks against the same batch all for one task
(`mixed_latency_ratio`), in turns, and the resident memory after serving (`served_rss_mb`);
then in another fresh process the memory after serving one mixed batch from a Session that
imports the whole SavedModel as one graph, every signature in it (`session_rss_mb`:
`tf.compat.v1.saved_model.loader`, a proxy for TF Serving, which loads it the same way and
is not run here). A rerun measures only the task
counts `tasks` lacks: delete that list to measure it again.

CPUs: `--isa=native` runs on this CPU as it is. `--isa=avx2` emulates an AVX2-only x86 CPU on
an AVX-512 one: oneDNN limited to AVX2 (`ONEDNN_MAX_CPU_ISA=AVX2`, both sides), PyTorch's
own kernels and MKL too (`ATEN_CPU_CAPABILITY=avx2`, `MKL_ENABLE_INSTRUCTIONS=AVX2`);
TensorFlow's Eigen kernels are built for AVX in its wheels whatever the CPU. `--isa=avx2_eigen`
is that CPU with TensorFlow's own default there (oneDNN off, `TF_ENABLE_ONEDNN_OPTS=0`),
which keras_adapters replaces (utils/cpu_kernels.py), ours only: the gain of that choice.

Resumable: every finished row is written to `--output` at once, and a rerun measures only
the rows it lacks. After a change of the code, `--remeasure_before=<UTC time>` measures the
planned rows recorded before that time again, each new row in its old one's place (the docs
name rows by place); rerun with the same time, it resumes. The recorded run, with the harness
venv installed (`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`), alone on the
machine:

  python bench/scale.py
  python bench/scale.py --isa=avx2 --shapes=default,base
  python bench/scale.py --isa=avx2_eigen --shapes=default,base --libraries=keras_adapters

Results: bench/results/scale.json (`rows`, `tasks`, `targets`, machine, provenance), and
beside it scale.md (its tables, also on stdout), scale_steps.png and scale_tasks.png.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import datetime
import json
import shutil
import statistics
import time

from absl import app
from absl import flags
import tensorflow as tf

import harness
import process_memory
import random_bert
from keras_adapters.data import builtin_datasets
from keras_adapters.models import adapter_config
from keras_adapters.models import testing as model_testing
from keras_adapters.serving import multitask_export
from keras_adapters.utils import atomic_io
from keras_adapters.utils import provenance

# Layers, width, heads, feed-forward width of BERT-base and BERT-large; the default base is
# the embedded model.
SHAPES = {"default": None, **random_bert.SHAPES}
BATCH_OF_LENGTH = {128: 32, 512: 8}
METHODS = ("adapters", "lora", "full")
LIBRARIES = ("keras_adapters", "adapterhub")
# What each emulated CPU sets in the environment of ours and of theirs.
ISAS = {"native": dict(ours={}, theirs={}),
        "avx2": dict(ours=dict(ONEDNN_MAX_CPU_ISA="AVX2"),
                     theirs=dict(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2",
                                 MKL_ENABLE_INSTRUCTIONS="AVX2")),
        "avx2_eigen": dict(ours=dict(ONEDNN_MAX_CPU_ISA="AVX2", TF_ENABLE_ONEDNN_OPTS="0"),
                           theirs=None)}
_NUM_CLASSES = 2
# The targets, as upper bounds on ratios.
TARGETS = dict(adapter_step_over_adapterhub=0.60, adapter_peak_over_full_large=0.70,
               adapter_peak_over_adapterhub=1.0, full_peak_over_adapterhub=1.0,
               tasks_size_over_base_plus_artifacts=1.05,
               mixed_latency_ratio=1.15, adapter_inference_over_plain=1.06)
_PLAIN = "full"  # The `harness.SETUPS` entry without adapters: the plain encoder.

flags.DEFINE_list("shapes", list(SHAPES), f"Shapes to measure, of {list(SHAPES)}.")
flags.DEFINE_list("seq_lengths", [str(n) for n in BATCH_OF_LENGTH],
                  f"Lengths to measure, of {list(BATCH_OF_LENGTH)} (batch 32 at 128, 8 at 512).")
flags.DEFINE_list("methods", list(METHODS), f"Training methods, of {list(METHODS)}.")
flags.DEFINE_list("libraries", list(LIBRARIES), f"Whose steps to time, of {list(LIBRARIES)}.")
flags.DEFINE_enum("isa", "native", list(ISAS), "The CPU: this one, or an AVX2-only one "
                  "emulated (with TensorFlow's default kernels there: avx2_eigen).")
flags.DEFINE_integer("steps", 3, "Timed training steps per row.", lower_bound=1)
flags.DEFINE_integer("warmup_steps", 1, "Untimed steps first (ours trace the graph).",
                     lower_bound=0)
flags.DEFINE_integer("infer_steps", 5, "Timed forward passes of each inference setup.",
                     lower_bound=1)
flags.DEFINE_list("num_tasks", ["1", "8", "64", "128"],
                  "Task counts of the many-tasks table; empty: skip it.")
flags.DEFINE_integer("distinct_tasks", 8, "Different random tasks, cycled over the count.",
                     lower_bound=1)
flags.DEFINE_integer("memory_limit_mb", None, "Stop a training row whose process passes it "
                     "(recorded as stopped, its peak above what it reached); default: the "
                     "machine's memory less 1.5 GB.", lower_bound=1)
flags.DEFINE_bool("inference", True, "Measure the inference rows.")
flags.DEFINE_string("remeasure_before", None, "Measure the planned rows recorded before this "
                    "UTC time (ISO 8601, e.g. 2026-11-30T03:00) again, in their places.")
flags.DEFINE_string("hub_handle", None, "The default shape's encoder; default: the embedded "
                    "all-MiniLM-L6-v2, which AdapterHub loads too.")
flags.DEFINE_string("preprocess_handle", None, "Its preprocessing, for the many-tasks "
                    "SavedModels; default: the embedded one.")
flags.DEFINE_string("work_dir", random_bert.WORK_DIR,
                    "Cache of the exports (random encoders, tasks, multi-task SavedModels).")
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "scale.json"),
                    "Where the results go (JSON; the plots beside it); read to resume.")
flags.DEFINE_string("child", None, "Internal: what this process measures.")
flags.DEFINE_string("row", None, "Internal: the row a child measures (JSON).")
harness.define_peer_flags()
harness.define_child_processes_flag()

FLAGS = flags.FLAGS


# --------------------------------------------------------------------------- the encoders
def encoder_dir(shape):
  """Where the export of `shape` lives (the embedded model for "default")."""
  if SHAPES[shape] is None:
    return FLAGS.hub_handle or keras_adapters.default_hub_handle()
  return random_bert.export_dir(shape, FLAGS.work_dir)


def _export_encoder(shape):
  """Writes the random TF Hub export of `shape` with the Model Garden's exporter."""
  start = time.perf_counter()
  random_bert.export(shape, encoder_dir(shape))
  return dict(export_s=time.perf_counter() - start)


def _ensure_encoder(shape):
  if not os.path.isdir(encoder_dir(shape)):
    print(f"Exporting a random {shape} encoder with the Model Garden's exporter...", flush=True)
    harness.run_child(os.path.abspath(__file__), "export", dict(
        row=json.dumps(dict(shape=shape)), work_dir=FLAGS.work_dir))


# --------------------------------------------------------------------------- children
def _train_child(row):
  """Ours: one training row, in this fresh process."""
  baseline = harness.resident_mib()
  process_memory.guard(FLAGS.memory_limit_mb, baseline_rss_mib=baseline)
  return harness.measure_training(
      encoder_dir(row["shape"]), row["method"], _NUM_CLASSES, batch_size=row["batch"],
      seq_length=row["seq"], steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps,
      baseline_mib=baseline)


def _infer_child(row):
  """Ours: the plain encoder and the adapters' inference, in turns, in this process."""
  models = {setup: harness.build_model(encoder_dir(row["shape"]), setup, _NUM_CLASSES)
            for setup in (_PLAIN, "adapters")}
  inputs, _ = harness.random_batch(models[_PLAIN], row["batch"], row["seq"], _NUM_CLASSES)
  calls = {}
  for setup, model in models.items():
    forward = harness.make_forward(model)
    calls[setup] = lambda forward=forward: forward(inputs).numpy()
  seconds = harness.time_interleaved(calls, rounds=FLAGS.infer_steps,
                                     warmup_steps=FLAGS.warmup_steps)
  return {setup: 1e3 * statistics.median(s) for setup, s in seconds.items()}


def _task_artifacts():
  """`--distinct_tasks` adapter tasks with random trained weights, made once."""
  folder = os.path.join(FLAGS.work_dir, "tasks", "artifacts")
  artifacts = [os.path.join(folder, f"task{i}") for i in range(FLAGS.distinct_tasks)]
  for index, artifact in enumerate(artifacts):
    if not os.path.isdir(artifact):
      model_testing.save_random_task_artifact(
          artifact, encoder_dir("default"), _preprocess_dir(), num_classes=2 + index % 4,
          seq_length=128, seed=index,
          adapter_config=adapter_config.AdapterConfig(adapter_size=harness.ADAPTER_SIZE))
  return artifacts


def _preprocess_dir():
  return FLAGS.preprocess_handle or keras_adapters.default_preprocess_handle()


def _tasks_export_dir(num_tasks):
  return os.path.join(FLAGS.work_dir, "tasks", f"multitask_{num_tasks}")


def _tasks_export_child(row):
  artifacts = _task_artifacts()
  start = time.perf_counter()
  multitask_export.export_multitask(
      encoder_dir("default"),
      {f"task{i}": artifacts[i % len(artifacts)] for i in range(row["num_tasks"])},
      _tasks_export_dir(row["num_tasks"]), overwrite=True)
  return dict(export_s=time.perf_counter() - start)


def mixed_tasks(num_tasks, batch_size):
  """The task of each request of the mixed batch: as many different tasks as fit, spread."""
  distinct = min(num_tasks, batch_size)
  return [f"task{(i % distinct) * (num_tasks // distinct)}" for i in range(batch_size)]


def request_texts(count):
  """`count` airline tweets, cycled: real requests of the built-in task."""
  _, test = builtin_datasets.load_builtin_task("airline")
  texts = list(test.texts[0])
  return [texts[i % len(texts)] for i in range(count)]


def _tasks_load_child(row):
  baseline = harness.resident_mib()
  start = time.perf_counter()
  routed = tf.saved_model.load(_tasks_export_dir(row["num_tasks"])).signatures[
      multitask_export.ROUTED_SIGNATURE]
  load_s = time.perf_counter() - start
  rss = harness.resident_mib() - baseline
  texts = tf.constant(request_texts(row["batch"]))
  batches = dict(mixed=mixed_tasks(row["num_tasks"], row["batch"]),
                 one_task=["task0"] * row["batch"])
  calls = {kind: (lambda tasks=tf.constant(tasks):
                  routed(task=tasks, text=texts)["probabilities"].numpy())
           for kind, tasks in batches.items()}
  seconds = harness.time_interleaved(calls, rounds=FLAGS.infer_steps,
                                     warmup_steps=FLAGS.warmup_steps)
  ms = {kind: 1e3 * statistics.median(s) for kind, s in seconds.items()}
  return dict(load_s=load_s, rss_mb=rss, served_rss_mb=harness.resident_mib() - baseline,
              mixed_ms=ms["mixed"], one_task_ms=ms["one_task"],
              distinct_tasks_in_batch=len(set(batches["mixed"])))


def _tasks_session_child(row):
  """Memory with the SavedModel loaded as TF Serving loads it, every signature in one graph
  of one Session (where `tf.saved_model.load` gives each its own copy of the functions it
  calls): `tf.compat.v1.saved_model.loader`, the proxy, since TF Serving is not run here;
  measured after serving one mixed batch."""
  baseline = harness.resident_mib()
  graph = tf.Graph()
  with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
    signature = tf.compat.v1.saved_model.loader.load(
        session, [tf.saved_model.SERVING], _tasks_export_dir(row["num_tasks"])
    ).signature_def[multitask_export.ROUTED_SIGNATURE]
    session.run(signature.outputs["probabilities"].name, {
        signature.inputs["task"].name: mixed_tasks(row["num_tasks"], row["batch"]),
        signature.inputs["text"].name: request_texts(row["batch"])})
    return dict(session_rss_mb=harness.resident_mib() - baseline)


_CHILDREN = dict(export=lambda row: _export_encoder(row["shape"]), train=_train_child,
                 infer=_infer_child, tasks_export=_tasks_export_child,
                 tasks_load=_tasks_load_child, tasks_session=_tasks_session_child)


# --------------------------------------------------------------------------- the parent
def _folder_mb(path):
  return harness.folder_bytes(path) / 2**20


def row_key(row):
  return tuple(row.get(field) for field in ("mode", "library", "shape", "seq", "method", "isa"))


def _theirs(row, env):
  shape = SHAPES[row["shape"]]
  measured = harness.run_peer_step(
      FLAGS.peer_python, harness.peer_env(**env), library="adapterhub", method=row["method"],
      shape="minilm" if shape is None else ",".join(str(shape[key]) for key in (
          "num_layers", "hidden_size", "num_attention_heads", "intermediate_size")),
      batch_size=row["batch"], seq_length=row["seq"], threads=os.cpu_count(),
      warmup=FLAGS.warmup_steps, steps=FLAGS.steps, memory_limit_mib=FLAGS.memory_limit_mb)
  if measured.get("out_of_memory"):
    return _stopped_or_measured(measured)
  return dict(step_ms=measured["median_ms"], times_ms=measured["times_ms"],
              peak_mb=measured["peak_over_baseline_mib"],
              baseline_mb=measured["baseline_rss_mib"],
              trainable_params=measured["params"]["trainable"],
              total_params=measured["params"]["total"],
              foreign_cpu_cores=measured["foreign_cpu_cores"]["mean"],
              versions=measured["versions"]["packages"])


def _child_args(row):
  return dict(row=json.dumps(row), work_dir=FLAGS.work_dir, hub_handle=FLAGS.hub_handle,
              preprocess_handle=FLAGS.preprocess_handle, steps=FLAGS.steps,
              warmup_steps=FLAGS.warmup_steps, infer_steps=FLAGS.infer_steps,
              distinct_tasks=FLAGS.distinct_tasks, memory_limit_mb=FLAGS.memory_limit_mb)


def _planned_rows():
  """Every row the flags ask for, ours and theirs adjacent, in the order they are measured."""
  env = ISAS[FLAGS.isa]
  libraries = [name for name in FLAGS.libraries
               if name == "keras_adapters" or env["theirs"] is not None]
  rows = []
  for shape in FLAGS.shapes:
    for seq in (int(n) for n in FLAGS.seq_lengths):
      common = dict(shape=shape, seq=seq, batch=BATCH_OF_LENGTH[seq], isa=FLAGS.isa)
      rows += [dict(mode="train", library=library, method=method, **common)
               for method in FLAGS.methods for library in libraries]
      if FLAGS.inference and "keras_adapters" in libraries:
        rows += [dict(mode="infer", library="keras_adapters", method=method, **common)
                 for method in ("plain", "adapters")]
  return rows


def _measure(row):
  env = ISAS[row["isa"]]
  script = os.path.abspath(__file__)
  if row["library"] == "adapterhub":
    return dict(row, **_theirs(row, env["theirs"]))
  if row["mode"] == "train":
    return dict(row, **_stopped_or_measured(
        harness.run_child(script, "train", _child_args(row), env["ours"])))
  both = harness.run_timing_child(script, "infer", _child_args(row), lambda: _infer_child(row),
                                  env["ours"])
  return [dict(row, method=method, step_ms=both[setup])
          for method, setup in (("plain", _PLAIN), ("adapters", "adapters"))]


def _stopped_or_measured(measured):
  """A child's training row as measured, or, when the memory guard stopped it before the
  machine ran out, what it had reached: its peak is above `out_of_memory_mb`."""
  if not measured.get("out_of_memory"):
    return measured
  return dict(step_ms=None, peak_mb=None, baseline_mb=measured["baseline_rss_mib"],
              out_of_memory_mb=measured["resident_mb"] - measured["baseline_rss_mib"],
              memory_limit_mb=measured["limit_mb"])


def _measure_tasks(number):
  """The many-tasks table's row of `number` tasks: export, then load and serve, fresh processes."""
  row = dict(num_tasks=number, batch=32, isa=FLAGS.isa)
  script = os.path.abspath(__file__)
  exported = harness.run_timing_child(script, "tasks_export", _child_args(row),
                                      lambda: _tasks_export_child(row))
  loaded = harness.run_child(script, "tasks_load", _child_args(row))
  loaded.update(harness.run_child(script, "tasks_session", _child_args(row)))
  artifact_mb = _folder_mb(os.path.join(FLAGS.work_dir, "tasks", "artifacts", "task0"))
  base_mb = _folder_mb(encoder_dir("default")) + _folder_mb(_preprocess_dir())
  size_mb = _folder_mb(_tasks_export_dir(number))
  shutil.rmtree(_tasks_export_dir(number), ignore_errors=True)  # Gigabytes at 128 tasks.
  return dict(row, size_mb=size_mb, export_s=exported["export_s"], **loaded,
              mixed_latency_ratio=loaded["mixed_ms"] / loaded["one_task_ms"],
              artifact_mb=artifact_mb, base_mb=base_mb,
              size_over_base_plus_artifacts=size_mb / (base_mb + number * artifact_mb))


def _ratio_check(name, where, numerator, denominator):
  return dict(where, name=name, **harness.against_target(numerator / denominator,
                                                         TARGETS[name]))


def _peak_check(name, where, row, other):
  """`row`'s peak memory over `other`'s. A row the memory guard stopped peaks above what it
  reached, so the ratio is then a bound (`bound`: "at least" or "at most") and the verdict
  known only when the bound settles it (`met`: None otherwise); none if both were stopped."""
  stopped = [r["peak_mb"] is None for r in (row, other)]
  if all(stopped):
    return []
  peak = lambda r: r["out_of_memory_mb"] if r["peak_mb"] is None else r["peak_mb"]
  check = _ratio_check(name, where, peak(row), peak(other))
  if stopped[0]:
    check.update(bound="at least", met=False if not check["met"] else None)
  elif stopped[1]:
    check.update(bound="at most", met=True if check["met"] else None)
  return [check]


def targets(rows, tasks):
  """Each of the issue's targets where its rows are measured: value, bound and verdict."""
  found = {row_key(row): row for row in rows}
  checks = []
  for row in rows:
    if row["library"] != "keras_adapters" or row["method"] not in ("adapters", "full"):
      continue
    where = dict(shape=row["shape"], seq=row["seq"], isa=row["isa"])
    other = lambda mode, library, method, r=row: found.get(
        (mode, library, r["shape"], r["seq"], method, r["isa"]))
    if row["method"] == "full":
      theirs = other("train", "adapterhub", "full")
      if row["mode"] == "train" and theirs:
        checks += _peak_check("full_peak_over_adapterhub", where, row, theirs)
      continue
    if row["mode"] == "infer":
      plain = other("infer", "keras_adapters", "plain")
      if plain:
        checks.append(_ratio_check("adapter_inference_over_plain", where, row["step_ms"],
                                   plain["step_ms"]))
      continue
    theirs = other("train", "adapterhub", "adapters")
    if theirs and None not in (row["step_ms"], theirs["step_ms"]):
      checks.append(_ratio_check("adapter_step_over_adapterhub", where, row["step_ms"],
                                 theirs["step_ms"]))
    if theirs:
      checks += _peak_check("adapter_peak_over_adapterhub", where, row, theirs)
    full = other("train", "keras_adapters", "full")
    if full and row["shape"] == "large":
      checks += _peak_check("adapter_peak_over_full_large", where, row, full)
  for task_row in tasks:
    where = dict(num_tasks=task_row["num_tasks"], isa=task_row["isa"])
    checks.append(dict(where, name="tasks_size_over_base_plus_artifacts",
                       **harness.against_target(task_row["size_over_base_plus_artifacts"],
                                                TARGETS["tasks_size_over_base_plus_artifacts"])))
    checks.append(dict(where, name="mixed_latency_ratio",
                       **harness.against_target(task_row["mixed_latency_ratio"],
                                                TARGETS["mixed_latency_ratio"])))
  return checks


def _number(value, spec):
  return "–" if value is None else format(value, spec)


def _peak(row):
  """A row's peak memory for a table: "> n" when the memory guard stopped it at n MB."""
  if row is not None and row.get("out_of_memory_mb") is not None:
    return f"> {row['out_of_memory_mb']:,.0f} (stopped)"
  return _number(None if row is None else row["peak_mb"], ",.0f")


def tables(record):
  """The record as Markdown: training, inference, many tasks, targets."""
  found = {row_key(row): row for row in record["rows"]}
  shapes = list(SHAPES)
  train = sorted({(r["isa"], shapes.index(r["shape"]), r["seq"], METHODS.index(r["method"]))
                  for r in record["rows"] if r["mode"] == "train"})
  lines = []
  for isa, shape_index, seq, method_index in train:
    shape, method = shapes[shape_index], METHODS[method_index]
    ours, theirs = (found.get(("train", library, shape, seq, method, isa))
                    for library in LIBRARIES)
    field = lambda row, key: None if row is None else row[key]
    ratio = lambda key: (None if None in (field(ours, key), field(theirs, key))
                         else ours[key] / theirs[key])
    lines.append([isa, shape, f"{BATCH_OF_LENGTH[seq]} x {seq}", method,
                  _number(field(ours, "step_ms"), ",.0f"), _number(field(theirs, "step_ms"),
                                                                   ",.0f"),
                  _number(ratio("step_ms"), ".2f"), _peak(ours), _peak(theirs),
                  _number(ratio("peak_mb"), ".2f")])
  training = harness.markdown_table(
      ["CPU", "shape", "batch x seq", "method", "ours ms", "AdapterHub ms", "ratio",
       "ours MB", "AdapterHub MB", "ratio"], lines)
  infer = sorted({(r["isa"], shapes.index(r["shape"]), r["seq"])
                  for r in record["rows"] if r["mode"] == "infer"})
  lines = []
  for isa, shape_index, seq in infer:
    plain, adapters = (found.get(("infer", "keras_adapters", shapes[shape_index], seq, method,
                                  isa)) for method in ("plain", "adapters"))
    lines.append([isa, shapes[shape_index], f"{BATCH_OF_LENGTH[seq]} x {seq}",
                  _number(plain["step_ms"], ",.0f"), _number(adapters["step_ms"], ",.0f"),
                  _number(adapters["step_ms"] / plain["step_ms"], ".3f")])
  inference = harness.markdown_table(
      ["CPU", "shape", "batch x seq", "plain ms", "with adapters ms", "ratio"], lines)
  tasks = harness.markdown_table(
      ["tasks", "size MB", "base + tasks x artifact MB", "export s", "load s",
       "RSS MB loaded", "RSS MB served", "RSS MB served, one graph",
       "mixed / one-task latency"],
      [[t["num_tasks"], f"{t['size_mb']:,.1f}",
        f"{t['base_mb'] + t['num_tasks'] * t['artifact_mb']:,.1f}", f"{t['export_s']:.1f}",
        f"{t['load_s']:.1f}", f"{t['rss_mb']:,.0f}", f"{t['served_rss_mb']:,.0f}",
        f"{t['session_rss_mb']:,.0f}", f"{t['mixed_latency_ratio']:.2f}"]
       for t in record["tasks"]])
  checks = harness.markdown_table(
      ["target", "where", "value", "bound", "met"],
      [[c["name"], ", ".join(f"{k}={c[k]}" for k in ("shape", "seq", "num_tasks", "isa")
                             if k in c),
        {None: "", "at least": "> ", "at most": "< "}[c.get("bound")] + f"{c['value']:.2f}",
        c["target"],
        {True: "yes", False: "no", None: "unknown"}[c["met"]]] for c in record["targets"]])
  machine = record["machine"]
  return (f"Measured on {machine['cpu_model']} ({machine['cpu_count']} cores), CPUs "
          "'avx2' and 'avx2_eigen' emulated on it (bench/scale.py's docstring).\n\n"
          f"Training steps, median ms, and peak memory over the process's footprint before "
          f"the model, MB (\"stopped\": the memory guard stopped the run before it exhausted "
          f"the machine's memory; its peak is higher):\n\n{training}\n\n"
          f"Inference, median ms per batch:\n\n{inference}\n\n"
          f"Many tasks in one SavedModel (default base):\n\n{tasks}\n\n"
          f"Targets:\n\n{checks}\n")


def _plot(record, output):
  """scale_steps.png (step time and peak memory by shape) and scale_tasks.png."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  stem = os.path.splitext(output)[0]
  train = [r for r in record["rows"] if r["mode"] == "train" and r["isa"] == "native"]
  if train:
    figure, axes = pyplot.subplots(2, 2, figsize=(11, 8))
    for column, seq in enumerate(BATCH_OF_LENGTH):
      for row_index, (field, label) in enumerate((("step_ms", "training step (s)"),
                                                  ("peak_mb", "peak memory (GB)"))):
        axis = axes[row_index][column]
        for library in LIBRARIES:
          for method in METHODS:
            points = [(list(SHAPES).index(r["shape"]), r[field] / 1e3) for r in train
                      if r["seq"] == seq and r["library"] == library
                      and r["method"] == method and r[field] is not None]
            if points:
              axis.plot(*zip(*sorted(points)), marker="o",
                        linestyle="-" if library == "keras_adapters" else "--",
                        label=f"{method}, {library}")
        axis.set_xticks(range(len(SHAPES)), list(SHAPES))
        axis.set_ylabel(label)
        axis.set_title(f"batch {BATCH_OF_LENGTH[seq]} x {seq} tokens")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.suptitle(f"Training cost by shape ({record['machine']['cpu_model']}, "
                    f"{record['machine']['cpu_count']} cores)")
    figure.tight_layout()
    figure.savefig(f"{stem}_steps.png", dpi=90)
    pyplot.close(figure)
  tasks = record["tasks"]
  if tasks:
    figure, axes = pyplot.subplots(1, 2, figsize=(11, 4))
    numbers = [t["num_tasks"] for t in tasks]
    axes[0].plot(numbers, [t["size_mb"] for t in tasks], marker="o", label="size on disk")
    for key, label in (("rss_mb", "resident after tf.saved_model.load"),
                       ("served_rss_mb", "resident after serving"),
                       ("session_rss_mb", "resident after serving, one graph (Session)")):
      axes[0].plot(numbers, [t[key] for t in tasks], marker="o", label=label)
    axes[0].set_ylabel("MB")
    axes[1].plot(numbers, [t["mixed_latency_ratio"] for t in tasks], marker="o")
    axes[1].axhline(TARGETS["mixed_latency_ratio"], color="grey", linestyle=":",
                    label="target")
    axes[1].set_ylabel("mixed batch / one-task batch latency")
    for axis in axes:
      axis.set_xscale("log", base=2)
      axis.set_xlabel("tasks in one SavedModel")
      axis.grid(alpha=0.3)
      axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(f"{stem}_tasks.png", dpi=90)
    pyplot.close(figure)


def _record(rows, tasks):
  return dict(benchmark="scale", machine=harness.machine_info(), rows=rows, tasks=tasks,
              targets=targets(rows, tasks),
              settings=dict(steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps,
                            infer_steps=FLAGS.infer_steps, distinct_tasks=FLAGS.distinct_tasks,
                            adapter_size=harness.ADAPTER_SIZE, lora_rank=harness.LORA_RANK,
                            isas={name: value for name, value in ISAS.items()},
                            peak_memory=("peak_mb: the process's resident high-water mark "
                                         "minus its resident memory just before the model "
                                         "is built, each row in a fresh process")))


def _check_flags():
  """Refuses bad flags, every bad value at once on one line (all of them fixed before the
  next try); returns `--remeasure_before` as a UTC time, or None without it."""
  problems, remeasure_before = [], None
  for name, allowed in (("shapes", SHAPES), ("methods", METHODS), ("libraries", LIBRARIES),
                        ("seq_lengths", [str(n) for n in BATCH_OF_LENGTH])):
    unknown = sorted(set(FLAGS[name].value) - set(allowed))
    if unknown:
      problems.append(f"--{name} takes {', '.join(map(str, allowed))}; got {unknown}.")
  try:
    remeasure_before = _remeasure_before()
  except app.UsageError as error:
    problems.append(str(error))
  if problems:
    raise app.UsageError(" ".join(problems))
  if "adapterhub" in FLAGS.libraries and not os.path.exists(FLAGS.peer_python):
    raise app.UsageError(
        f"AdapterHub's venv is not at --peer_python={FLAGS.peer_python}. Install it with "
        "`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv`, or pass "
        "--libraries=keras_adapters.")
  return remeasure_before


def _remeasure_before():
  """`--remeasure_before` as a UTC time, or None without it."""
  if FLAGS.remeasure_before is None:
    return None
  try:
    when = datetime.datetime.fromisoformat(FLAGS.remeasure_before)
  except ValueError:
    raise app.UsageError(f"--remeasure_before takes an ISO 8601 UTC time such as "
                         f"2026-11-30T03:00; got {FLAGS.remeasure_before!r}.") from None
  return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _stale(row, remeasure_before):
  """Whether `row` was recorded before `remeasure_before` (a UTC time, or None)."""
  return (remeasure_before is not None and
          datetime.datetime.fromisoformat(row["provenance"]["date_utc"]) < remeasure_before)


def main(argv):
  del argv
  if FLAGS.child:
    harness.report_to_parent(_CHILDREN[FLAGS.child](json.loads(FLAGS.row)))
    return
  remeasure_before = _check_flags()
  previous = {}
  if os.path.exists(FLAGS.output):
    with open(FLAGS.output, encoding="utf-8") as f:
      previous = json.load(f)
  rows = previous.get("rows", [])
  tasks = previous.get("tasks", [])
  place = {row_key(row): index for index, row in enumerate(rows)}

  def save():
    harness.write_record(FLAGS.output, _record(rows, tasks))

  for row in _planned_rows():
    if row_key(row) in place and not _stale(rows[place[row_key(row)]], remeasure_before):
      continue
    _ensure_encoder(row["shape"])
    print(f"Measuring {row}...", flush=True)
    measured = _measure(row)
    for new in measured if isinstance(measured, list) else [measured]:
      new = dict(new, provenance=provenance.record())  # Rows come from many runs.
      if row_key(new) in place:
        rows[place[row_key(new)]] = new
      else:
        place[row_key(new)] = len(rows)
        rows.append(new)
    save()
  measured_tasks = {row["num_tasks"] for row in tasks}
  for number in (int(n) for n in FLAGS.num_tasks if FLAGS.isa == "native"):
    if number not in measured_tasks:
      print(f"Many tasks: exporting, loading and serving {number} task(s)...", flush=True)
      tasks.append(dict(_measure_tasks(number), provenance=provenance.record()))
      save()
  save()
  with open(FLAGS.output, encoding="utf-8") as f:
    record = json.load(f)
  _plot(record, FLAGS.output)
  text = tables(record)
  atomic_io.write_text(os.path.splitext(FLAGS.output)[0] + ".md", text)
  print(text)


if __name__ == "__main__":
  cli.run(main)

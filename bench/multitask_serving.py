"""Serving many tasks from one base: one multi-task SavedModel against one SavedModel per task,
and AdapterDrop (Rücklé et al. 2021).

With `--num_tasks` tasks (5; their artifacts from `--tasks`, or made with random weights on
the base: sizes and speed do not depend on the values), in one invocation:

* size on disk of the multi-task SavedModel (`export_multitask`) against the tasks' single-task
  SavedModels (`export_task`), and against its target: the base SavedModel plus every task's
  artifact, plus at most 5%;
* the latency of a mixed batch of `--batch_size` (64) requests spread over the tasks (texts of
  the test split of `--task`): answered by the routed signature in one call, by each task's
  signature of the multi-task SavedModel on its share of the requests, and by each task's own
  SavedModel on its share; timed in turns in one child process, with the largest difference
  between the routed answers and the single-task SavedModels' answers;
* the cold-load time (loading every SavedModel of a layout, then the first answer) and the peak
  memory of each layout, each alone in its own child process;
* AdapterDrop: the trained task artifact `--artifact` (the README's main command,
  `python experiments/run_classification.py`, writes one for airline) with the adapters of its
  first k layers dropped, k = 0..L: test accuracy on `--task` and the median latency of a
  batch, timed in turns.
* per-example cost as the number of tasks grows, for each method of `--scaling_methods`
  (LoRA r=8 and (IA)³, random weights): one multi-task SavedModel each of
  `--scaling_num_tasks` (1, 8, 64) tasks answering a routed batch of `--scaling_batch_size`
  (32) requests, the tasks taking the requests in turn (8 tasks: 4 requests each; 64: one
  task per request, 32 of them), and the same SavedModel answering the batch all for its
  first task (a one-task batch); all timed in turns in one child process, against the
  one-task SavedModel's batch (`task_scaling`: milliseconds per example and their ratio to
  it). Tasks beyond `--scaling_distinct_tasks` (8) reuse the random weights of the first
  ones under their own names: serving gathers each example's row of the stacked weights of
  every task whatever their values.

Full benchmark, on an otherwise idle machine, after the README's main command:

  python bench/multitask_serving.py

Results go to bench/results/multitask_serving.json and Markdown tables on stdout.

The task-scaling section alone, added to the recorded results (every other key kept as it
was measured; the section has its own `machine` and `provenance`), on an otherwise idle
machine:

  python bench/multitask_serving.py --only_task_scaling
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import shutil
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # pylint: disable=unused-import  (the preprocessing models' ops)

import harness
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import hub_encoder
from keras_adapters.serving import multitask_export
from keras_adapters.serving import task_export
from keras_adapters.models import adapter_config
from keras_adapters.models import saving
from keras_adapters.models import testing as model_testing
from keras_adapters.data import builtin_datasets
from keras_adapters.data import features
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification
from keras_adapters.utils import atomic_io
from keras_adapters.utils import paths
from keras_adapters.utils import provenance

_REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The issue's target: the multi-task SavedModel weighs the base plus the tasks' artifacts,
# plus at most this fraction.
_MAX_SIZE_OVERHEAD = 0.05
_LAYOUTS = ("multitask", "single")

harness.define_batch_benchmark_flags(
    steps=10, steps_help="Timed calls per setup, taken in turns with the other setups.",
    output_name="multitask_serving.json",
    child_help="measure `load:<multitask|single>`, `times` or `adapter_drop` and print its "
    "JSON.")
flags.FLAGS.set_default("batch_size", 64)
harness.define_child_processes_flag()
flags.DEFINE_list("tasks", None,
                  "Served tasks as name=artifact_folder pairs; default: --num_tasks tasks with "
                  "random weights on the base.")
flags.DEFINE_integer("num_tasks", 5, "Tasks made when --tasks is not given.", lower_bound=1)
flags.DEFINE_integer("adapter_size", 64, "Adapter size of the tasks made.", lower_bound=1)
flags.DEFINE_string("preprocess_handle", None,
                    "Preprocessing of the tasks made; default: the embedded one.")
flags.DEFINE_string("task", "airline",
                    "Built-in task whose test split gives the requests and scores AdapterDrop.")
flags.DEFINE_string("artifact", os.path.join(_REPO_DIR, "runs", "classification", "export",
                                             "adapters"),
                    "Trained artifact of --task for AdapterDrop.")
flags.DEFINE_bool("adapter_drop", True, "Measure AdapterDrop (needs --artifact).")
flags.DEFINE_integer("max_test_examples", 0,
                     "Score AdapterDrop on the first N test examples only (0: all).",
                     lower_bound=0)
flags.DEFINE_list("scaling_methods", ["lora", "ia3"],
                  "Methods whose per-example cost is measured as the number of tasks grows "
                  "(lora, ia3, adapters); empty skips it.")
flags.DEFINE_list("scaling_num_tasks", ["1", "8", "64"],
                  "Numbers of tasks of the task-scaling SavedModels; the first is the "
                  "reference.")
flags.DEFINE_integer("scaling_batch_size", 32, "Requests of a task-scaling batch.",
                     lower_bound=1)
flags.DEFINE_integer("scaling_distinct_tasks", 8,
                     "Distinct random tasks made per method; more tasks reuse their weights.",
                     lower_bound=1)
flags.DEFINE_bool("only_task_scaling", False,
                  "Measure the task scaling only and add it to --output's existing record, "
                  "keeping its other figures.")
flags.DEFINE_string("work_dir", None,
                    "Where the SavedModels are written; default: a temporary folder, deleted.")

FLAGS = flags.FLAGS

_FORWARDED_FLAGS = ("steps", "warmup_steps", "batch_size", "seq_length", "hub_handle",
                    "task", "artifact", "max_test_examples", "work_dir", "scaling_batch_size")
_SCALING_DIR = "task_scaling"
# The "flat": a mixed batch of many tasks costs per example at most this much more
# than the one-task SavedModel's batch.
_MAX_SCALING_OVERHEAD = 0.10


def _test_split():
  """The test split of `--task`, as the experiments split it (never written here)."""
  spec, examples = builtin_datasets.load_builtin_task(FLAGS.task)
  manifest = splits_lib.load_split_manifest(
      os.path.join(_REPO_DIR, "keras_adapters", "cli", "splits", f"{spec.name}.json"))
  _, _, test = splits_lib.apply_split_manifest(manifest, spec, examples)
  return spec, test


def _prepare(work_dir):
  """Writes (or takes) the tasks' artifacts and exports both layouts; returns the plan."""
  if FLAGS.tasks:
    tasks = dict(item.split("=", 1) for item in FLAGS.tasks)
  else:
    preprocess_handle = FLAGS.preprocess_handle or keras_adapters.default_preprocess_handle()
    tasks = {}
    for index in range(FLAGS.num_tasks):
      name = f"task{index}"
      print(f"Making {name} with random weights...", flush=True)
      tasks[name] = model_testing.save_random_task_artifact(
          os.path.join(work_dir, "artifacts", name), FLAGS.hub_handle, preprocess_handle,
          num_classes=2 + index % 4, seq_length=FLAGS.seq_length,
          adapter_config=adapter_config.AdapterConfig(adapter_size=FLAGS.adapter_size),
          seed=index)
  print(f"Exporting the multi-task SavedModel of {len(tasks)} tasks...", flush=True)
  multitask_export.export_multitask(FLAGS.hub_handle, tasks,
                                    os.path.join(work_dir, "multitask"), overwrite=True)
  for name, artifact in tasks.items():
    print(f"Exporting {name}'s single-task SavedModel...", flush=True)
    task_export.export_task_from_artifact(artifact, os.path.join(work_dir, "single", name),
                                     base_handle=FLAGS.hub_handle)
  plan = dict(tasks={name: dict(
      artifact=artifact,
      text_fields=list(adapter_artifact.read_adapter_config(artifact)["preprocessing"][
          "text_fields"])) for name, artifact in tasks.items()})
  atomic_io.write_json(os.path.join(work_dir, "plan.json"), plan)
  return plan


def _sizes(work_dir, plan):
  multitask = harness.folder_bytes(os.path.join(work_dir, "multitask"))
  base = harness.folder_bytes(FLAGS.hub_handle)
  artifacts = sum(harness.folder_bytes(task["artifact"]) for task in plan["tasks"].values())
  return dict(
      multitask_bytes=multitask,
      single_task_bytes=sum(harness.folder_bytes(os.path.join(work_dir, "single", name))
                            for name in plan["tasks"]),
      base_bytes=base, artifacts_bytes=artifacts,
      multitask_over_base_plus_artifacts=harness.against_target(
          multitask / (base + artifacts) - 1, _MAX_SIZE_OVERHEAD))


def _load_plan():
  with open(os.path.join(FLAGS.work_dir, "plan.json"), encoding="utf-8") as f:
    return json.load(f)


def _requests(plan):
  """`--batch_size` test texts, each given a task in turn and then shuffled (seeded)."""
  _, test = _test_split()
  rng = np.random.default_rng(0)
  texts = [test.texts[0][i] for i in rng.choice(len(test), FLAGS.batch_size, replace=False)]
  names = list(plan["tasks"])
  tasks = [names[i % len(names)] for i in rng.permutation(FLAGS.batch_size)]
  return texts, tasks


def _share(plan, texts, tasks, name):
  """The requests of task `name`, as the keyword arguments of its signatures."""
  share = tf.constant([text for text, task in zip(texts, tasks) if task == name])
  return {field: share for field in plan["tasks"][name]["text_fields"]}


def _layout_calls(plan, layout, texts, tasks):
  """Loads a layout; returns the calls that answer the mixed batch with it, by setup name."""
  if layout == "multitask":
    loaded = tf.saved_model.load(os.path.join(FLAGS.work_dir, "multitask"))
    routed = loaded.signatures[multitask_export.ROUTED_SIGNATURE]
    inputs = dict(task=tf.constant(tasks), text=tf.constant(texts))
    if "text_pair" in routed.structured_input_signature[1]:
      inputs["text_pair"] = tf.constant(texts)
    return {
        "routed signature, one call": lambda: routed(**inputs),
        "task signatures, one call per task": lambda: {
            name: loaded.signatures[name](**_share(plan, texts, tasks, name))
            for name in plan["tasks"]}}
  single = {name: tf.saved_model.load(os.path.join(FLAGS.work_dir, "single", name))
            for name in plan["tasks"]}
  return {"single-task SavedModels, one call per task": lambda: {
      name: single[name].signatures["serving_default"](**_share(plan, texts, tasks, name))
      for name in plan["tasks"]}}


def _measure_load(layout):
  """Cold load of one layout alone in this process, its first answers and peak memory."""
  plan = _load_plan()
  texts, tasks = _requests(plan)
  start = time.perf_counter()
  calls = _layout_calls(plan, layout, texts, tasks)
  loaded = time.perf_counter()
  tf.nest.map_structure(lambda t: t.numpy(), next(iter(calls.values()))())
  return dict(load_s=loaded - start, first_answer_s=time.perf_counter() - loaded,
              peak_rss_mib=harness.peak_rss_mib())


def _measure_times():
  """Every way of answering the mixed batch, in one process, timed in turns."""
  plan = _load_plan()
  texts, tasks = _requests(plan)
  calls = {}
  for layout in _LAYOUTS:
    calls.update(_layout_calls(plan, layout, texts, tasks))
  runs = {name: (lambda call=call: tf.nest.map_structure(lambda t: t.numpy(), call()))
          for name, call in calls.items()}
  seconds = harness.time_interleaved(runs, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  routed = runs["routed signature, one call"]()
  single = runs["single-task SavedModels, one call per task"]()
  difference = 0.0
  for name, answers in single.items():
    rows = [i for i, task in enumerate(tasks) if task == name]
    for key, expected in answers.items():
      got = routed[key][rows] if key == "scores" else routed[key][rows, :expected.shape[1]]
      difference = max(difference, float(np.abs(got - expected).max(initial=0.0)))
  return dict(times={name: harness.summarize_ms(s) for name, s in seconds.items()},
              requests_per_task={name: tasks.count(name) for name in plan["tasks"]},
              max_abs_difference_routed_vs_single=difference)


def _measure_adapter_drop():
  """Accuracy and batch latency of the trained task with its first k layers' adapters dropped."""
  spec, test = _test_split()
  if FLAGS.max_test_examples:
    test = text_classification.select_examples(
        test, range(min(FLAGS.max_test_examples, len(test))))
  config = adapter_artifact.read_adapter_config(FLAGS.artifact)
  preprocessing = adapter_artifact.preprocessing_config(config, FLAGS.artifact)
  label_names = adapter_artifact.label_names(config["head"])
  if label_names != spec.label_names:
    raise ValueError(f"--artifact's classes {label_names} are not --task={spec.name}'s "
                     f"{spec.label_names}.")
  preprocessor = hub.load(preprocessing.handle)
  scored = features.make_dataset(test, preprocessor, max_seq_length=preprocessing.seq_length,
                                 batch_size=FLAGS.batch_size)
  timed, _ = next(iter(features.make_dataset(
      test, preprocessor, max_seq_length=preprocessing.seq_length,
      batch_size=FLAGS.batch_size, dynamic_padding=False)))
  num_layers = hub_encoder.read_hub_encoder(FLAGS.hub_handle).config["num_layers"]
  forwards, accuracy = {}, {}
  for k in range(num_layers + 1):
    model = saving.load_task_model(FLAGS.artifact, base_handle=FLAGS.hub_handle)
    (bert,) = [layer for layer in model.layers
               if isinstance(layer, keras_adapters.AdaptedBert)]
    bert.drop_adapters(range(k))
    forward = harness.make_forward(model)
    predictions = np.concatenate([np.argmax(forward(batch).numpy(), axis=-1)
                                  for batch, _ in scored])
    accuracy[k] = float(np.mean(predictions == test.labels))
    forwards[k] = lambda forward=forward: forward(timed).numpy()
  seconds = harness.time_interleaved(forwards, rounds=FLAGS.steps,
                                     warmup_steps=FLAGS.warmup_steps)
  return dict(task=spec.name, test_examples=len(test), num_layers=num_layers,
              batch_size=FLAGS.batch_size, seq_length=preprocessing.seq_length,
              by_dropped_layers=[dict(dropped_layers=k, accuracy=accuracy[k],
                                      **harness.summarize_ms(seconds[k]))
                                 for k in sorted(forwards)])


def _scaling_config(method):
  """The method config of the task-scaling tasks of `method`."""
  if method == "lora":
    return keras_adapters.LoRAConfig(r=8, alpha=8.0)
  if method == "ia3":
    return keras_adapters.IA3Config()
  if method == "adapters":
    return adapter_config.AdapterConfig(adapter_size=FLAGS.adapter_size)
  raise app.UsageError(f"--scaling_methods takes lora, ia3 and adapters, got {method!r}.")


def scaling_num_tasks():
  """`--scaling_num_tasks` as whole numbers, checked."""
  try:
    numbers = [int(n) for n in FLAGS.scaling_num_tasks]
  except ValueError as error:
    raise app.UsageError(f"--scaling_num_tasks takes whole numbers: {error}") from None
  if not numbers or min(numbers) < 1:
    raise app.UsageError(f"--scaling_num_tasks takes numbers of at least 1, got {numbers}.")
  return numbers


def scaling_tasks(num_tasks, batch_size):
  """The task of each request of a mixed batch: task0, task1, ... in turn."""
  return [f"task{i % num_tasks}" for i in range(batch_size)]


def _prepare_scaling(work_dir):
  """Makes each method's random tasks and its multi-task SavedModels; returns the plan."""
  preprocess_handle = FLAGS.preprocess_handle or keras_adapters.default_preprocess_handle()
  numbers = scaling_num_tasks()
  plan = {}
  for method in FLAGS.scaling_methods:
    config = _scaling_config(method)
    distinct = min(FLAGS.scaling_distinct_tasks, max(numbers))
    artifacts = []
    for index in range(distinct):
      print(f"Making {method} task{index} with random weights...", flush=True)
      artifacts.append(model_testing.save_random_task_artifact(
          os.path.join(work_dir, _SCALING_DIR, method, "artifacts", f"task{index}"),
          FLAGS.hub_handle, preprocess_handle, num_classes=2 + index % 4,
          seq_length=FLAGS.seq_length, adapter_config=config, seed=index))
    plan[method] = {}
    for number in numbers:
      print(f"Exporting the {method} SavedModel of {number} tasks...", flush=True)
      export_dir = os.path.join(work_dir, _SCALING_DIR, method, str(number))
      multitask_export.export_multitask(
          FLAGS.hub_handle, {f"task{i}": artifacts[i % distinct] for i in range(number)},
          export_dir, overwrite=True)
      plan[method][str(number)] = dict(export_dir=export_dir,
                                       export_bytes=harness.folder_bytes(export_dir))
  atomic_io.write_json(os.path.join(work_dir, _SCALING_DIR, "plan.json"), plan)
  return plan


def _scaling_setup(method, number, kind):
  return f"{method}, {number} tasks, {kind}"


def _measure_scaling():
  """Every task-scaling SavedModel answering its mixed and its one-task batch, in turns."""
  with open(os.path.join(FLAGS.work_dir, _SCALING_DIR, "plan.json"), encoding="utf-8") as f:
    plan = json.load(f)
  _, test = _test_split()
  rng = np.random.default_rng(0)
  size = FLAGS.scaling_batch_size
  texts = tf.constant([test.texts[0][i] for i in
                       rng.choice(len(test), size, replace=size > len(test))])
  runs = {}
  for method, exports in plan.items():
    for number, export in exports.items():
      routed = tf.saved_model.load(export["export_dir"]).signatures[
          multitask_export.ROUTED_SIGNATURE]
      batches = dict(mixed=scaling_tasks(int(number), size), one_task=["task0"] * size)
      for kind, tasks in batches.items():
        if kind == "mixed" and number == "1":
          continue  # The same batch as the one-task one.
        tasks = tf.constant(tasks)
        runs[_scaling_setup(method, number, kind)] = (
            lambda routed=routed, tasks=tasks:
            routed(task=tasks, text=texts)["probabilities"].numpy())
  seconds = harness.time_interleaved(runs, rounds=FLAGS.steps, warmup_steps=FLAGS.warmup_steps)
  return dict(times={name: harness.summarize_ms(s) for name, s in seconds.items()},
              peak_rss_mib=harness.peak_rss_mib())


def summarize_scaling(plan, times, batch_size):
  """Per method, per number of tasks: milliseconds per example of the mixed and the
  one-task batch, and the mixed batch's against the reference (the first number of tasks,
  one-task batch), against `_MAX_SCALING_OVERHEAD`.

  Args:
    plan: Method → number of tasks (str) → `export_bytes`.
    times: Setup name (`_scaling_setup`) → `median_ms`.
    batch_size: Requests per batch.
  """
  by_method = {}
  for method, exports in plan.items():
    numbers = list(exports)
    reference = times[_scaling_setup(method, numbers[0], "one_task")]["median_ms"] / batch_size
    rows = []
    for number in numbers:
      one_task = times[_scaling_setup(method, number, "one_task")]["median_ms"] / batch_size
      mixed = times.get(_scaling_setup(method, number, "mixed"))
      mixed = one_task if mixed is None else mixed["median_ms"] / batch_size
      rows.append(dict(
          num_tasks=int(number), distinct_tasks_in_batch=min(int(number), batch_size),
          mixed_ms_per_example=mixed, one_task_ms_per_example=one_task,
          mixed_over_reference=mixed / reference, one_task_over_reference=one_task / reference,
          mixed_per_example_overhead=harness.against_target(mixed / reference - 1,
                                                            _MAX_SCALING_OVERHEAD),
          export_bytes=exports[number]["export_bytes"]))
    by_method[method] = rows
  return by_method


def _measure_task_scaling(work_dir):
  """The task-scaling section of the record."""
  plan = _prepare_scaling(work_dir)
  print("Timing the task-scaling batches, every SavedModel in turns...", flush=True)
  forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
  measured = harness.run_child(os.path.abspath(__file__), "scaling", forwarded)
  return dict(
      settings=dict(methods=list(plan), num_tasks=scaling_num_tasks(),
                    batch_size=FLAGS.scaling_batch_size,
                    distinct_tasks=FLAGS.scaling_distinct_tasks, steps=FLAGS.steps,
                    warmup_steps=FLAGS.warmup_steps, seq_length=FLAGS.seq_length,
                    configs={method: _scaling_config(method).to_dict() for method in plan},
                    reference="the first number of tasks' SavedModel, one-task batch"),
      by_method=summarize_scaling(plan, measured["times"], FLAGS.scaling_batch_size),
      times=measured["times"], peak_rss_mib=measured["peak_rss_mib"])


def _scaling_table(section):
  rows = []
  for method, method_rows in section["by_method"].items():
    for row in method_rows:
      rows.append([method, row["num_tasks"], row["mixed_ms_per_example"],
                   row["one_task_ms_per_example"], row["mixed_over_reference"],
                   row["mixed_per_example_overhead"]["met"]])
  return harness.markdown_table(
      ["Method", "Tasks", "Mixed batch ms / example", "One-task batch ms / example",
       "Mixed / 1-task reference", f"Flat (<= +{100 * _MAX_SCALING_OVERHEAD:.0f}%)"], rows)


def _tables(record):
  mib = 2**20
  sizes = record["sizes"]
  size_table = harness.markdown_table(
      ["Layout", "MiB on disk"],
      [["multi-task SavedModel", sizes["multitask_bytes"] / mib],
       ["single-task SavedModels, all", sizes["single_task_bytes"] / mib],
       ["base SavedModel + every artifact", (sizes["base_bytes"] + sizes["artifacts_bytes"])
        / mib]])
  check = sizes["multitask_over_base_plus_artifacts"]
  size_line = (f"Multi-task SavedModel over base + artifacts: {100 * check['value']:+.2f}% "
               f"(target <= +{100 * check['target']:.0f}%: {'met' if check['met'] else 'missed'}).")
  latency = harness.markdown_table(
      ["Mixed batch answered by", "Median ms", "Min ms"],
      [[name, t["median_ms"], t["min_ms"]] for name, t in record["latency"]["times"].items()])
  load = harness.markdown_table(
      ["Layout", "Cold load s", "First answer s", "Peak RSS MiB"],
      [[name, r["load_s"], r["first_answer_s"], r["peak_rss_mib"]]
       for name, r in record["cold_load"].items()])
  tables = [size_table, size_line, latency,
            f"Largest difference, routed vs single-task answers: "
            f"{record['latency']['max_abs_difference_routed_vs_single']:.2e}", load]
  if record.get("task_scaling"):
    tables.append(_scaling_table(record["task_scaling"]))
  drop = record.get("adapter_drop")
  if drop:
    base_ms = drop["by_dropped_layers"][0]["median_ms"]
    tables.append(harness.markdown_table(
        ["Adapters dropped (first k layers)", "Test accuracy %", "Median ms", "Speed-up"],
        [[row["dropped_layers"], 100 * row["accuracy"], row["median_ms"],
          base_ms / row["median_ms"]] for row in drop["by_dropped_layers"]]))
  return "\n\n".join(tables)


def _only_task_scaling():
  """Measures the task scaling and adds it to --output's record, the rest kept as it was."""
  if not FLAGS.scaling_methods:
    raise app.UsageError("--only_task_scaling needs --scaling_methods.")
  record = {}
  if os.path.exists(FLAGS.output):
    with open(FLAGS.output, encoding="utf-8") as f:
      record = json.load(f)
  harness.resolve_hub_handle()
  temporary = FLAGS.work_dir is None
  FLAGS.work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="multitask_serving_")
  load_before = os.getloadavg()
  try:
    section = _measure_task_scaling(FLAGS.work_dir)
  finally:
    if temporary:
      shutil.rmtree(FLAGS.work_dir, ignore_errors=True)
  # Measured apart from the rest of the record: its own machine, load and provenance.
  record["task_scaling"] = dict(
      section, machine=harness.machine_info(),
      load_average_before=list(load_before), load_average_after=list(os.getloadavg()),
      **{provenance.KEY: provenance.record()})
  atomic_io.write_json(FLAGS.output, paths.portable(record, _REPO_DIR))
  print(_scaling_table(record["task_scaling"]))
  print(f"Written: {FLAGS.output} (task_scaling; its other keys unchanged)")


def main(argv):
  del argv  # cli.run refuses arguments after the flags.
  if FLAGS.child:
    kind, *layout = FLAGS.child.split(":")
    harness.report_to_parent(_measure_load(*layout) if kind == "load" else
                             _measure_times() if kind == "times" else
                             _measure_scaling() if kind == "scaling" else
                             _measure_adapter_drop())
    return
  for method in FLAGS.scaling_methods:
    _scaling_config(method)
  scaling_num_tasks()
  if FLAGS.only_task_scaling:
    _only_task_scaling()
    return
  if FLAGS.adapter_drop and not os.path.isfile(
      os.path.join(FLAGS.artifact, adapter_artifact.CONFIG_FILE)):
    raise app.UsageError(
        f"--artifact={FLAGS.artifact} holds no adapter artifact: train one with "
        "`python experiments/run_classification.py` (it writes "
        "runs/classification/export/adapters), pass --artifact, or --noadapter_drop.")
  # Resolved once here, so that every child measures the same encoder.
  harness.resolve_hub_handle()
  temporary = FLAGS.work_dir is None
  FLAGS.work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="multitask_serving_")
  try:
    plan = _prepare(FLAGS.work_dir)
    forwarded = {name: FLAGS[name].value for name in _FORWARDED_FLAGS}
    cold_load = {}
    for layout in _LAYOUTS:
      print(f"Measuring the cold load of the {layout} layout...", flush=True)
      cold_load[layout] = harness.run_child(os.path.abspath(__file__), f"load:{layout}",
                                            forwarded)
    print("Timing the mixed batch, every layout in turns...", flush=True)
    latency = harness.run_timing_child(os.path.abspath(__file__), "times", forwarded,
                                       _measure_times)
    record = dict(
        benchmark="multitask_serving", machine=harness.machine_info(),
        settings=dict(forwarded, num_tasks=len(plan["tasks"]),
                      random_tasks=not FLAGS.tasks, adapter_size=FLAGS.adapter_size),
        sizes=_sizes(FLAGS.work_dir, plan), latency=latency, cold_load=cold_load)
    if FLAGS.scaling_methods:
      record["task_scaling"] = _measure_task_scaling(FLAGS.work_dir)
    if FLAGS.adapter_drop:
      print("Measuring AdapterDrop...", flush=True)
      record["adapter_drop"] = harness.run_timing_child(
          os.path.abspath(__file__), "adapter_drop", forwarded, _measure_adapter_drop)
  finally:
    if temporary:
      shutil.rmtree(FLAGS.work_dir, ignore_errors=True)
  harness.write_record(FLAGS.output, record)
  print(_tables(record))
  print(f"Written: {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)

"""A user's mistake on the newer surfaces (config files, TF_CONFIG, URLs and Cloud Storage,
AdapterHub folders, output folders, two sizes of one bottleneck, `~`) is one line naming the
flag or file and the fix, exit status 2 (or 1 for storage that cannot be reached), before any
training; none is reported as a bug. An error printed over a progress bar starts a new line.

Everything runs in-process: `experiments.testing.cli_error` runs a script's `main` as
`cli.run` does and returns the status and lines it would print; no case trains.
"""

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from unittest import mock

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf
import tf_keras as keras

from experiments import cli
from experiments import common_flags
from experiments import run_classification
from experiments import task_flags
from experiments import testing as cli_testing
import keras_adapters
from keras_adapters.core import config_definitions
from keras_adapters.data import splits as splits_lib
from keras_adapters.data import text_classification
from keras_adapters.hub import adapter_artifact
from keras_adapters.hub import testing as hub_testing
from keras_adapters.interop import adapterhub
from keras_adapters.interop import peft
from keras_adapters.interop import testing as interop_testing
from keras_adapters.methods.ia3 import IA3Config
from keras_adapters.methods.lora import LoRAConfig
from keras_adapters.models import saving
from keras_adapters.tasks import classification
from keras_adapters.tasks import testing
from keras_adapters.training import distribution
from keras_adapters.utils import atomic_io
from keras_adapters.utils import errors
from keras_adapters.utils import file_systems

FLAGS = flags.FLAGS
_FIXTURE = os.path.join(os.path.dirname(adapterhub.__file__), "testdata", "adapterhub",
                        "houlsby")
# What TensorFlow's Cloud Storage file system raises without network (its first line).
_NO_NETWORK = tf.errors.FailedPreconditionError(
    None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
    "hostname', error details: Could not resolve host: www.googleapis.com\n\t when reading "
    "metadata of gs://bucket/runs")


class UserMistakesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    # No base is read: every case is refused before.
    self.argv = ["run_classification.py", "--hub_handle=h", "--preprocess_handle=p",
                 f"--model_dir={self.root}/run"]

  def error(self, *args, main=run_classification.main):
    return cli_testing.cli_error(main, self.argv + list(args))

  def write(self, name, text):
    path = os.path.join(self.root, name)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    return path

  def test_config_files_that_cannot_be_read_are_named_with_the_cause(self):
    missing = os.path.join(self.root, "missing.yaml")
    self.assertEqual(self.error(f"--config_file={missing}"), (2, [
        f"The config file '{missing}' does not exist (nor is it `section.setting=value` pairs "
        "or YAML): check the path."]))
    tabbed = self.write("tabbed.yaml", "trainer:\n\tlearning_rate: 0.1\n")
    self.assertEqual(self.error(f"--config_file={tabbed}"), (2, [
        f"The config file '{tabbed}' is not valid YAML: line 2, column 1: found character "
        "'\\t' that cannot start any token (YAML indents with spaces, not tabs)."]))
    listed = self.write("listed.yaml", "- trainer\n- model\n")
    self.assertEqual(self.error(f"--config_file={listed}"), (2, [
        f"The config file '{listed}' holds a list at its top level: it must be a mapping of "
        "sections (model:, data:, trainer:, runtime:), e.g. `trainer: {learning_rate: "
        "0.001}`."]))
    status, lines = self.error("--params_override=trainer: {epochs: 2")
    self.assertEqual((status, lines), (2, [
        "The override 'trainer: {epochs: 2' is not valid YAML: line 1, column 20: expected "
        "',' or '}', but got '<stream end>'."]))
    # A good file, an empty one and a `~` path still work.
    good = self.write("good.yaml", "trainer:\n  learning_rate: 0.5\n")
    empty = self.write("empty.yaml", "# nothing yet\n")
    with mock.patch.dict(os.environ, HOME=self.root), flagsaver.flagsaver():
      FLAGS(self.argv + ["--config_file=~/good.yaml", f"--config_file={empty}"])
      cli.expand_home()
      self.assertEqual(FLAGS.config_file, [good, empty])
      self.assertEqual(common_flags.run_config_from_flags().trainer.learning_rate, 0.5)

  def test_a_bad_tf_config_names_the_variable_and_the_strategy(self):
    example = ('e.g. TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
               '"task": {"type": "worker", "index": 0}}\', or unset it for one local worker.')
    lead = ("TF_CONFIG={!r}, which --strategy='multi_worker_mirrored' reads its cluster "
            "from,")
    for value, problem in (
        ('{"cluster": ', "is not valid JSON (Expecting value: line 1 column 13 (char 12)): "
         "give a JSON object, "),
        ('{"task": {"type": "worker", "index": 0}}', "has no 'cluster': give 'cluster' and "
         "'task', "),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}',
         "has a 'task' that names no job and index of its 'cluster' (give {\"type\": "
         "\"worker\", \"index\": 0} for the first worker): ")):
      with mock.patch.dict(os.environ, TF_CONFIG=value):
        self.assertEqual(self.error("--strategy=multi_worker_mirrored"),
                         (2, [f"{lead.format(value)} {problem}{example}"]))
    for task in ('{"type": "worker", "index": 0}', '{"type": "evaluator", "index": 0}'):
      with mock.patch.dict(os.environ, TF_CONFIG='{"cluster": {"worker": ["a:1"]}, '
                           f'"task": {task}}}'):
        distribution.check_tf_config()  # A valid one passes, a side-car evaluator's too.

  def test_a_url_tensorflow_cannot_read_says_to_download_the_file(self):
    url = "https://example.com/reviews.csv"
    with flagsaver.flagsaver():
      FLAGS(self.argv + [f"--data_path={url}"])
      with self.assertRaises(errors.UsageError) as raised:
        task_flags.load_splits(FLAGS.model_dir, 0)
      self.assertEqual(cli.error_report(raised.exception), (2, [
          f"--data_path='{url}': TensorFlow has no file system for https:// URLs; it reads "
          "local paths and its own file systems (gs://, ram://, and others that packages "
          "such as tensorflow-io register), not web URLs. Download the file first and pass "
          "its local path."]))
    with self.assertRaisesRegex(errors.UsageError, "^path='https://example.com/reviews.csv': "
                                "TensorFlow has no file system for https://"):
      text_classification.read_text_classification(url)
    file_systems.check_reachable(os.path.join(self.root, "local.csv"), "path")  # Not looked at.

  def test_cloud_storage_that_cannot_be_reached_is_named_before_work(self):
    with mock.patch.object(tf.io.gfile, "exists", side_effect=_NO_NETWORK):
      status, lines = self.error("--results_dir=gs://bucket/results")
      self.assertEqual(status, 1)
      self.assertEqual(lines, [
          "--results_dir='gs://bucket/results': Cloud Storage cannot be reached (no network, "
          "or no credentials: run `gcloud auth application-default login` or set "
          "GOOGLE_APPLICATION_CREDENTIALS), or pass a local path. [FailedPreconditionError: "
          "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
          "hostname']", cli._VERBOSE_HINT])  # pylint: disable=protected-access
      self.assertEqual(self.error("--model_dir=gs://bucket/run")[0], 1)
      with self.assertRaises(errors.UnreachableError):
        atomic_io.make_writable_dir("gs://bucket/run", "model_dir")
      with flagsaver.flagsaver():
        FLAGS(self.argv + ["--data_path=gs://bucket/reviews.csv"])
        with self.assertRaises(errors.UnreachableError) as raised:
          task_flags.load_splits(FLAGS.model_dir, 0)
        status, lines = cli.error_report(raised.exception)
      self.assertEqual(status, 1)
      self.assertStartsWith(lines[0], "--data_path='gs://bucket/reviews.csv': Cloud Storage "
                            "cannot be reached (no network, or no credentials")
    # Raised where no check came first, the same error is no bug either.
    self.assertEqual(cli.error_kind(_NO_NETWORK), (1, cli._VERBOSE_HINT))  # pylint: disable=protected-access
    self.assertEqual(cli.error_kind(tf.errors.UnimplementedError(
        None, None, "File system scheme 'https' not implemented (file: 'https://x')")),
                     (2, None))

  def test_an_output_folder_that_cannot_be_used_is_refused_before_work(self):
    a_file = self.write("notes.txt", "mine")
    for flag in ("results_dir", "export_dir", "model_dir"):
      self.assertEqual(self.error(f"--{flag}={a_file}"), (2, [
          f"--{flag}='{a_file}' is a file, or inside one: pass a folder."]))
    self.assertEqual(self.error(f"--model_dir={a_file}/run"), (2, [
        f"--model_dir='{a_file}/run' is a file, or inside one: pass a folder."]))
    self.assertFalse(os.path.exists(os.path.join(self.root, "run")))
    # Checking creates nothing.
    atomic_io.check_output_dir(os.path.join(self.root, "new", "run"), "model_dir")
    self.assertFalse(os.path.exists(os.path.join(self.root, "new")))

  def test_two_bottleneck_sizes_are_refused(self):
    message = ("--adapter_size={} and --reduction_factor={} both size the adapters' "
               "bottleneck (m = hidden size // reduction_factor, in place of adapter_size): "
               "give one of them.")
    self.assertEqual(self.error("--adapter_size=8", "--reduction_factor=4"),
                     (2, [message.format(8, 4.0)]))
    in_file = self.write("rate.yaml", "model:\n  adapter:\n    reduction_factor: 16\n")
    self.assertEqual(self.error(f"--config_file={in_file}", "--adapter_size=8"),
                     (2, [message.format(8, 16)]))
    self.assertEqual(self.error("--adapter_size=8", "--params_override=model.adapter."
                                "reduction_factor=2"), (2, [message.format(8, 2)]))
    self.assertEqual(self.error("--adapter_config={\"reduction_factor\": 2}",
                                "--adapter_size=16"), (2, [message.format(16, 2)]))
    # One of them alone is one size; a baseline has none, and refuses one given.
    with flagsaver.flagsaver():
      FLAGS(self.argv + [f"--config_file={in_file}"])
      self.assertEqual(common_flags.run_config_from_flags().model.adapter.bottleneck_size(
          384), 24)
    with flagsaver.flagsaver():
      FLAGS(self.argv + ["--method=full"])
      adapter = common_flags.run_config_from_flags().model.adapter
      self.assertEqual((adapter.adapter_size, adapter.reduction_factor), (None, None))
    self.assertEqual(self.error("--reduction_factor=4", "--method=full"), (2, [
        "--reduction_factor=4.0 is a setting of --method='adapters', not of --method='full' "
        "that this run trains: drop it, or give --method='adapters'."]))

  def test_an_adapterhub_folder_is_sent_to_the_converter(self):
    message = (f"'{_FIXTURE}' is an AdapterHub adapter, not an adapter artifact of this "
               "library: convert it with `python experiments/convert_adapterhub.py "
               f"--from_adapterhub={_FIXTURE} --to_artifact=<folder>` and pass that folder, or "
               "load it with keras_adapters.load_adapterhub.")
    with self.assertRaises(adapter_artifact.AdapterArtifactError) as raised:
      keras_adapters.load_task_model(_FIXTURE)
    self.assertEqual(str(raised.exception), message)
    self.assertEqual(cli.error_kind(raised.exception), (2, None))

  def test_a_truncated_adapterhub_file_is_named_as_incomplete(self):
    folder = os.path.join(self.root, "adapter")
    shutil.copytree(_FIXTURE, folder)
    for name in (adapterhub.WEIGHTS_FILE, adapterhub.HEAD_WEIGHTS_FILE):
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        data = f.read()
      with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    with self.assertRaisesRegex(
        adapterhub.AdapterHubError,
        rf"^'{folder}/adapter.safetensors' is incomplete or corrupt \([\d,]+ bytes; .+\): a "
        r"download or copy was cut short\? Copy it again"):
      keras_adapters.load_adapterhub(folder)
    with self.assertRaisesRegex(adapterhub.AdapterHubError,
                                "model_head.safetensors' is incomplete or corrupt"):
      adapterhub._read_tensors(folder, adapterhub.HEAD_WEIGHTS_FILE)  # pylint: disable=protected-access

  def test_jit_compile_with_a_batch_larger_than_the_data_names_both_flags(self):
    with flagsaver.flagsaver():
      FLAGS(["run_classification.py"])
      config = testing.run_config(jit_compile=True, batch_size=32)
      with self.assertRaises(errors.UsageError) as raised:
        classification.check_static_batch(config, 20)
      self.assertEqual(cli.error_report(raised.exception), (2, [
          "--batch_size=32 is more than the 20 training examples: with --jit_compile every "
          "batch has one shape (static shapes), so the last, smaller batch is dropped, and "
          "none would be left. Give --batch_size=20 or less, or --nojit_compile."]))
    classification.check_static_batch(config, 32)
    classification.check_static_batch(testing.run_config(batch_size=32), 20)

  def test_a_sequence_too_short_for_any_text_is_refused_before_the_run_is_recorded(self):
    spec, splits = testing.colour_task()
    model_dir = os.path.join(self.root, "short")
    with flagsaver.flagsaver():
      FLAGS(["run_classification.py"])
      with self.assertRaises(errors.UsageError) as raised:
        classification.run_task(spec, splits, testing.run_config(max_seq_length=2), model_dir,
                                progress_bar=False)
      self.assertEqual(cli.error_report(raised.exception), (2, [
          "--max_seq_length=2 leaves no room for text beside [CLS] and 1 [SEP]; use at least "
          "3 (usually 128)."]))
    self.assertFalse(os.path.exists(model_dir))

  def test_a_split_manifest_that_is_a_folder_is_named_as_one(self):
    with self.assertRaisesRegex(IsADirectoryError, f"^Split manifest {self.root} is a folder: "
                                "give the path of a JSON file"):
      splits_lib.load_split_manifest(self.root)

  def test_a_leading_tilde_is_expanded_as_a_shell_does(self):
    with mock.patch.dict(os.environ, HOME=self.root), flagsaver.flagsaver():
      FLAGS(self.argv + ["--model_dir=~/runs/a", "--delimiter=~", "--methods=adapters",
                         "--config_file=~/a.yaml", "--config_file=b.yaml"])
      cli.expand_home()
      self.assertEqual(FLAGS.model_dir, os.path.join(self.root, "runs/a"))
      self.assertEqual(FLAGS.delimiter, "~")
      self.assertEqual(FLAGS.config_file, [os.path.join(self.root, "a.yaml"), "b.yaml"])
      pairs = flags.FlagValues()
      flags.DEFINE_list("tasks", None, "Tasks as name=folder.", flag_values=pairs)
      pairs(["export_multitask.py", "--tasks=reviews=~/runs/reviews,topics=runs/topics"])
      cli.expand_home(pairs)
      self.assertEqual(pairs.tasks, [f"reviews={self.root}/runs/reviews", "topics=runs/topics"])
      config = config_definitions.ExperimentConfig.from_settings(
          hub_handle="~/bert", preprocess_handle="~/preprocess")
    self.assertEqual((config.model.hub_handle, config.model.preprocess_handle),
                     (os.path.join(self.root, "bert"), os.path.join(self.root, "preprocess")))
    with mock.patch.dict(os.environ, HOME=self.root):
      with self.assertRaisesRegex(adapter_artifact.AdapterArtifactError, re.escape(
          "No adapter artifact at '~/runs/export/adapters' (its leading ~ is taken literally, "
          f"as a folder named ~: pass '{self.root}/runs/export/adapters'): adapter_config.json "
          "is missing.")):
        keras_adapters.load_task_model("~/runs/export/adapters")

  def test_an_error_over_a_progress_bar_starts_a_new_line(self):
    screen = io.StringIO()
    tracker = cli.LineTracker(screen)
    tracker.write("\r0/1 [..............................] - ETA: 0s")
    with mock.patch.object(sys, "stdout", tracker), contextlib.redirect_stderr(screen):
      with self.assertRaises(SystemExit):
        cli._exit("--max_seq_length=2: too short.", 2)  # pylint: disable=protected-access
    self.assertEqual(screen.getvalue().splitlines()[-1].split(": error: ", 1)[1],
                     "--max_seq_length=2: too short.")
    self.assertTrue(screen.getvalue().startswith("\r0/1 [") and "ETA: 0s\n" in
                    screen.getvalue())
    finished = io.StringIO()
    tracker = cli.LineTracker(finished)
    tracker.write("1/1 [====] - 1s\n")
    tracker.end_line()
    self.assertEqual(finished.getvalue(), "1/1 [====] - 1s\n")


class PeftAdapterHubAndMergeMistakesTest(tf.test.TestCase, parameterized.TestCase):
  """peft and AdapterHub folders edited by hand or given to the wrong reader, half-precision
  weights, merged models and NumPy numbers in configs (issue 49): each is read right or
  refused in one line naming what disagrees with what, before anything is built or written."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handle = hub_testing.tiny_hub_handle()
    cls.root = tempfile.mkdtemp()
    # One random LoRA task, in each of the three formats.
    cls.model = _lora_task(cls.handle)
    cls.peft = peft.save_peft(cls.model, os.path.join(cls.root, "peft"),
                              base_model_name_or_path="tiny-bert")
    cls.adapterhub = adapterhub.save_adapterhub(
        cls.model, os.path.join(cls.root, "adapterhub"), model_name="tiny-bert")
    cls.artifact = keras_adapters.save_adapters(cls.model, os.path.join(cls.root, "artifact"))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root)
    super().tearDownClass()

  def copy(self, folder, edit_config=None, edit_tensors=None, config_file=None,
           tensors_file=None):
    """A copy of `folder` with its JSON config and its tensors edited in place."""
    directory = os.path.join(self.create_tempdir().full_path, os.path.basename(folder))
    shutil.copytree(folder, directory)
    if edit_config:
      path = os.path.join(directory, config_file or peft.CONFIG_FILE)
      with open(path, encoding="utf-8") as file:
        values = json.load(file)
      edit_config(values)
      with open(path, "w", encoding="utf-8") as file:
        json.dump(values, file)
    if edit_tensors:
      path = os.path.join(directory, tensors_file or peft.WEIGHTS_FILE)
      tensors = safetensors_numpy.load_file(path)
      edit_tensors(tensors)
      safetensors_numpy.save_file(tensors, path, {"format": "pt"})
    return directory

  def refused(self, error, message, call, *args, **kwargs):
    """Asserts `call` raises `error` with exactly `message`: one line, a usage error."""
    with self.assertRaises(error) as raised:
      call(*args, **kwargs)
    self.assertEqual(str(raised.exception), message)
    self.assertIsNone(raised.exception.__cause__)
    self.assertEqual(cli.error_kind(raised.exception), (2, None))

  @parameterized.parameters("pissa", "pissa_niter_16", "olora", "corda", "loftq")
  def test_peft_inits_that_rewrite_the_base_are_refused(self, init):
    folder = self.copy(self.peft, lambda config: config.update(init_lora_weights=init))
    self.refused(
        peft.PeftError,
        f"The adapter's init_lora_weights={init!r} rewrites the base weights (PiSSA, OLoRA, "
        "CorDA and LoftQ subtract their start from them), so it fits that rewritten base "
        "only. Save it as a plain LoRA with peft's save_pretrained(..., "
        "path_initial_model_for_weight_conversion=<the adapter saved before training>) and "
        "load that (LoftQ has no such conversion).",
        peft.load_peft, folder, base_handle=self.handle)

  def test_a_config_and_tensors_that_disagree_are_named_both(self):
    hidden = saving.the_adapted_bert(self.model).encoder.hidden_size
    query_a = "base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.weight"
    folder = self.copy(self.peft, lambda config: config.update(r=2))
    self.refused(
        peft.PeftError,
        f"'{folder}/adapter_model.safetensors' holds '{query_a}' of shape [4, {hidden}], rank "
        "4, but its adapter_config.json says r=2: the config and the weights disagree (one "
        "edited, or from two adapters). Save the adapter again with peft's save_pretrained.",
        peft.load_peft, folder, base_handle=self.handle)

    def two_biases(tensors):
      tensors["base_model.model.classifier.bias"] = tensors[
          "base_model.model.classifier.bias"][:2]
    folder = self.copy(self.peft, edit_tensors=two_biases)
    self.refused(
        peft.PeftError,
        f"'{folder}/adapter_model.safetensors' holds a classifier whose weight has shape "
        f"[3, {hidden}] (a row per class) but whose bias has shape [2]: the two disagree, so "
        "the file was edited or mixed from two adapters. Save the adapter again with peft's "
        "save_pretrained.", peft.load_peft, folder, base_handle=self.handle)

    def rank_two(meta):
      meta["config"]["r"] = 2
    folder = self.copy(self.adapterhub, rank_two)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{folder}/adapter.safetensors' holds "
        "'bert.encoder.layer.0.attention.self.query.loras.task.lora_A' of shape "
        f"[4, {hidden}], size 4, but its adapter_config.json says r=2: the config and the "
        "weights disagree (one edited, or from two adapters). Re-save the adapter with "
        "AdapterHub.", adapterhub.load_adapterhub, folder, base_handle=self.handle)

    def two_head_biases(tensors):
      tensors["heads.task.1.bias"] = tensors["heads.task.1.bias"][:2]
    folder = self.copy(self.adapterhub, edit_tensors=two_head_biases,
                       tensors_file=adapterhub.HEAD_WEIGHTS_FILE)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{folder}/model_head.safetensors' holds heads.task.1.weight of shape [3, {hidden}] "
        "(a row per output) but heads.task.1.bias of shape [2]: the two disagree. Re-save "
        "the adapter with AdapterHub (save_adapter with_head=True).",
        adapterhub.load_adapterhub, folder, base_handle=self.handle)

    def two_labels(meta):
      meta["config"]["num_labels"] = 2
    folder = self.copy(self.adapterhub, two_labels, config_file=adapterhub.HEAD_CONFIG_FILE)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{folder}/model_head.safetensors' holds a last head layer heads.task.1 with 3 "
        "outputs, but its head_config.json says num_labels=2: the head's config and weights "
        "disagree. Re-save the adapter with AdapterHub (save_adapter with_head=True).",
        adapterhub.load_adapterhub, folder, base_handle=self.handle)

  def test_a_bottleneck_that_disagrees_with_its_reduction_factor_is_named(self):
    model = interop_testing.random_task_model(self.handle, {}, pooling="cls")
    folder = adapterhub.save_adapterhub(
        model, os.path.join(self.create_tempdir().full_path, "bottleneck"),
        model_name="tiny-bert")
    hidden = saving.the_adapted_bert(model).encoder.hidden_size

    def factor_eight(meta):
      meta["config"]["reduction_factor"] = 8
    folder = self.copy(folder, factor_eight)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{folder}/adapter.safetensors' holds "
        "'bert.encoder.layer.0.attention.output.adapters.task.adapter_up.weight' of shape "
        f"[{hidden}, {hidden // 4}], size {hidden // 4}, but its adapter_config.json says "
        f"reduction_factor=8, a bottleneck of {hidden} // 8 = {hidden // 8}: the config and "
        "the weights disagree (one edited, or from two adapters). Re-save the adapter with "
        "AdapterHub.", adapterhub.load_adapterhub, folder, base_handle=self.handle)

  def test_a_missing_lora_tensor_is_named_with_its_file(self):
    value_b = "base_model.model.bert.encoder.layer.1.attention.self.value.lora_B.weight"
    folder = self.copy(self.peft, edit_tensors=lambda tensors: tensors.pop(value_b))
    self.refused(
        peft.PeftError,
        f"'{folder}/adapter_model.safetensors' has no '{value_b}', which its other tensors "
        "and config call for: the file is incomplete. Copy it again, or save the adapter "
        "again with peft's save_pretrained.",
        peft.load_peft, folder, base_handle=self.handle)

  @parameterized.parameters(np.float16, tf.bfloat16.as_numpy_dtype)
  def test_half_precision_peft_weights_load_as_float32(self, dtype):
    """What peft saves from a model loaded in half precision: read, cast without loss."""
    folder = self.copy(self.peft, edit_tensors=lambda tensors: tensors.update(
        {name: value.astype(dtype) for name, value in tensors.items()}))
    loaded = peft.load_peft(folder, base_handle=self.handle)
    for key, variable in saving.task_variables(self.model).items():
      if "/lora/" not in key and not key.startswith("head/"):
        continue  # The base's LayerNorms, which peft does not save.
      expected = variable.numpy().astype(dtype).astype(np.float32)
      self.assertAllEqual(saving.task_variables(loaded)[key], expected, msg=key)
      self.assertEqual(saving.task_variables(loaded)[key].dtype, tf.float32)
    inputs = interop_testing.tiny_inputs()
    self.assertAllClose(loaded(inputs, training=False), self.model(inputs, training=False),
                        atol=0.05, rtol=0)

  def test_a_folder_of_another_kind_names_its_reader_and_the_converter(self):
    convert = "`python experiments/convert_adapterhub.py"
    self.refused(
        peft.PeftError,
        f"'{self.adapterhub}' is an AdapterHub adapter, not a peft adapter: load it with "
        f"keras_adapters.load_adapterhub, or convert it with {convert} "
        f"--from_adapterhub={self.adapterhub} --to_artifact=<folder>`.",
        peft.load_peft, self.adapterhub, base_handle=self.handle)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{self.peft}' is a peft adapter, not an AdapterHub adapter: load it with "
        f"keras_adapters.load_peft, or convert it with {convert} --from_peft={self.peft} "
        "--to_artifact=<folder>`.",
        adapterhub.load_adapterhub, self.peft, base_handle=self.handle)
    self.refused(
        peft.PeftError,
        f"'{self.artifact}' is an adapter artifact of this library, not a peft adapter: load "
        f"it with keras_adapters.load_task_model, or convert it with {convert} "
        f"--from_artifact={self.artifact} --to_peft=<folder>`.",
        peft.load_peft, self.artifact)
    as_task = (f"'{self.peft}' is a peft adapter, not an adapter artifact of this library: "
               f"convert it with {convert} --from_peft={self.peft} --to_artifact=<folder>` and "
               "pass that folder, or load it with keras_adapters.load_peft.")
    self.refused(adapter_artifact.AdapterArtifactError, as_task,
                 keras_adapters.load_task_model, self.peft)
    export_dir = os.path.join(self.create_tempdir().full_path, "multitask")
    self.refused(adapter_artifact.AdapterArtifactError, as_task,
                 keras_adapters.export_multitask, self.handle, {"x": self.peft}, export_dir)
    self.assertFalse(os.path.exists(export_dir))

  def test_adapterhub_lora_placement_is_named_by_adapterhubs_options(self):
    def no_attention(meta):
      meta["config"]["selfattn_lora"] = False
    folder = self.copy(self.adapterhub, no_attention)
    self.refused(
        adapterhub.AdapterHubError,
        f"'{folder}/adapter.safetensors' holds "
        "'bert.encoder.layer.0.attention.self.query.loras.task.lora_A', but its "
        "adapter_config.json does not ask for LoRA there: AdapterHub would ignore the tensor. "
        "Set AdapterHub's selfattn_lora=True with 'q' in attn_matrices in that config if the "
        "adapter was trained so, or re-save it with adapters 1.x.",
        adapterhub.load_adapterhub, folder, base_handle=self.handle)

    def nowhere(meta):
      meta["config"].update(selfattn_lora=False, intermediate_lora=False)
    folder = self.copy(self.adapterhub, nowhere)
    self.refused(
        adapterhub.AdapterHubError,
        "The AdapterHub LoRA config puts LoRA on no module (selfattn_lora=False, "
        "attn_matrices=['q', 'v'], intermediate_lora=False, output_lora=False): set "
        "AdapterHub's options of the modules the adapter was trained on (selfattn_lora with "
        "attn_matrices, intermediate_lora, output_lora).",
        adapterhub.load_adapterhub, folder, base_handle=self.handle)

  def test_a_merged_model_has_no_adapters_to_save_load_or_train(self):
    model = _lora_task(self.handle)
    keras_adapters.merge(model)
    root = self.create_tempdir().full_path
    merged = ("The model's LoRA or (IA)^3 layers were merged into its base "
              "(keras_adapters.merge), so it has no adapter set left for {}: save the adapters "
              "before merging, and load adapters into a model built anew (e.g. "
              "load_task_model).")
    for error, save in ((peft.PeftError, peft.save_peft),
                        (adapterhub.AdapterHubError, adapterhub.save_adapterhub)):
      folder = os.path.join(root, save.__name__)
      self.refused(error, merged.format(save.__name__), save, model, folder)
      self.assertFalse(os.path.exists(folder))
    self.refused(adapter_artifact.AdapterArtifactError,
                 merged.format(f"load_adapters({self.artifact!r})"),
                 keras_adapters.load_adapters, model, self.artifact)

    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs = interop_testing.tiny_inputs()
    with self.assertLogs("absl", "WARNING") as logs:
      model.fit(inputs, tf.constant([0, 2]), epochs=2, verbose=0)
    warnings = [line for line in logs.output if "merged into its base" in line]
    self.assertLen(warnings, 1)
    self.assertIn("they are part of the frozen base now and no longer train (the head still "
                  "does)", warnings[0])

  def test_numpy_numbers_are_taken_as_python_numbers(self):
    config = LoRAConfig(r=np.int64(8), alpha=np.float32(16), dropout=np.float64(0.25),
                        use_rslora=np.bool_(True), leave_out=[np.int64(1)])
    self.assertEqual(config, LoRAConfig(r=8, alpha=16.0, dropout=0.25, use_rslora=True,
                                        leave_out=(1,)))
    self.assertIs(type(config.r), int)
    self.assertEqual(json.loads(json.dumps(config.to_dict())), config.to_dict())
    self.assertEqual(IA3Config(leave_out=(np.int32(0),)), IA3Config(leave_out=(0,)))
    bottleneck = keras_adapters.AdapterConfig(adapter_size=np.int64(16),
                                              init_stddev=np.float32(0.5),
                                              scaling=np.float64(2.0), leave_out=(np.uint8(3),))
    self.assertEqual(bottleneck, keras_adapters.AdapterConfig(adapter_size=16, init_stddev=0.5,
                                                              scaling=2.0, leave_out=(3,)))
    json.dumps(bottleneck.to_dict())

  def test_a_peft_config_dict_points_to_lora_config(self):
    with open(os.path.join(self.peft, peft.CONFIG_FILE), encoding="utf-8") as file:
      peft_config = json.load(file)
    with self.assertRaisesRegex(ValueError, "^The adapter config is peft's \\(peft_type='LORA'"
                                "\\), which this library does not take as is: pass LoRAConfig"
                                ".*\"method\": \"lora\", or load an adapter peft saved with "
                                "keras_adapters.load_peft\\(folder\\).$"):
      keras_adapters.AdaptedBert("never read", adapter_config=peft_config)
    with self.assertRaisesRegex(ValueError, "has LoRAConfig's fields \\['alpha', 'r'\\] but "
                                "no \"method\" key.*add \"method\": \"lora\", or pass "
                                "LoRAConfig\\(...\\).$"):
      keras_adapters.AdaptedBert("never read", adapter_config=dict(r=8, alpha=16))


def _lora_task(handle):
  """A random LoRA task on the tiny base, with a head peft and AdapterHub both hold."""
  return interop_testing.random_method_model(
      handle, LoRAConfig(r=4, alpha=8, target_modules=("query", "value", "intermediate")),
      pooling="cls", hidden_layers=0)


if __name__ == "__main__":
  tf.test.main()

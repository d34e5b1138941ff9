"""The config tree on the command line: every AdapterConfig field has its flag, and
`--config_file` and `--params_override` set the same settings, as in the Model Garden; one
vocabulary of methods (`--method`, `--methods`), a setting of a method not trained refused,
and nothing written by a refused run."""

import concurrent.futures
import contextlib
import io
import json
import os
import shutil
import subprocess

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import common_flags
from experiments import run_classification
from experiments import testing as cli_testing
from keras_adapters.analysis import method_comparison
from keras_adapters.core import config_definitions
from keras_adapters.data import glue_testing
from keras_adapters.data import squad_testing
from keras_adapters.hub import testing
from keras_adapters.models import adapter_config
from keras_adapters.utils import settings
from keras_adapters.utils import warm_python

_SEQ_LENGTH = 12


def _model_flags():
  return [f"--hub_handle={testing.tiny_hub_handle()}",
          f"--preprocess_handle={testing.tiny_preprocess_handle(_SEQ_LENGTH)}",
          f"--max_seq_length={_SEQ_LENGTH}"]


def _config_and_stderr(*argv):
  """The run config of run_classification's flags `argv` and what it printed on stderr."""
  printed = io.StringIO()
  with flagsaver.flagsaver(), contextlib.redirect_stderr(printed):
    flags.FLAGS(["run_classification", *_model_flags(), *argv])
    return common_flags.run_config_from_flags(), printed.getvalue()


class ConfigFlagsCliTest(tf.test.TestCase):

  def test_every_setting_is_a_flag_with_its_help(self):
    for name, path in config_definitions.SETTINGS.items():
      flag = run_classification.FLAGS[name]
      field = dict(config_definitions.leaves())[path]
      # absl puts an enum's choices before its help.
      self.assertEndsWith(flag.help, field.metadata[settings.HELP], name)

  def test_adapter_fields_flags_config_file_and_params_override_reach_the_run(self):
    """A YAML --config_file sets the budget and a placement, flags override it, and
    --params_override comes last; run.json records and the exported artifact holds the
    AdapterConfig that trained."""
    root = self.create_tempdir().full_path
    config_file = os.path.join(root, "config.yaml")
    with open(config_file, "w", encoding="utf-8") as f:
      f.write("trainer:\n  epochs: 1\n  batch_size: 4\nmodel:\n  adapter:\n"
              "    mh_adapter: false\n    adapter_size: 8\n")
    argv = ["run_classification"] + [f"--{k}={v}" for k, v in dict(
        data_path=cli_testing.write_two_class_csv(os.path.join(root, "two.csv")),
        hub_handle=testing.tiny_hub_handle(),
        preprocess_handle=testing.tiny_preprocess_handle(_SEQ_LENGTH),
        split_manifest=os.path.join(root, "split.json"), model_dir=os.path.join(root, "run"),
        max_train_examples="0", max_seq_length=str(_SEQ_LENGTH), config_file=config_file,
        batch_size="8", adapter_activation="gelu", leave_out="1", scaling="0.5",
        residual_before_ln="post_add", original_ln_before="true",
        params_override="model.adapter.adapter_size=4,trainer.learning_rate=0.01").items()]
    cli_testing.run_main(run_classification.main, argv)
    with open(os.path.join(root, "run", "run.json"), encoding="utf-8") as f:
      recorded = json.load(f)["config"]
    self.assertEqual({name: recorded[name] for name in (
        "epochs", "batch_size", "learning_rate", "adapter_size", "mh_adapter",
        "adapter_activation", "leave_out", "scaling", "residual_before_ln",
        "original_ln_before")},
                     dict(epochs=1, batch_size=8, learning_rate=0.01, adapter_size=4,
                          mh_adapter=False, adapter_activation="gelu", leave_out=[1],
                          scaling=0.5, residual_before_ln="post_add",
                          original_ln_before=True))
    with open(os.path.join(root, "run", "export", "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      exported = adapter_config.AdapterConfig.from_dict(json.load(f)["adapter_config"])
    self.assertEqual(exported, adapter_config.AdapterConfig(
        adapter_size=4, mh_adapter=False, activation="gelu", leave_out=(1,), scaling=0.5,
        residual_before_ln="post_add", original_ln_before=True))

  def test_bad_overrides_are_usage_errors_naming_the_setting(self):
    root = self.create_tempdir().full_path
    for extra, message in (
        (["--params_override=trainer.epoch=2"], r"Cannot apply the override.*epoch"),
        (["--leave_out=a"], r"--leave_out=a: give comma-separated layer indices"),
        (["--adapter_config={\"mh_adapter\": false}", "--mh_adapter=false"],
         r"--adapter_config and --mh_adapter both set")):
      argv = ["run_classification", f"--data_path={os.path.join(root, 'none.csv')}",
              f"--model_dir={os.path.join(root, 'run')}", "--hub_handle=/nowhere",
              "--preprocess_handle=/nowhere"] + extra
      with self.assertRaisesRegex(ValueError, message):
        cli_testing.run_main(run_classification.main, argv)


class MethodVocabularyCliTest(tf.test.TestCase):

  def test_methods_takes_the_names_method_takes_with_their_rates(self):
    self.assertEqual(flags.FLAGS["method"].parser.enum_values, list(config_definitions.METHODS))
    self.assertCountEqual(method_comparison.METHODS, config_definitions.METHODS)
    self.assertIn(", ".join(sorted(config_definitions.METHODS)), flags.FLAGS["methods"].help)

  def test_method_top_k_and_the_old_spelling_make_one_run_with_a_notice(self):
    new, quiet = _config_and_stderr("--method=top_k", "--top_k=1")
    old, notice = _config_and_stderr("--method=adapters", "--tuning=top_k", "--top_k=1")
    self.assertEqual((new.model.method_name, quiet), ("top_k", ""))
    self.assertEqual(old, new)
    self.assertEqual(notice.splitlines(), [
        "Deprecated: --tuning=top_k is the old spelling of --method=top_k; it runs the same, "
        "and a later version will refuse it."])

  def test_a_setting_of_a_method_not_trained_is_refused_before_any_work(self):
    root = self.create_tempdir().full_path
    config_file = os.path.join(root, "lora.yaml")
    with open(config_file, "w", encoding="utf-8") as f:
      f.write("model:\n  lora:\n    r: 4\n")
    model_dir = os.path.join(root, "run")
    for extra, line in (
        (["--method=adapters", "--lora_r=16"],
         "--lora_r=16 is a setting of --method='lora', not of --method='adapters' that this run "
         "trains: drop it, or give --method='lora'."),
        (["--method=lora", "--adapter_size=32"],
         "--adapter_size=32 is a setting of --method='adapters', not of --method='lora' that "
         "this run trains: drop it, or give --method='adapters'."),
        (["--method=full", "--top_k=2"],
         "--top_k=2 is a setting of --method='top_k', not of --method='full' that this run "
         "trains: drop it, or give --method='top_k'."),
        (["--method=ia3", f"--config_file={config_file}"],
         "--lora_r=4 is a setting of --method='lora', not of --method='ia3' that this run "
         "trains: drop it, or give --method='lora'."),
        (["--methods=adapters,full", "--ia3_leave_out=1"],
         "--ia3_leave_out=1 is a setting of ia3, which --methods=adapters,full does not "
         "train: drop it, or add ia3 to the methods."),
        (["--methods=lora,top_k", "--method=ia3"],
         "--methods=lora,top_k sets the method of each run (lora, top_k): drop --method, which "
         "sets that of a single run.")):
      argv = ["run_classification", *_model_flags(), f"--model_dir={model_dir}",
              f"--data_path={os.path.join(root, 'none.csv')}", *extra]
      self.assertEqual(cli_testing.cli_error(run_classification.main, argv), (2, [line]))
    self.assertFalse(os.path.exists(model_dir))

  def test_a_refused_setting_leaves_nothing_and_the_corrected_command_runs(self):
    """`--lora_leave_out` naming a layer the base lacks is refused by its name, before the
    split, the run record or the export folder is written into --model_dir; the corrected
    command into the same folder then trains."""
    root = self.create_tempdir().full_path
    model_dir = os.path.join(root, "run")
    argv = ["run_classification", *_model_flags(), f"--model_dir={model_dir}",
            f"--data_path={cli_testing.write_two_class_csv(os.path.join(root, 'two.csv'))}",
            "--max_train_examples=0", "--epochs=1", "--batch_size=8", "--method=lora"]
    self.assertEqual(
        cli_testing.cli_error(run_classification.main, argv + ["--lora_leave_out=2"]),
        (2, ["--lora_leave_out=2 names layers [2] that the encoder does not have: it has layers "
             "0..1."]))
    self.assertFalse(os.path.exists(model_dir))
    cli_testing.run_main(run_classification.main, argv + ["--lora_leave_out=1"])
    with open(os.path.join(model_dir, "run.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["config"]["lora_leave_out"], [1])

  def test_freeze_below_adapters_reaches_the_adapter_config_or_is_refused_in_one_line(self):
    """--freeze_below_adapters (AdapterDrop's training) reaches the AdapterConfig; with no
    layer left out below the adapters the run is refused by its name before anything is
    written (a whole encoder frozen is refused too: adapter_config_test)."""
    config, _ = _config_and_stderr("--leave_out=0", "--freeze_below_adapters")
    self.assertEqual(config.model.adapter,
                     adapter_config.AdapterConfig(leave_out=(0,), freeze_below_adapters=True))
    root = self.create_tempdir().full_path
    model_dir = os.path.join(root, "run")
    status, lines = cli_testing.cli_error(run_classification.main, [
        "run_classification", *_model_flags(), f"--model_dir={model_dir}",
        f"--data_path={cli_testing.write_two_class_csv(os.path.join(root, 'two.csv'))}",
        "--freeze_below_adapters"])
    self.assertEqual((status, len(lines)), (2, 1), lines)
    self.assertStartsWith(lines[0], "--freeze_below_adapters freezes the layers below the "
                          "lowest adapted one, but layer 0 has adapters (--leave_out=): leave "
                          "the lowest layers out, e.g. --leave_out=0,1.")
    self.assertFalse(os.path.exists(model_dir))


class EveryTrainingScriptCliTest(tf.test.TestCase):
  """`--methods=lora,top_k` in run_glue.py and `--method=top_k` in run_squad.py, each in a
  subprocess (their flags would clash with run_classification's here), run side by side."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "every_training_script")
    shutil.rmtree(root, ignore_errors=True)
    glue_testing.write_tiny_glue(os.path.join(root, "glue"), "rte", num_examples=8)
    squad_file = squad_testing.write_tiny_squad(os.path.join(root, "squad.json"))
    encoder = testing.tiny_hub_handle()
    glue = ["run_glue.py", f"--data_dir={os.path.join(root, 'glue')}", "--task=rte",
            "--methods=lora,top_k", f"--model_dir={os.path.join(root, 'glue_runs')}",
            f"--hub_handle={encoder}", "--max_seq_length=16",
            f"--preprocess_handle={testing.tiny_preprocess_handle(16)}", "--epochs=1",
            "--batch_size=8"]
    squad = ["run_squad.py", f"--train_file={squad_file}", f"--predict_file={squad_file}",
             "--method=top_k", "--top_k=1", f"--model_dir={os.path.join(root, 'squad_run')}",
             f"--hub_handle={encoder}", f"--preprocess_handle={testing.tiny_preprocess_handle()}",
             f"--feature_cache_dir={os.path.join(root, 'features')}", "--max_seq_length=32",
             "--doc_stride=8", "--max_query_length=4", "--max_answer_length=5",
             "--batch_size=4", "--epochs=1"]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      cls.glue, cls.squad = pool.map(cls._run, (glue, squad))

  @staticmethod
  def _run(argv):
    return subprocess.run(warm_python.command(os.path.join("experiments", argv[0]), *argv[1:]),
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))

  def _results(self, *path):
    with open(os.path.join(self.root, *path), encoding="utf-8") as f:
      return json.load(f)

  def test_run_glue_runs_each_of_methods_in_its_folder(self):
    self.assertEqual(self.glue.returncode, 0, self.glue.stderr[-3000:])
    lora = self._results("glue_runs", "lora", "glue_results.json")["rte"]["config"]
    top_k = self._results("glue_runs", "top_k", "glue_results.json")["rte"]["config"]
    self.assertEqual((lora["method"], lora["learning_rate"]),
                     ("lora", method_comparison.METHODS["lora"]["learning_rate"]))
    self.assertEqual((top_k["method"], top_k["tuning"], top_k["top_k"]),
                     ("adapters", "top_k", 1))

  def test_run_squad_takes_a_baseline_by_method(self):
    self.assertEqual(self.squad.returncode, 0, self.squad.stderr[-3000:])
    config = self._results("squad_run", "results.json")["config"]
    self.assertEqual((config["tuning"], config["top_k"], config["adapter_size"]),
                     ("top_k", 1, None))


if __name__ == "__main__":
  tf.test.main()

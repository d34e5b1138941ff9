"""The config tree on the command line: every AdapterConfig field has its flag, and
`--config_file` and `--params_override` set the same settings, as in the Model Garden."""

import json
import os

import tensorflow as tf

from experiments import run_classification
from experiments import testing as cli_testing
from keras_adapters.core import config_definitions
from keras_adapters.hub import testing
from keras_adapters.models import adapter_config
from keras_adapters.utils import settings

_SEQ_LENGTH = 12


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


if __name__ == "__main__":
  tf.test.main()

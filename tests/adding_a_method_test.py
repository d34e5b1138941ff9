"""Adding a method is one registration: a toy method, registered from this test without a
folder or an edit anywhere else, gets its config tree section, its flags, its place among the
methods a run and a comparison take, and its artifact keys.

The registration runs in a fresh process, before the config tree is built, as a method's
folder registers when `keras_adapters.methods` is imported."""

import json
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest

_PROGRAM = textwrap.dedent('''
    import dataclasses
    import json
    from typing import Tuple

    from keras_adapters.methods import method_config
    from keras_adapters.methods import registry
    from keras_adapters.utils import settings


    @dataclasses.dataclass(frozen=True)
    class ToyConfig(method_config.MethodConfig):
      method = "toy"
      rank: int = settings.setting(2, "The toy's rank.")
      target_modules: Tuple[str, ...] = settings.setting(("value",), "Its projections.")
      leave_out: Tuple[int, ...] = settings.setting((), "Layers without it.")
      train_layer_norms: bool = settings.setting(False, "Train the LayerNorms too.")

      def __post_init__(self):
        self._check_common()

      def layer_options(self, target):
        return dict(rank=self.rank)


    registry.register(ToyConfig, learning_rate=2e-3)

    from absl import flags
    from experiments import common_flags
    from keras_adapters.analysis import method_comparison
    from keras_adapters.core import config_definitions
    from keras_adapters.hub import adapter_artifact

    common_flags.define_run_flags()
    flags.FLAGS(["prog", "--method=toy", "--toy_rank=5", "--toy_leave_out=1"])
    config = config_definitions.ExperimentConfig.from_settings(
        hub_handle="base", preprocess_handle="preprocessing", method="toy", toy_rank=5,
        toy_leave_out=(1,))
    tensors = ["transformer/layer_0/value/toy/a", "transformer/layer_0/value/kernel",
               "head/logits/kernel"]
    print(json.dumps(dict(
        path=config_definitions.SETTINGS["toy_rank"],
        set_config=config.model.set_config.to_dict(),
        record={k: v for k, v in config.definition().items() if k.startswith("toy_")},
        flags=[flags.FLAGS["toy_rank"].value, flags.FLAGS["toy_leave_out"].value,
               flags.FLAGS["toy_rank"].help],
        owners=config_definitions.setting_methods("toy_rank"),
        method_choices=list(flags.FLAGS["method"].parser.enum_values),
        compared=method_comparison.METHODS["toy"],
        base_weights=adapter_artifact.changed_base_weights({"tensors": tensors}))))
''')


class AddingAMethodTest(absltest.TestCase):

  def test_a_registration_is_all_a_method_needs(self):
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, check=False,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    found = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertEqual(found["path"], ["model", "toy", "rank"])
    self.assertEqual(found["set_config"], dict(
        method="toy", rank=5, target_modules=["value"], leave_out=[1],
        train_layer_norms=False))
    self.assertEqual(found["record"], dict(toy_rank=5, toy_target_modules=["value"],
                                           toy_leave_out=[1], toy_train_layer_norms=False))
    self.assertEqual(found["flags"], [5, ["1"], "The toy's rank."])
    self.assertEqual(found["owners"], ["toy"])
    self.assertIn("toy", found["method_choices"])
    self.assertEqual(found["compared"], dict(method="toy", learning_rate=2e-3))
    # Its layers' tensors are the task's; the kernel beside them is the base's.
    self.assertEqual(found["base_weights"], ["transformer/layer_0/value/kernel"])


if __name__ == "__main__":
  absltest.main()

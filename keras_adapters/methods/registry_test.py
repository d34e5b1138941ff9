"""The registry: every method, the bottleneck adapters included, registered by its config."""

import dataclasses

from absl.testing import absltest

from keras_adapters.methods import registry
from keras_adapters.methods.adapters.config import AdapterConfig


@dataclasses.dataclass(frozen=True)
class _Unnamed:
  rank: int = 1


class RegistryTest(absltest.TestCase):

  def test_every_method_is_named_by_its_config(self):
    self.assertEqual(registry.names(), ("adapters", "lora", "ia3"))
    for method in registry.methods():
      self.assertEqual(method.name, method.config_class.method)
      self.assertIs(registry.get(method.name), method)
      self.assertIs(registry.of_config(method.config_class), method)
    self.assertIs(registry.get("adapters").config_class, AdapterConfig)
    self.assertIsNone(registry.of_config(_Unnamed))

  def test_sections_and_flags_keep_their_names(self):
    """The bottleneck adapters keep `model.adapter` and their unprefixed flags; the other
    methods' flags are `<name>_<field>`."""
    adapters, lora = registry.get("adapters"), registry.get("lora")
    fields = {f.name: f for f in dataclasses.fields(AdapterConfig)}
    self.assertEqual((adapters.section, adapters.flag_name(fields["adapter_size"]),
                      adapters.flag_name(fields["activation"])),
                     ("adapter", "adapter_size", "adapter_activation"))
    self.assertEqual([lora.flag_name(f) for f in dataclasses.fields(lora.config_class)][:2],
                     ["lora_r", "lora_alpha"])

  def test_a_config_without_a_name_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"_Unnamed.method must name the method"):
      registry.register(_Unnamed, learning_rate=1e-3)
    self.assertNotIn(None, registry.names())

  def test_a_section_is_one_methods(self):
    @dataclasses.dataclass(frozen=True)
    class Other:
      method = "other"

    with self.assertRaisesRegex(ValueError, r"section 'lora' is method 'lora'"):
      registry.register(Other, learning_rate=1e-3, section="lora")
    self.assertNotIn("other", registry.names())


if __name__ == "__main__":
  absltest.main()

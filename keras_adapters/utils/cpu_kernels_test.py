"""Tests for cpu_kernels."""

import os
import subprocess
import sys

import pytest

from keras_adapters.utils import cpu_kernels


def test_cpu_info_names_the_model_and_its_vector_extensions(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\n"
                     "flags\t\t: fpu sse sse2 ssse3 sse4_1 fma avx avx2 avx512f avx512_bf16 "
                     "aes\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9B14\n")
  assert cpu_kernels.cpu_info(str(cpuinfo)) == dict(
      cpu_model="AMD EPYC 9B14",
      vector_extensions=["avx", "avx2", "avx512_bf16", "avx512f", "fma", "sse", "sse2",
                         "sse4_1", "ssse3"])
  assert cpu_kernels.cpu_info(str(tmp_path / "missing")) == dict(cpu_model=None,
                                                                 vector_extensions=None)


@pytest.mark.parametrize("environ, modules, machine, onednn, chosen_by", [
    ({}, {}, "x86_64", "1", "keras_adapters"),
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, {}, "x86_64", "0", "user"),
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, {"tensorflow": None}, "x86_64", "0", "user"),
    ({}, {"tensorflow": None}, "x86_64", None, "tensorflow (loaded before keras_adapters)"),
    ({}, {}, "aarch64", None, "tensorflow (not an x86-64 CPU: aarch64)"),
])
def test_choice_respects_the_user_and_a_loaded_tensorflow(environ, modules, machine, onednn,
                                                          chosen_by, monkeypatch):
  monkeypatch.setattr(cpu_kernels, "_choice", None)
  chosen = cpu_kernels.choose_before_tensorflow(environ, modules, machine)
  assert chosen == dict(onednn=onednn, chosen_by=chosen_by)
  assert environ.get(cpu_kernels.ONEDNN_VARIABLE) == onednn
  assert cpu_kernels.choice() == chosen


def _chosen_in_a_fresh_python(env):
  code = ("import keras_adapters, os, tensorflow; "
          "from keras_adapters.utils import cpu_kernels; "
          "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), cpu_kernels.choice()['chosen_by'], "
          "sep='|')")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True).stdout
  return out.strip().splitlines()[-1].split("|")


def test_importing_the_library_chooses_before_tensorflow_loads_and_the_user_wins(monkeypatch):
  monkeypatch.setattr(cpu_kernels, "_choice", cpu_kernels._choice)  # Restored after the test.
  env = {key: value for key, value in os.environ.items()
         if key != cpu_kernels.ONEDNN_VARIABLE}
  expected = cpu_kernels.choose_before_tensorflow({}, {})
  assert _chosen_in_a_fresh_python(env) == [str(expected["onednn"]), expected["chosen_by"]]
  env[cpu_kernels.ONEDNN_VARIABLE] = "0"
  assert _chosen_in_a_fresh_python(env) == ["0", "user"]


def test_machine_record_carries_the_kernels():
  record = cpu_kernels.machine_record()
  assert record["kernels"] == cpu_kernels.choice()
  assert record["cpu_count"] == os.cpu_count()

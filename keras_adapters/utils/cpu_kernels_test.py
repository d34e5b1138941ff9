"""Tests for cpu_kernels."""

import os
import platform
import subprocess
import sys
import warnings

import pytest

from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import errors


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
  with warnings.catch_warnings():
    warnings.simplefilter("error", cpu_kernels.OneDnnOffWarning)
    chosen = cpu_kernels.choose_before_tensorflow(environ, modules, machine,
                                                  onednn_on=lambda: True)
  assert chosen == dict(onednn=onednn, chosen_by=chosen_by)
  assert environ.get(cpu_kernels.ONEDNN_VARIABLE) == onednn
  assert cpu_kernels.choice() == chosen


@pytest.mark.parametrize("environ, machine, onednn_on, warned", [
    ({}, "x86_64", False, True),
    ({}, "x86_64", True, False),  # TensorFlow's own default chose oneDNN (AVX-512 VNNI).
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "x86_64", False, False),
    ({"TF_ENABLE_ONEDNN_OPTS": "1"}, "x86_64", False, False),  # Set too late: their call.
    ({}, "aarch64", False, False),
])
def test_tensorflow_loaded_first_without_onednn_is_told_once_how_to_get_it(
    environ, machine, onednn_on, warned, monkeypatch):
  monkeypatch.setattr(cpu_kernels, "_choice", None)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cpu_kernels.choose_before_tensorflow(environ, {"tensorflow": None}, machine,
                                         onednn_on=lambda: onednn_on)
  assert [(w.category, str(w.message)) for w in caught] == (
      [(cpu_kernels.OneDnnOffWarning, cpu_kernels.TOO_LATE_FOR_ONEDNN)] if warned else [])


def _import_in_a_fresh_python(first, second, env):
  """A fresh Python imports `first`, then `second`; returns its stderr, the variable and
  `choice()["chosen_by"]` it ends with, and whether TensorFlow runs oneDNN."""
  code = (f"import {first}; import {second}; import os; "
          "from keras_adapters.utils import cpu_kernels; "
          "from tensorflow.python.util import _pywrap_util_port; "
          "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), cpu_kernels.choice()['chosen_by'], "
          "_pywrap_util_port.IsMklEnabled(), sep='|')")
  process = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True)
  onednn, chosen_by, onednn_on = process.stdout.strip().splitlines()[-1].split("|")
  return process.stderr, onednn, chosen_by, onednn_on == "True"


def test_the_import_order_decides_and_a_late_library_says_how_to_get_onednn(monkeypatch):
  """keras_adapters first chooses before TensorFlow loads (oneDNN on any x86-64 CPU), with no
  notice. TensorFlow first (the README's old order) keeps TensorFlow's default, and where that
  left oneDNN off (a CPU without AVX-512 VNNI or newer: this one, if AVX2 only) one notice
  says how to get it. A user's variable wins in either order, with no notice."""
  monkeypatch.setattr(cpu_kernels, "_choice", cpu_kernels._choice)  # Restored after the test.
  env = {key: value for key, value in os.environ.items()
         if key != cpu_kernels.ONEDNN_VARIABLE}
  expected = cpu_kernels.choose_before_tensorflow({}, {})
  stderr, onednn, chosen_by, onednn_on = _import_in_a_fresh_python(
      "keras_adapters", "tensorflow", env)
  assert [onednn, chosen_by] == [str(expected["onednn"]), expected["chosen_by"]]
  assert "OneDnnOffWarning" not in stderr
  if platform.machine().lower() in ("x86_64", "amd64"):
    assert onednn_on

  stderr, onednn, chosen_by, onednn_on = _import_in_a_fresh_python(
      "tensorflow", "keras_adapters", env)
  assert [onednn, chosen_by] == ["None", "tensorflow (loaded before keras_adapters)"]
  warned = not onednn_on and platform.machine().lower() in ("x86_64", "amd64")
  assert stderr.count(f"OneDnnOffWarning: {cpu_kernels.TOO_LATE_FOR_ONEDNN}") == warned, stderr

  env[cpu_kernels.ONEDNN_VARIABLE] = "0"
  stderr, onednn, chosen_by, onednn_on = _import_in_a_fresh_python(
      "tensorflow", "keras_adapters", env)
  assert [onednn, chosen_by, onednn_on] == ["0", "user", False]
  assert "OneDnnOffWarning" not in stderr


def test_machine_record_carries_the_kernels():
  record = cpu_kernels.machine_record()
  assert record["kernels"] == cpu_kernels.choice()
  assert record["cpu_count"] == os.cpu_count()


_XEON = ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile"]


@pytest.mark.parametrize("dtype, cap, extensions, refused", [
    ("bfloat16", "AVX2", _XEON, True),
    ("bfloat16", "avx2_vnni", _XEON, True),  # oneDNN reads the cap in any case.
    ("bfloat16", "AVX512_CORE", _XEON, False),
    ("float16", "AVX512_CORE_BF16", _XEON, True),
    ("float16", "AVX512_CORE_FP16", _XEON, False),
    ("float16", "AVX10_1_512", _XEON, False),  # The same cap by its other name.
    ("float32", "AVX2", _XEON, False),
    ("bfloat16", None, _XEON, False),
    ("bfloat16", "ALL", _XEON, False),
    # Without the extension, TensorFlow computes 16 bits with Eigen's kernels: no crash.
    ("bfloat16", "AVX2", ["avx", "avx2", "fma"], False),
    ("float16", "AVX2", ["avx2", "avx512f", "avx512_bf16"], False),
])
def test_a_cap_below_the_sixteen_bit_kernels_tensorflow_picks_is_refused(dtype, cap,
                                                                         extensions, refused):
  environ = {} if cap is None else {cpu_kernels.CAP_VARIABLE: cap}
  check = lambda: cpu_kernels.check_sixteen_bit(dtype, environ, extensions,
                                                on_gpu=lambda: False)
  if not refused:
    check()
    return
  with pytest.raises(errors.UsageError) as raised:
    check()
  needed = "AVX512_CORE_FP16" if dtype == "float16" else "AVX512_CORE"
  assert str(raised.value) == (
      f"Computing in {dtype} with ONEDNN_MAX_CPU_ISA={cap} would crash TensorFlow (a "
      f"segmentation fault): on this CPU ({'avx512_fp16' if dtype == 'float16' else 'avx512f'})"
      f" it runs {dtype} with oneDNN kernels that this cap forbids. Unset ONEDNN_MAX_CPU_ISA, "
      f"set it to {needed} or higher, or compute in float32.")


def test_the_cap_is_no_matter_with_onednn_off_or_on_a_gpu():
  environ = {cpu_kernels.CAP_VARIABLE: "AVX2"}
  cpu_kernels.check_sixteen_bit("bfloat16", dict(environ, **{cpu_kernels.ONEDNN_VARIABLE: "0"}),
                                _XEON, on_gpu=lambda: False)
  cpu_kernels.check_sixteen_bit("bfloat16", environ, _XEON, on_gpu=lambda: True)

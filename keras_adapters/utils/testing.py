"""Test helpers that need no model: what autograph is asked to convert, a capped CPU."""

import contextlib
import os
from unittest import mock

from tensorflow.python.autograph.impl import api as autograph_api

from keras_adapters.utils import cpu_kernels


@contextlib.contextmanager
def autograph_conversions():
  """Yields a list that fills with the qualified names of the functions autograph is asked to
  convert inside the block. A `tf.function` with autograph calls `converted_call` on its
  function (and on what that calls) as it traces, whether converted before or not, so a name
  missing from the list was traced without autograph."""
  names = []
  convert = autograph_api.converted_call

  def record(function, *args, **kwargs):
    names.append(getattr(function, "__qualname__", type(function).__name__))
    return convert(function, *args, **kwargs)

  with mock.patch.object(autograph_api, "converted_call", record):
    yield names


@contextlib.contextmanager
def avx512_cpu_capped_at_avx2():
  """Inside the block, `cpu_kernels` sees a CPU with AVX-512, no GPU, and oneDNN's kernels on
  and capped at AVX2 by the user (`ONEDNN_MAX_CPU_ISA`): a bfloat16 run would crash TensorFlow.
  oneDNN is said on whatever the suite runs with (`TF_ENABLE_ONEDNN_OPTS=0` included)."""
  with mock.patch.dict(os.environ, {cpu_kernels.CAP_VARIABLE: "AVX2",
                                    cpu_kernels.ONEDNN_VARIABLE: "1"}), \
      mock.patch.object(cpu_kernels, "cpu_info",
                        return_value=dict(cpu_model="x", vector_extensions=["avx512f"])), \
      mock.patch.object(cpu_kernels, "_tensorflow_sees_a_gpu", return_value=False):
    yield

"""The CPU TensorFlow runs on, and the kernels chosen for it before TensorFlow loads.

TensorFlow's x86 wheels turn their oneDNN kernels on by default only where the CPU has
AVX-512 VNNI, AVX-512 BF16, AVX-VNNI or AMX; on an AVX2-only CPU they run Eigen's. Measured on
a 2-core AMD EPYC with AVX2 only, oneDNN made an adapter training step 15% faster, a full one
18% and inference 8-17%, with results equal to the tolerance of the library's parity tests
(oneDNN sums in another order). So keras_adapters turns oneDNN on on every x86-64 CPU,
before TensorFlow reads `TF_ENABLE_ONEDNN_OPTS`; a user who sets the variable keeps their
choice, and a process that loaded TensorFlow first keeps TensorFlow's: where that left oneDNN
off, it is told once how to get it (a `OneDnnOffWarning`: TensorFlow reads the variable only as
it loads). `choice()` says which happened; provenance records it with the CPU's model and
vector extensions.

`check_sixteen_bit` refuses a bfloat16 or float16 run that a user's `ONEDNN_MAX_CPU_ISA` cap
would crash.

Standard library only (`errors` is too): this runs before TensorFlow is imported.
"""

import os
import platform
import re
import sys
from typing import Any, Callable, Dict, Mapping, MutableMapping, Optional, Sequence
import warnings

from keras_adapters.utils import errors

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
# Where oneDNN is the faster of TensorFlow's CPU kernels (x86-64 wheels carry it).
_ONEDNN_MACHINES = ("x86_64", "amd64")

# The instruction sets that decide how fast the CPU kernels run (oneDNN picks its kernels by
# them): x86's SSE, AVX, AVX-512, FMA and AMX, Arm's NEON/ASIMD and SVE.
_VECTOR_EXTENSION = re.compile(r"^(sse\w*|ssse3|avx\w*|fma\w*|f16c|amx\w*|neon|asimd\w*|sve\w*)$")

_choice: Optional[Dict[str, Any]] = None

TOO_LATE_FOR_ONEDNN = (
    "TensorFlow was imported before keras_adapters, so its faster oneDNN CPU kernels are off "
    "(training steps measured 15% slower without them on an AVX2 CPU): import keras_adapters "
    f"before tensorflow, or set {ONEDNN_VARIABLE}=1 before importing TensorFlow "
    f"({ONEDNN_VARIABLE}=0 keeps the other kernels without this notice).")


# oneDNN's instruction-set caps (`ONEDNN_MAX_CPU_ISA`), by rank, lowest first; aliases share one.
CAP_VARIABLE = "ONEDNN_MAX_CPU_ISA"
_CAP_RANKS = {name: rank for rank, names in enumerate((
    ("SSE41",), ("AVX",), ("AVX2",), ("AVX2_VNNI",), ("AVX2_VNNI_2",), ("AVX512_CORE",),
    ("AVX512_CORE_VNNI",), ("AVX512_CORE_BF16",), ("AVX512_CORE_FP16", "AVX10_1_512"),
    ("AVX512_CORE_AMX", "AVX10_1_512_AMX"), ("AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16")))
              for name in names}
# For each 16-bit compute dtype: the CPU extension by which TensorFlow runs it with oneDNN's
# kernels, and the lowest cap those kernels run under. TensorFlow picks them by the CPU, not
# the cap: under a lower cap, the first 16-bit matmul ends the process with a segmentation
# fault (TensorFlow 2.20 on an Intel Xeon with AVX-512 BF16 and FP16: bfloat16 under AVX2 and
# AVX2_VNNI, float16 under every cap up to AVX512_CORE_BF16).
_SIXTEEN_BIT = {"bfloat16": ("avx512f", "AVX512_CORE"),
                "float16": ("avx512_fp16", "AVX512_CORE_FP16")}


class OneDnnOffWarning(UserWarning):
  """TensorFlow loaded first, without the oneDNN kernels keras_adapters would have chosen."""


def cpu_info(cpuinfo: str = "/proc/cpuinfo") -> Dict[str, Any]:
  """The CPU's model name and its vector extensions, as Linux's `cpuinfo` lists them.

  A time means little without them: TensorFlow's oneDNN kernels use AVX-512 (and its
  bfloat16 instructions) where the CPU has it, and slower ones where it does not. Both are
  `None` where the file is missing (not Linux).
  """
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      text = f.read()
  except OSError:
    return dict(cpu_model=None, vector_extensions=None)
  model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
  features = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
  return dict(cpu_model=model.group(1).strip() if model else None,
              vector_extensions=sorted(
                  name for name in features.group(1).split() if _VECTOR_EXTENSION.match(name))
              if features else None)


def choose_before_tensorflow(environ: MutableMapping[str, str] = os.environ,
                             modules: Mapping[str, Any] = sys.modules,
                             machine: Optional[str] = None,
                             onednn_on: Optional[Callable[[], bool]] = None) -> Dict[str, Any]:
  """Turns oneDNN on where it is the faster choice and TensorFlow has not loaded yet.

  Where TensorFlow loaded first, on an x86-64 CPU, the variable unset, and without oneDNN
  (TensorFlow's default turns it on only on CPUs with AVX-512 VNNI and newer), warns
  (`OneDnnOffWarning`) how to get it.

  Args:
    environ: The environment TensorFlow will read.
    modules: The loaded modules (`sys.modules`): once `tensorflow` is among them, its kernels
      are chosen and the variable is no longer read.
    machine: The machine type, `platform.machine()` by default.
    onednn_on: Whether the loaded TensorFlow runs oneDNN's kernels; by default TensorFlow's
      own answer. Asked only once TensorFlow is loaded.

  Returns:
    What `choice()` returns from now on: `onednn` (the variable's value, `None` when unset:
    TensorFlow's default for the CPU) and `chosen_by` ("user", "keras_adapters",
    "tensorflow (loaded before keras_adapters)" or "tensorflow (not an x86-64 CPU)").
  """
  global _choice
  machine = (machine or platform.machine()).lower()
  if ONEDNN_VARIABLE in environ:
    chosen_by = "user"
  elif "tensorflow" in modules:
    chosen_by = "tensorflow (loaded before keras_adapters)"
    if machine in _ONEDNN_MACHINES and not (onednn_on or _tensorflow_runs_onednn)():
      # Pointing at the caller's caller: the user's `import keras_adapters`.
      warnings.warn(TOO_LATE_FOR_ONEDNN, OneDnnOffWarning, stacklevel=3)
  elif machine in _ONEDNN_MACHINES:
    environ[ONEDNN_VARIABLE] = "1"
    chosen_by = "keras_adapters"
  else:
    chosen_by = f"tensorflow (not an x86-64 CPU: {machine})"
  _choice = dict(onednn=environ.get(ONEDNN_VARIABLE), chosen_by=chosen_by)
  return dict(_choice)


def _tensorflow_runs_onednn() -> bool:
  """Whether the TensorFlow already loaded chose oneDNN's kernels."""
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  return bool(_pywrap_util_port.IsMklEnabled())


def check_sixteen_bit(compute_dtype: str, environ: Mapping[str, str] = os.environ,
                      extensions: Optional[Sequence[str]] = None,
                      on_gpu: Optional[Callable[[], bool]] = None) -> None:
  """Raises a `UsageError` where computing in `compute_dtype` with TensorFlow on this CPU
  would crash it: its oneDNN kernels for the dtype, chosen by the CPU's extensions, forbidden
  by the user's `ONEDNN_MAX_CPU_ISA` cap (see `_SIXTEEN_BIT`).

  Args:
    compute_dtype: The compute dtype of the run, e.g. "bfloat16"; float32 always passes.
    environ: The environment TensorFlow read as it loaded.
    extensions: The CPU's vector extensions; by default `cpu_info()`'s.
    on_gpu: Whether TensorFlow computes on a GPU (no oneDNN there); by default whether it
      sees one. Asked only where the cap would forbid the kernels.
  """
  cap = environ.get(CAP_VARIABLE, "").upper()
  if compute_dtype not in _SIXTEEN_BIT or environ.get(ONEDNN_VARIABLE) == "0":
    return
  extension, needed = _SIXTEEN_BIT[compute_dtype]
  if cap not in _CAP_RANKS or _CAP_RANKS[cap] >= _CAP_RANKS[needed]:
    return
  if extensions is None:
    extensions = cpu_info()["vector_extensions"] or []
  if extension not in extensions or (on_gpu or _tensorflow_sees_a_gpu)():
    return
  raise errors.UsageError(
      f"Computing in {compute_dtype} with {CAP_VARIABLE}={environ[CAP_VARIABLE]} would crash "
      f"TensorFlow (a segmentation fault): on this CPU ({extension}) it runs {compute_dtype} "
      f"with oneDNN kernels that this cap forbids. Unset {CAP_VARIABLE}, set it to {needed} "
      "or higher, or compute in float32.")


def _tensorflow_sees_a_gpu() -> bool:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return bool(tf.config.list_physical_devices("GPU"))


def choice() -> Dict[str, Any]:
  """The kernels chosen by `choose_before_tensorflow`, or what the environment says."""
  if _choice is None:
    return dict(onednn=os.environ.get(ONEDNN_VARIABLE), chosen_by="not chosen by keras_adapters")
  return dict(_choice)


def machine_record() -> Dict[str, Any]:
  """What a measured figure depends on: the CPU, its vector extensions, the chosen kernels."""
  return dict(machine=platform.machine(), cpu_count=os.cpu_count(), **cpu_info(),
              kernels=choice())

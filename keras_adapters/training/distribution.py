"""Chooses a `tf.distribute.Strategy` from a name, as the TF Model Garden does.

A re-implementation of `official.common.distribute_utils.get_distribution_strategy` (that
package is not a dependency), with two differences: `"default"` gives TensorFlow's default
(no-op) strategy, and a failure to reach a TPU becomes one `TPUNotFoundError` that says how to
train without one.
"""

from typing import List, Optional

import tensorflow as tf

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")

# Addresses that mean "the TPU attached to this host" (a Cloud TPU VM): they need no
# `experimental_connect_to_cluster`.
_LOCAL_TPU_ADDRESSES = ("", "local")


class TPUNotFoundError(ValueError):
  """No TPU could be reached or initialised at the requested address."""


def get_strategy(strategy: str = "default",
                 tpu: Optional[str] = None,
                 num_gpus: Optional[int] = None) -> tf.distribute.Strategy:
  """Returns the distribution strategy named by `strategy`.

  Args:
    strategy: One of `STRATEGIES`, case-insensitive.
      `"default"`: TensorFlow's default strategy, everything on the first device (GPU:0 if
        any); with `tpu` set it means `"tpu"`.
      `"one_device"`: `OneDeviceStrategy` on GPU:0, or CPU:0 without GPUs.
      `"mirrored"`: `MirroredStrategy` over the first `num_gpus` GPUs; without GPUs, over the
        logical CPU devices when there are several (the tests split the CPU in two), else
        over CPU:0.
      `"multi_worker_mirrored"`: `MultiWorkerMirroredStrategy`; its cluster comes from the
        `TF_CONFIG` environment variable, one local worker without it.
      `"tpu"`: `TPUStrategy` on the TPU at `tpu`.
    tpu: TPU name or `grpc://` address, or `"local"` (the default) for the TPU of a Cloud TPU
      VM. Only used with `strategy` `"tpu"` or `"default"`.
    num_gpus: How many GPUs `"one_device"` and `"mirrored"` use; `None` means all visible ones.

  Returns:
    The strategy. Build the model and optimizer under its `scope()`.

  Raises:
    ValueError: For an unknown strategy name, `tpu` set with a non-TPU strategy, or a
      `num_gpus` that is negative, larger than the visible GPUs, or more than one for a
      single-device strategy.
    TPUNotFoundError: When the TPU cannot be resolved, connected to or initialised.
  """
  if not isinstance(strategy, str):
    raise ValueError(f"strategy must be a string, one of {', '.join(STRATEGIES)}; "
                     f"got {strategy!r}.")
  name = strategy.lower()
  if name not in STRATEGIES:
    raise ValueError(f"Unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}.")
  if tpu is not None and name not in ("default", "tpu"):
    raise ValueError(f"tpu={tpu!r} was given with strategy={strategy!r}: a TPU needs "
                     "strategy 'tpu' (or 'default'); drop --tpu to use another strategy.")
  if name == "tpu" or tpu is not None:
    return _tpu_strategy("local" if tpu is None else tpu)
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()

  gpus = _gpu_devices(num_gpus)
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(gpus or _cpu_devices())
  if num_gpus is not None and num_gpus > 1:
    raise ValueError(f"strategy {strategy!r} uses one device but num_gpus={num_gpus}: pass "
                     "--strategy=mirrored to train on several GPUs, or --num_gpus=1.")
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
  return tf.distribute.get_strategy()


def _gpu_devices(num_gpus: Optional[int]) -> List[str]:
  """Names of the first `num_gpus` visible GPUs (all of them for `None`)."""
  visible = len(tf.config.list_logical_devices("GPU"))
  if num_gpus is None:
    num_gpus = visible
  if num_gpus < 0:
    raise ValueError(f"num_gpus must be >= 0, got {num_gpus}.")
  if num_gpus > visible:
    raise ValueError(f"num_gpus={num_gpus} but only {visible} GPU(s) are visible: lower "
                     "--num_gpus, or check CUDA_VISIBLE_DEVICES and the GPU drivers.")
  return [f"/gpu:{i}" for i in range(num_gpus)]


def _cpu_devices() -> List[str]:
  """The logical CPU devices when the CPU was split into several, else CPU:0 alone."""
  cpus = tf.config.list_logical_devices("CPU")
  return [device.name for device in cpus] if len(cpus) > 1 else ["/cpu:0"]


def _tpu_strategy(tpu: str) -> tf.distribute.TPUStrategy:
  """Resolves, connects to and initialises the TPU at `tpu`; returns a `TPUStrategy`."""
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    if tpu not in _LOCAL_TPU_ADDRESSES:
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  # Without a TPU each step fails its own way (ValueError or URLError from the resolver, an
  # OpError such as `NotFoundError: TPUs not found in the cluster` from the connection or the
  # initialisation); all of them mean the same thing to the user.
  except Exception as e:  # pylint: disable=broad-except
    # The first line of the cause is enough here; the whole of it stays chained.
    cause = str(e).strip().split("\n", 1)[0]
    raise TPUNotFoundError(
        f"No TPU was found at {tpu!r}. To train without a TPU, drop --tpu (and "
        "--strategy=tpu) and pass --strategy=mirrored or --strategy=default. "
        f"[{type(e).__name__}: {cause}]") from e
  return tf.distribute.TPUStrategy(resolver)

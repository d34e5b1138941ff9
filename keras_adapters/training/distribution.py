"""Chooses a `tf.distribute.Strategy` by name, through the TF Model Garden.

`official.common.distribute_utils.get_distribution_strategy` builds the strategy; this module
adds what a user of this library needs around it: `"default"` for TensorFlow's default
strategy, `num_gpus=None` for "all visible GPUs", `"mirrored"` over a CPU split into logical
devices (how the tests run two replicas on one machine), and errors that say what to pass
instead, a missing TPU included.
"""

import functools
import json
import os
from typing import Optional

import tensorflow as tf

from official.common import distribute_utils
from keras_adapters.utils import errors

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")

# The Model Garden's name for TensorFlow's default strategy.
_MODEL_GARDEN_NAMES = {"default": "off"}


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
        logical CPU devices when there are several, else over CPU:0.
      `"multi_worker_mirrored"`: `MultiWorkerMirroredStrategy`; its cluster comes from the
        `TF_CONFIG` environment variable, one local worker without it. Create it before
        anything else runs TensorFlow (`Collective ops must be configured at program
        startup`); later calls return the same strategy.
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
  if not isinstance(strategy, str) or strategy.lower() not in STRATEGIES:
    raise ValueError(f"Unknown strategy={strategy!r}: use one of {', '.join(STRATEGIES)}.")
  name = strategy.lower()
  if tpu is not None and name not in ("default", "tpu"):
    raise ValueError(f"tpu={tpu!r} was given with strategy={strategy!r}: a TPU needs "
                     "strategy='tpu' (or 'default'); leave tpu unset to use another strategy.")
  if name == "tpu" or tpu is not None:
    return _tpu_strategy("local" if tpu is None else tpu)
  if name == "multi_worker_mirrored":
    check_tf_config(strategy)
    return _multi_worker_strategy()
  num_gpus = _checked_num_gpus(num_gpus)
  if name in ("default", "one_device") and num_gpus > 1:
    raise ValueError(f"strategy={strategy!r} uses one device but num_gpus={num_gpus}: pass "
                     "strategy='mirrored' to train on several GPUs, or num_gpus=1.")
  cpus = tf.config.list_logical_devices("CPU")
  if name == "mirrored" and num_gpus == 0 and len(cpus) > 1:
    # The Model Garden mirrors over CPU:0 alone when there is no GPU.
    return tf.distribute.MirroredStrategy([device.name for device in cpus])
  return distribute_utils.get_distribution_strategy(
      _MODEL_GARDEN_NAMES.get(name, name), num_gpus=num_gpus)


def check_tf_config(strategy: str = "multi_worker_mirrored") -> None:
  """Refuses a `TF_CONFIG` environment variable that `strategy` cannot read its cluster
  from: not JSON, not an object, or without `cluster` and `task`; unset or empty is one
  local worker.

  Raises:
    errors.UsageError: Naming TF_CONFIG, the strategy and what is wrong.
  """
  text = os.environ.get("TF_CONFIG", "")
  if not text.strip():
    return
  example = ('e.g. TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
             '"task": {"type": "worker", "index": 0}}\', or unset it for one local worker')
  lead = f"TF_CONFIG={text[:200]!r}, which strategy={strategy!r} reads its cluster from,"
  try:
    config = json.loads(text)
  except ValueError as e:
    raise errors.UsageError(f"{lead} is not valid JSON ({e}): give a JSON object, "
                            f"{example}.") from None
  if not isinstance(config, dict):
    raise errors.UsageError(f"{lead} is a JSON {type(config).__name__}, not an object: "
                            f"{example}.")
  missing = [key for key in ("cluster", "task") if key not in config]
  if missing:
    raise errors.UsageError(f"{lead} has no {' and no '.join(repr(k) for k in missing)}: "
                            f"give 'cluster' and 'task', {example}.")
  cluster, task = config["cluster"], config["task"]
  if not isinstance(cluster, dict) or not cluster or not all(
      isinstance(hosts, list) for hosts in cluster.values()):
    raise errors.UsageError(f"{lead} has a 'cluster' that is not an object of job names and "
                            f"address lists: {example}.")
  # TensorFlow's side-car evaluator is the one task outside the cluster.
  if not isinstance(task, dict) or (task.get("type") != "evaluator" and (
      task.get("type") not in cluster or not isinstance(task.get("index"), int)
      or not 0 <= task["index"] < len(cluster[task["type"]]))):
    raise errors.UsageError(f"{lead} has a 'task' that names no job and index of its "
                            f"'cluster' (give {{\"type\": \"worker\", \"index\": 0}} for "
                            f"the first worker): {example}.")


def _checked_num_gpus(num_gpus: Optional[int]) -> int:
  """`num_gpus`, or every visible GPU for `None`, checked against the visible GPUs."""
  visible = len(tf.config.list_logical_devices("GPU"))
  if num_gpus is None:
    return visible
  if num_gpus < 0:
    raise ValueError(f"num_gpus must be >= 0, got {num_gpus}.")
  if num_gpus > visible:
    raise ValueError(f"num_gpus={num_gpus} but only {visible} GPU(s) are visible: lower "
                     "num_gpus, or check CUDA_VISIBLE_DEVICES and the GPU drivers.")
  return num_gpus


# The cluster of a multi-worker strategy or a TPU is set up once per program, before
# TensorFlow runs anything (listing devices included): a program creates it first, and later
# calls get the same strategy.
@functools.lru_cache(maxsize=None)
def _multi_worker_strategy() -> tf.distribute.MultiWorkerMirroredStrategy:
  return distribute_utils.get_distribution_strategy("multi_worker_mirrored")


@functools.lru_cache(maxsize=None)
def _tpu_strategy(tpu: str) -> tf.distribute.TPUStrategy:
  """The Model Garden's `TPUStrategy` on the TPU at `tpu`, or a `TPUNotFoundError`."""
  try:
    return distribute_utils.get_distribution_strategy("tpu", tpu_address=tpu)
  # Without a TPU each step fails its own way (ValueError or URLError from the resolver, an
  # OpError such as `NotFoundError: TPUs not found in the cluster` from the connection or the
  # initialisation); all of them mean the same thing to the user.
  except Exception as e:  # pylint: disable=broad-except
    # The first line of the cause is enough here; the whole of it stays chained.
    cause = str(e).strip().split("\n", 1)[0]
    raise TPUNotFoundError(
        f"No TPU was found at tpu={tpu!r}. To train without a TPU, leave tpu unset and pass "
        "strategy='mirrored' or strategy='default'. "
        f"[{type(e).__name__}: {cause}]") from e

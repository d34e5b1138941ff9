"""The CPU's matrix-multiply rate for the shapes of a BERT step, in TensorFlow or PyTorch.

The roofline of a training step (bench/roofline.py) is the rate the framework's own matmul
reaches on the shapes the step multiplies: the four attention projections and the two
feed-forward ones over every token, and the per-head score and context products. This module
defines those shapes once, counts a step's FLOPs from them and times them in either framework,
so the rate and the FLOP count of a step come from the same list. It imports neither framework
at the top: bench/roofline.py runs it in the project's Python (`--framework=tensorflow`) and in
the PyTorch peers' venv (`--framework=torch`), where it prints one JSON line:

  ~/.cache/adapterhub-peer/venv/bin/python bench/matmul_rate.py --framework=torch
"""

import argparse
import dataclasses
import json
import os
import statistics
import time
from typing import Dict, List

FRAMEWORKS = ("tensorflow", "torch")


@dataclasses.dataclass(frozen=True)
class Shape:
  """A BERT encoder's dimensions and the batch it runs on."""
  layers: int = 6
  hidden: int = 384
  heads: int = 12
  intermediate: int = 1536
  batch_size: int = 32
  seq_length: int = 128


@dataclasses.dataclass(frozen=True)
class Matmul:
  """`count` products per layer of a [batch, m, k] by [batch, k, n] matrix."""
  name: str
  batch: int
  m: int
  k: int
  n: int
  count: int

  @property
  def flops(self) -> int:
    """Multiply-adds counted as two FLOPs, for one product."""
    return 2 * self.batch * self.m * self.k * self.n


def layer_matmuls(shape: Shape) -> List[Matmul]:
  """The matrix products of one Transformer layer's forward pass."""
  tokens = shape.batch_size * shape.seq_length
  head_size = shape.hidden // shape.heads
  per_head = shape.batch_size * shape.heads
  return [
      Matmul("projection", 1, tokens, shape.hidden, shape.hidden, 4),  # query, key, value, out
      Matmul("feedforward_in", 1, tokens, shape.hidden, shape.intermediate, 1),
      Matmul("feedforward_out", 1, tokens, shape.intermediate, shape.hidden, 1),
      Matmul("attention", per_head, shape.seq_length, head_size, shape.seq_length, 2),
  ]


def forward_flops(shape: Shape) -> int:
  """The encoder's matmul FLOPs for one forward pass (embeddings, softmax, GELU and LayerNorm
  are not matmuls and are left out: they are what the roofline attributes the rest to)."""
  return shape.layers * sum(m.flops * m.count for m in layer_matmuls(shape))


STEPS = ("adapter_step", "lora_step", "full_step", "inference_plain", "inference_adapters")


def step_flops(what: str, shape: Shape, *, adapter_size: int, lora_rank: int) -> int:
  """The matmul FLOPs of one of `STEPS` (see bench/roofline.py for what each trains).

  F is `forward_flops`; A the adapters' (two per layer, each projecting down and up) or
  LoRA's (on query and value: A, then B). A training step runs the forward pass, activation
  gradients as far down as something trains (the frozen kernels get no weight gradients) and
  the trained weights' gradients: with the LayerNorms trained that is down to the embeddings
  (2 F + 3 A); LoRA leaves them frozen, so the first layer's input gradients through its
  query, key and value projections are not needed; full fine-tuning takes 3 F.
  """
  tokens = shape.batch_size * shape.seq_length
  forward = forward_flops(shape)
  adapters = shape.layers * 2 * 2 * (2 * tokens * shape.hidden * adapter_size)
  lora = shape.layers * 2 * 2 * (2 * tokens * shape.hidden * lora_rank)
  first_input_gradients = 3 * 2 * tokens * shape.hidden * shape.hidden
  return dict(adapter_step=2 * forward + 3 * adapters,
              lora_step=2 * forward + 3 * lora - first_input_gradients,
              full_step=3 * forward, inference_plain=forward,
              inference_adapters=forward + adapters)[what]


def _tensorflow_timer(matmul: Matmul):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  a = tf.random.normal([matmul.batch, matmul.m, matmul.k])
  b = tf.random.normal([matmul.batch, matmul.k, matmul.n])
  product = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)[:, :1, :1]))
  return lambda: product().numpy()


def _torch_timer(matmul: Matmul):
  import torch  # pylint: disable=g-import-not-at-top

  torch.set_num_threads(os.cpu_count())
  a = torch.randn(matmul.batch, matmul.m, matmul.k)
  b = torch.randn(matmul.batch, matmul.k, matmul.n)
  return lambda: torch.matmul(a, b)[:, :1, :1].sum().item()


def measure(framework: str, shape: Shape, *, rounds: int = 5, warmup: int = 2) -> Dict:
  """Times every product of `layer_matmuls(shape)` in turns; returns each one's GFLOP/s and
  the step mix's rate: its FLOPs (each product weighted by its count) over its time."""
  timers = {m.name: (_tensorflow_timer if framework == "tensorflow" else _torch_timer)(m)
            for m in layer_matmuls(shape)}
  for timer in timers.values():
    for _ in range(warmup):
      timer()
  seconds = {name: [] for name in timers}
  for _ in range(rounds):
    for name, timer in timers.items():
      start = time.perf_counter()
      timer()
      seconds[name].append(time.perf_counter() - start)
  median = {name: statistics.median(values) for name, values in seconds.items()}
  matmuls = layer_matmuls(shape)
  mix_flops = sum(m.flops * m.count for m in matmuls)
  mix_seconds = sum(median[m.name] * m.count for m in matmuls)
  return dict(framework=framework, shape=dataclasses.asdict(shape), rounds=rounds,
              by_product={m.name: dict(gflop=m.flops / 1e9, ms=1e3 * median[m.name],
                                       gflops_per_s=m.flops / median[m.name] / 1e9)
                          for m in matmuls},
              gflops_per_s=mix_flops / mix_seconds / 1e9)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--framework", choices=FRAMEWORKS, default="torch")
  parser.add_argument("--rounds", type=int, default=5)
  for field in dataclasses.fields(Shape):
    parser.add_argument(f"--{field.name}", type=int, default=field.default)
  args = parser.parse_args()
  shape = Shape(**{field.name: getattr(args, field.name) for field in dataclasses.fields(Shape)})
  print(json.dumps(measure(args.framework, shape, rounds=args.rounds)), flush=True)


if __name__ == "__main__":
  main()

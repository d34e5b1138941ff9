"""A fast run of bench/hub_parity.py on one Model Garden variant."""

import json
import os
import subprocess

from keras_adapters.utils import warm_python

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub_parity.py")


def test_reports_parity_of_a_genuine_export(tmp_path):
  output = tmp_path / "hub_parity.json"
  process = subprocess.run(
      warm_python.command(_SCRIPT, "--encoders=legacy_relu_embedding_width", f"--output={output}"),
      capture_output=True, text=True, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  record = json.loads(output.read_text())
  assert record["provenance"]["command"]
  row = record["encoders"]["legacy_relu_embedding_width"]
  assert row["activation"] == "relu"
  assert max(row["real_tokens"], row["padded_positions"], row["pooled_output"]) < 1e-5
  assert row["largest_output"] > 1.0
  assert record["variants_max"] == max(row["real_tokens"], row["padded_positions"],
                                       row["pooled_output"])
  assert "| legacy_relu_embedding_width | relu |" in process.stdout

"""Fast test of bench/dropout_masks.py on the tiny test encoder: no timing, only what it runs,
compares and records."""

from keras_adapters.hub import testing
from keras_adapters.utils import provenance

import script_runs

_SCRIPT = "dropout_masks.py"


def test_tiny_run_times_both_masks_and_each_step_and_records_their_ratios(tmp_path):
  record, process = script_runs.record(
      _SCRIPT, tmp_path / "dropout_masks.json", f"--hub_handle={testing.tiny_hub_handle()}",
      "--setups=adapters", "--steps=2", "--warmup_steps=0", "--batch_size=2", "--seq_length=8")
  heads = testing.TINY_CONFIG["num_attention_heads"]
  assert record["settings"]["mask_shape"] == [2, heads, 8, 8]
  assert set(record["timings"]) == {"masks/ours", "masks/tensorflow",
                                    "step/adapters/ours", "step/adapters/tensorflow"}
  for timing in record["timings"].values():
    assert len(timing["times_ms"]) == 2 and timing["median_ms"] > 0
  for kind, ratio in record["ours_over_tensorflow"].items():
    assert ratio == (record["timings"][f"{kind}/ours"]["median_ms"]
                     / record["timings"][f"{kind}/tensorflow"]["median_ms"])
  assert set(record["ours_over_tensorflow"]) == {"masks", "step/adapters"}
  # Each step drew the encoder's masks as it was meant to; the other only as TensorFlow's
  # dropout draws them (the classifier head's Keras dropout draws `RandomUniform` in both).
  ours, tensorflows = (record["random_ops"][f"step/adapters/{name}"]
                       for name in ("ours", "tensorflow"))
  assert "StatelessRandomUniformFullIntV2" in ours
  assert tensorflows == ["RandomUniform"]
  assert provenance.KEY in record
  assert "| step/adapters |" in process.stdout


def test_an_unknown_setup_is_refused_in_one_line(tmp_path):
  script_runs.assert_refused_in_one_line(
      _SCRIPT, "--setups: 'adapter' is not a setup; choose from adapters,",
      tmp_path / "dropout_masks.json", "--setups=adapter")

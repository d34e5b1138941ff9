"""Flags shared by the experiment scripts; each names a `RunConfig` field."""

import json
import math

from absl import flags

# Before TensorFlow loads (see cli).
from experiments import cli  # pylint: disable=unused-import
from keras_adapters.models import classifier
from keras_adapters.models import tuning
from keras_adapters.training import distribution
from keras_adapters.training import optimization
from keras_adapters.tasks import classification
from keras_adapters.utils import errors
from keras_adapters.utils import precision


def define_run_flags(learning_rate=3e-4, epochs=3.0):
  """Defines the model, optimisation and distribution flags of `classification.RunConfig`."""
  flags.DEFINE_string("hub_handle", None,
                      "TF Hub BERT encoder handle or local path; default: the embedded "
                      "all-MiniLM-L6-v2 (keras_adapters.default_hub_handle()).")
  flags.DEFINE_string("preprocess_handle", None,
                      "Matching TF Hub preprocessing handle; default: the embedded one.")
  flags.DEFINE_enum("tuning", "adapters", list(tuning.TUNING_POLICIES),
                    "What trains: adapters (+LayerNorms, the paper), layer_norm, top_k, full.")
  flags.DEFINE_integer("top_k", None, "Top layers to train with --tuning=top_k.")
  flags.DEFINE_integer("adapter_size", 64, "Adapter bottleneck size m.")
  flags.DEFINE_float("adapter_init_stddev", 1e-2,
                     "Std of the adapters' initial weights; 0 makes every adapter an exact "
                     "identity.")
  flags.DEFINE_string(
      "adapter_config", None,
      "Further AdapterConfig fields as a JSON object, with AdapterHub's names: placement "
      "(mh_adapter, output_adapter, is_parallel), residual and LayerNorm options "
      "(original_ln_before, original_ln_after, residual_before_ln, adapter_residual_before_ln, "
      "ln_before, ln_after), scaling, activation, reduction_factor, leave_out. E.g. "
      "AdapterHub's Pfeiffer placement: "
      "'{\"mh_adapter\": false, \"original_ln_before\": true}'. The fields with flags of "
      "their own (--adapter_size, --adapter_init_stddev, --tuning, --top_k) stay there.")
  flags.DEFINE_enum("pooling", "mean", list(classifier.POOLINGS),
                    "Head input: mean (mean of the sequence output, what the embedded "
                    "sentence-embedding encoder was trained to produce; its pooler never was) "
                    "or cls (BERT's pooled_output, the paper's head for BERT).")
  flags.DEFINE_float("learning_rate", learning_rate,
                    "Peak learning rate, reached after a linear warmup over the first 10% of "
                    "the steps, then decayed linearly to 0.")
  flags.DEFINE_float("epochs", epochs, "Training epochs (fractions allowed).")
  flags.DEFINE_integer("batch_size", 32, "Global batch size.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example after packing.")
  flags.DEFINE_integer("seed", 0, "Random seed (weights of new layers, data order).")
  flags.DEFINE_float("weight_decay", optimization.DEFAULT_WEIGHT_DECAY,
                    "Decoupled weight decay of AdamW (LayerNorm and bias excluded), BERT's "
                    "0.01 by default; 0 turns it off.")
  flags.DEFINE_integer("checkpoint_every_steps", 200, "Checkpoint interval in steps.")
  flags.DEFINE_enum("strategy", "default", list(distribution.STRATEGIES),
                    "tf.distribute strategy.")
  flags.DEFINE_string("tpu", None, "TPU name or address ('local' for a TPU VM).")
  flags.DEFINE_enum("mixed_precision", None, list(precision.PRECISIONS),
                    "Compute dtype of the Keras mixed-precision policy; variables, LayerNorms, "
                    "softmax, logits and loss stay float32. Default: bfloat16 with "
                    "--strategy=tpu, else float32.")
  flags.DEFINE_bool("jit_compile", None,
                    "XLA-compile the training and evaluation steps, with every batch padded to "
                    "--max_seq_length (static shapes). Default: on with --strategy=tpu, else "
                    "off.")


def validate_number_list(name, parse, minimum, example):
  """Makes absl refuse a list flag `--name` unless every item is a number `parse` reads (int
  or float), finite, at least `minimum` and given once; so `--seeds=abc` is a usage error."""
  def valid(values):
    try:
      numbers = [parse(value) for value in values]
    except ValueError:
      return False
    return (bool(numbers) and len(set(numbers)) == len(numbers)
            and all(math.isfinite(n) and n >= minimum for n in numbers))
  kind = "whole numbers" if parse is int else "finite numbers"
  flags.register_validator(
      name, valid, message=f"give comma-separated {kind} of at least {minimum:g}, each once, "
      f"e.g. --{name}={example}.")


def check_base(config):
  """Raises a `ValueError` naming the flag if the base cannot serve `config`: a
  `--max_seq_length` above its position embeddings, a `--preprocess_handle` that is no
  preprocessing model or makes ids beyond its vocabulary. Checked before any data is read."""
  # Imported here: reading a handle loads TensorFlow Hub.
  from keras_adapters.hub import compatibility  # pylint: disable=g-import-not-at-top
  from keras_adapters.hub import hub_encoder  # pylint: disable=g-import-not-at-top
  base = hub_encoder.read_hub_encoder(config.hub_handle)
  compatibility.check_seq_length(config.max_seq_length, base.config)
  compatibility.check_preprocessor(
      compatibility.load_preprocessor(config.preprocess_handle), base.config,
      encoder_tokenizer=base.tokenizer, handle=config.preprocess_handle)


def create_strategy():
  """The `--strategy` (and `--tpu`), created first: a multi-worker cluster or a TPU must be
  set up before anything else runs TensorFlow. The runs later get the same strategy."""
  return distribution.get_strategy(flags.FLAGS.strategy, tpu=flags.FLAGS.tpu)


def _json_object(flag, text):
  """The dict a flag's JSON text gives (`None` for no text), or a usage error naming it."""
  if text is None:
    return None
  try:
    value = json.loads(text)
  except ValueError as e:
    value = e
  if not isinstance(value, dict):
    raise errors.UsageError(
        f"--{flag}={text!r} is not a JSON object ({value}): give one in single quotes, e.g. "
        f"--{flag}='{{\"mh_adapter\": false}}'.")
  return value


def run_config_from_flags(**overrides):
  """A `RunConfig` from the flags, with the embedded default model where none is named."""
  # Imported here: resolving the default converts the base model on first use.
  from keras_adapters.hub import default_model  # pylint: disable=g-import-not-at-top
  values = flags.FLAGS
  config = dict(
      hub_handle=values.hub_handle or default_model.default_hub_handle(),
      preprocess_handle=values.preprocess_handle or default_model.default_preprocess_handle(),
      tuning=values.tuning, top_k=values.top_k, adapter_size=values.adapter_size,
      adapter_init_stddev=values.adapter_init_stddev, pooling=values.pooling,
      learning_rate=values.learning_rate,
      epochs=values.epochs, batch_size=values.batch_size, max_seq_length=values.max_seq_length,
      seed=values.seed, weight_decay=values.weight_decay,
      checkpoint_every_steps=values.checkpoint_every_steps, strategy=values.strategy,
      tpu=values.tpu, mixed_precision=values.mixed_precision,
      jit_compile=values.jit_compile, adapter_config=_json_object("adapter_config", values.adapter_config))
  config.update(overrides)
  return classification.RunConfig(**config)

"""Tiny random TF Hub BERT encoders for fast tests, exported by the Model Garden itself."""

import atexit
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
from typing import Callable, NamedTuple
from unittest import mock

import sentencepiece
import tf_keras as keras
from tf_keras.protobuf import saved_metadata_pb2

from official.legacy.bert import configs
from official.nlp.configs import encoders
from official.nlp.tools import export_tfhub_lib

from keras_adapters.hub import compatibility
from keras_adapters.hub import hub_encoder
from keras_adapters.hub import model_garden_export
from keras_adapters.hub import preprocessing
from keras_adapters.hub import proofs

# The environment variable naming the folder where `built_once` keeps the tiny exports for a
# whole test session (set by conftest.py).
SESSION_CACHE = "KERAS_ADAPTERS_TEST_CACHE"

TINY_CONFIG = dict(vocab_size=64, hidden_size=16, num_layers=2, num_attention_heads=2,
                   intermediate_size=32, max_sequence_length=32, type_vocab_size=2)


def tiny_bert_config(activation=keras.activations.gelu, **config):
  """A legacy Model Garden `BertConfig` of `TINY_CONFIG` updated by `config`.

  Args:
    activation: Its `hidden_act`; by default Keras' exact GELU, as the embedded default base
      has (the Model Garden's string "gelu" is the tanh approximation).
    **config: `AdaptedBertEncoder`-named overrides of `TINY_CONFIG`, plus `embedding_size`.
  """
  config = {**TINY_CONFIG, **config}
  return configs.BertConfig(
      vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
      num_hidden_layers=config["num_layers"],
      num_attention_heads=config["num_attention_heads"],
      intermediate_size=config["intermediate_size"],
      max_position_embeddings=config["max_sequence_length"],
      type_vocab_size=config["type_vocab_size"], hidden_act=activation,
      embedding_size=config.get("embedding_size"))


def _tiny_encoder_config(kind, **overrides):
  """An `EncoderConfig` of `type=kind` ("bert" or "bert_v2") of `TINY_CONFIG`'s sizes."""
  sizes = dict(vocab_size=TINY_CONFIG["vocab_size"], hidden_size=TINY_CONFIG["hidden_size"],
               num_layers=TINY_CONFIG["num_layers"],
               num_attention_heads=TINY_CONFIG["num_attention_heads"],
               intermediate_size=TINY_CONFIG["intermediate_size"],
               max_position_embeddings=TINY_CONFIG["max_sequence_length"],
               type_vocab_size=TINY_CONFIG["type_vocab_size"])
  return encoders.EncoderConfig(
      type=kind, **{kind: encoders.BertEncoderConfig(**{**sizes, **overrides})})


class ModelGardenVariant(NamedTuple):
  """One way the Model Garden exports a BERT: `export_encoder` arguments, the tokenizer asset
  it carries (`"wordpiece"` or `"sentencepiece"`), the activation a reader must find."""
  arguments: Callable[[], dict]
  tokenizer: str
  activation: str


# Every BERT-family variant of `export_tfhub_lib.export_model`, each feature at least once.
MODEL_GARDEN_VARIANTS = {
    "legacy_gelu_vocab": ModelGardenVariant(
        lambda: dict(bert_config=tiny_bert_config(activation="gelu")), "wordpiece",
        "gelu_approximate"),
    "legacy_exact_gelu_with_mlm": ModelGardenVariant(
        lambda: dict(bert_config=tiny_bert_config(), with_mlm=True), "wordpiece", "gelu"),
    "legacy_relu_embedding_width": ModelGardenVariant(
        lambda: dict(bert_config=tiny_bert_config(activation="relu", embedding_size=8)),
        "wordpiece", "relu"),
    "bert_sentencepiece_copy_pooler": ModelGardenVariant(
        lambda: dict(encoder_config=_tiny_encoder_config("bert"),
                     copy_pooler_dense_to_encoder=True),
        "sentencepiece", "gelu_approximate"),
    "bert_with_mlm": ModelGardenVariant(
        lambda: dict(encoder_config=_tiny_encoder_config("bert"), with_mlm=True),
        "wordpiece", "gelu_approximate"),
    "bert_v2_embedding_width_with_mlm": ModelGardenVariant(
        lambda: dict(encoder_config=_tiny_encoder_config("bert_v2", embedding_size=8),
                     with_mlm=True),
        "wordpiece", "gelu_approximate"),
    "bert_v2_sentencepiece_relu": ModelGardenVariant(
        lambda: dict(encoder_config=_tiny_encoder_config("bert_v2", hidden_activation="relu")),
        "sentencepiece", "relu"),
}


def export_model_garden_variant(name, root, seed=3):
  """Writes `MODEL_GARDEN_VARIANTS[name]` with random weights into `root/name`, its vocab or
  SentencePiece model beside it; returns `root/name`.

  The variant is exported once per process and arguments (about 10 CPU seconds each); each
  call writes a copy of that export, the caller's to change.
  """
  shutil.copytree(os.path.dirname(_model_garden_variant(name, seed)), root, dirs_exist_ok=True)
  return os.path.join(root, name)


@functools.lru_cache(maxsize=None)
def _model_garden_variant(name, seed):
  """`MODEL_GARDEN_VARIANTS[name]` with random weights, exported once per test session (or
  process) and arguments (about 10 CPU seconds each); nothing may write to it."""
  variant = MODEL_GARDEN_VARIANTS[name]

  def build(root):
    assets = (dict(vocab_file=save_tiny_vocab(os.path.join(root, "vocab.txt")),
                   do_lower_case=True) if variant.tokenizer == "wordpiece"
              else dict(sp_model_file=save_tiny_sentencepiece(root)))
    return model_garden_export.export_encoder(
        os.path.join(root, name), seed=seed, **variant.arguments(), **assets)
  return built_once(("model_garden_variant", name, seed), build)


def save_tiny_hub_encoder(export_dir, seed=0, random_stddev=None, **config):
  """Writes a random tiny BERT encoder exported by the Model Garden's TF Hub exporter into
  `export_dir`; returns its path.

  The export is a copy of `tiny_hub_encoder`'s of the same arguments, the caller's to change.

  Args:
    export_dir: Folder to write.
    seed: Seed of the random weights.
    random_stddev: Their standard deviation; `None`: `export_encoder`'s. Deep, wide shapes
      need BERT's 0.02, or their outputs saturate.
    **config: Arguments of `tiny_bert_config`.
  """
  shutil.copytree(tiny_hub_encoder(seed=seed, random_stddev=random_stddev, **config),
                  export_dir, dirs_exist_ok=True)
  return export_dir


def tiny_hub_encoder(seed=0, random_stddev=None, **config):
  """A random tiny BERT encoder (arguments as `save_tiny_hub_encoder`'s) exported once per
  process and arguments, about 10 CPU seconds each; nothing may write to it.

  It carries the tiny vocab (`save_tiny_vocab`) and `do_lower_case=True`, as TF Hub BERTs
  carry theirs, so `tiny_preprocess_handle()` belongs to it.
  """
  # One key for every spelling of the same arguments (defaults given or not).
  return _exported_tiny_hub_encoder(seed, random_stddev,
                                    tuple(sorted({**TINY_CONFIG, **config}.items())))


@functools.lru_cache(maxsize=None)
def _exported_tiny_hub_encoder(seed, random_stddev, config):
  spread = {} if random_stddev is None else dict(random_stddev=random_stddev)

  def build(root):
    return model_garden_export.export_encoder(
        os.path.join(root, "encoder"), bert_config=tiny_bert_config(**dict(config)),
        seed=seed, vocab_file=save_tiny_vocab(os.path.join(root, "vocab.txt")),
        do_lower_case=True, **spread)
  return built_once(("tiny_hub_encoder", seed, random_stddev, config), build)


def _words(vocab_size):
  """The words of a tiny vocab of `vocab_size` entries after its four special tokens."""
  return tuple(f"w{i}" for i in range(vocab_size - 4))


TINY_WORDS = _words(TINY_CONFIG["vocab_size"])


def save_tiny_vocab(path, vocab_size=TINY_CONFIG["vocab_size"]):
  """Writes a wordpiece vocab of `vocab_size` entries (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`,
  then the words `w0`, `w1`, ...; by default the size that fits `TINY_CONFIG`) and returns
  its path."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(("[PAD]", "[UNK]", "[CLS]", "[SEP]") + _words(vocab_size)) + "\n")
  return path


def save_tiny_sentencepiece(directory, words=TINY_WORDS[:40]):
  """Trains a SentencePiece word model on `words`, as the Model Garden's own tests make one
  (`<pad>`, `<unk>`, `[CLS]`, `[SEP]`, the words in their order, `<s>`, `</s>`: 46 ids for the
  default 40 words, all within `TINY_CONFIG`'s vocab); returns the `.model` path."""
  prefix = os.path.join(directory, "tiny_sp")
  with open(prefix + ".txt", "w", encoding="utf-8") as f:
    # Earlier words more often: SentencePiece orders its vocabulary by frequency.
    f.write("\n".join(" ".join([word] * (len(words) - i)) for i, word in enumerate(words)))
  size = len(words) + 6
  sentencepiece.SentencePieceTrainer.Train(
      input=prefix + ".txt", model_prefix=prefix, model_type="word", vocab_size=size,
      pad_id=0, unk_id=1, bos_id=size - 2, eos_id=size - 1,
      control_symbols="[CLS],[SEP]", minloglevel=2)
  return prefix + ".model"


def replace_in_layer_configs(export_dir, old, new):
  """Rewrites a Keras SavedModel's layer configs (`keras_metadata.pb`) with `old` replaced by
  `new` in each: an export whose recorded facts no longer describe its graph."""
  path = os.path.join(export_dir, "keras_metadata.pb")
  metadata = saved_metadata_pb2.SavedMetadata()
  with open(path, "rb") as f:
    metadata.ParseFromString(f.read())
  for node in metadata.nodes:
    node.metadata = node.metadata.replace(old, new)
  with open(path, "wb") as f:
    f.write(metadata.SerializeToString())


@contextlib.contextmanager
def unproven():
  """Within it, a base read is proven as on a machine that never read it: the reads this
  process keeps are forgotten, and the folder of proofs (`proofs.SETTING`) is a new empty
  one."""
  folder = tempfile.mkdtemp(prefix="proofs_")
  try:
    with mock.patch.dict(os.environ, {proofs.SETTING: folder}):
      hub_encoder.clear_cache()
      yield
  finally:
    shutil.rmtree(folder, ignore_errors=True)


def built_once(key, build):
  """What `build(root)` returns: a path below the new folder `root` it writes. Built once per
  test session and `key` (a tuple of plain values) in the folder `SESSION_CACHE` names, when
  set, for every process of the session; else in a folder of this process, removed at exit.

  The tests' processes (the pytest workers and the scripts they start) need the same tiny
  exports, about 10 CPU seconds each: building each once saves minutes of the suite. Nothing
  may write to what it returns.
  """
  cache = os.environ.get(SESSION_CACHE)
  key_text = repr(key)
  if not cache or " at 0x" in key_text:  # An object's address names it in this process only.
    root = tempfile.mkdtemp(prefix=f"{key[0]}_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return build(root)
  folder = os.path.join(cache, f"{key[0]}_{hashlib.sha256(key_text.encode()).hexdigest()[:16]}")
  with open(folder + ".lock", "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # One process builds; the others wait, then read.
    if not os.path.exists(folder + ".path"):
      partial = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".partial-", dir=cache)
      relative = os.path.relpath(build(partial), partial)
      shutil.rmtree(folder, ignore_errors=True)  # Left by a process killed before `.path`.
      os.rename(partial, folder)
      with open(folder + ".path", "w", encoding="utf-8") as f:
        f.write(relative)
  with open(folder + ".path", encoding="utf-8") as f:
    return os.path.normpath(os.path.join(folder, f.read()))


def tiny_hub_handle(seed=0):
  """`tiny_hub_encoder(seed)`: the tiny Hub encoder of `TINY_CONFIG`, saved once per process
  and seed; nothing writes to it."""
  return tiny_hub_encoder(seed=seed)


@functools.lru_cache(maxsize=None)
def tiny_preprocess_handle(seq_length=16, lower_case=True, vocab_size=TINY_CONFIG["vocab_size"]):
  """A TF Hub-format preprocessing SavedModel for the tiny vocab, built once per test session
  (or process); `lower_case=False`: a cased one, which the tiny encoders' preprocessing is
  not; a larger `vocab_size`: one of more wordpieces than the tiny encoders embed."""
  return built_once(("tiny_preprocess", seq_length, lower_case, vocab_size), lambda root: (
      preprocessing.build_preprocessing_savedmodel(
          save_tiny_vocab(os.path.join(root, "vocab.txt"), vocab_size),
          os.path.join(root, "preprocess"), default_seq_length=seq_length,
          lower_case=lower_case)))


@functools.lru_cache(maxsize=None)
def tiny_sentencepiece_handles(seq_length=16):
  """(encoder, preprocessing model) handles of a tiny BERT with a SentencePiece model, both
  exported by the Model Garden (`export_model`, `export_preprocessing`) once per test session
  (or process)."""
  def build(root):
    sp_model = save_tiny_sentencepiece(root)
    model_garden_export.export_encoder(
        os.path.join(root, "encoder"), bert_config=tiny_bert_config(), sp_model_file=sp_model)
    # SentencePiece tokenizers have no offsets, so the Model Garden exports them without.
    export_tfhub_lib.export_preprocessing(
        os.path.join(root, "preprocess"), sp_model_file=sp_model, do_lower_case=True,
        tokenize_with_offsets=False, default_seq_length=seq_length,
        experimental_disable_assert=True)
    return root
  root = built_once(("tiny_sentencepiece", seq_length), build)
  return os.path.join(root, "encoder"), os.path.join(root, "preprocess")


@functools.lru_cache(maxsize=None)
def tiny_preprocessor(seq_length=16):
  """`tiny_preprocess_handle(seq_length)`, loaded once per process: by the library's loader,
  whose own copy (`compatibility.load_preprocessor`) the code under test then reuses."""
  return compatibility.load_preprocessor(tiny_preprocess_handle(seq_length))


def folder_digest(path):
  """SHA-256 over the relative paths and bytes of every file below `path`."""
  digest = hashlib.sha256()
  for root, dirs, files in os.walk(path):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(root, name)
      digest.update(os.path.relpath(full, path).encode())
      with open(full, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


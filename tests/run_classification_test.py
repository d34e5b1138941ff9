"""End-to-end tests of the `experiments/run_classification.py` command line.

Every run parses a real command line (`flags.FLAGS(argv)` inside `flagsaver`, which restores
the flags afterwards) and calls `main`. The model is the tiny random encoder of
`keras_adapters.hub.testing`, the data a small CSV written here; every path a run may write
(`--model_dir`, `--results_dir`, `--split_manifest`, exports) is in a temporary folder.
"""

import json
import os
import shutil

from absl import app
from absl import flags
from absl.testing import flagsaver
import numpy as np
import tensorflow as tf

from experiments import run_classification
from experiments import testing as cli_testing
from keras_adapters.hub import testing
from keras_adapters.data import splits as splits_lib
from keras_adapters.analysis import method_comparison

FLAGS = flags.FLAGS
_SEQ_LENGTH = 16
_LABELS = ("bad", "good", "meh")
# Class c uses only words of group c, so the label is learnable from real tokens.
_GROUPS = [testing.TINY_WORDS[i * 20:(i + 1) * 20] for i in range(3)]


def _rows(count=30, seed=0):
  """`count` (text, label) rows, classes taking turns: 10 of each class for 30 rows."""
  rng = np.random.default_rng(seed)
  return [(" ".join(rng.choice(_GROUPS[i % 3], size=4)), _LABELS[i % 3])
          for i in range(count)]


def _write_csv(path, rows, header=("review", "sentiment")):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(",".join(header) + "\n")
    for text, label in rows:
      f.write(f"{text},{label}\n")
  return path


class RunClassificationTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.path.join(tf.compat.v1.test.get_temp_dir(), "run_classification_test")
    shutil.rmtree(cls.root, ignore_errors=True)
    os.makedirs(cls.root)
    cls.hub_handle = testing.tiny_hub_handle()
    cls.preprocess_handle = testing.tiny_preprocess_handle(_SEQ_LENGTH)
    cls.data_path = _write_csv(os.path.join(cls.root, "reviews.csv"), _rows())
    # One successful single-method run, shared by the tests below.
    cls.model_dir = os.path.join(cls.root, "run")
    cls.manifest = os.path.join(cls.root, "manifests", "reviews.json")
    cls.output = cls._main(cls._argv(cls.model_dir, cls.manifest))

  @classmethod
  def _argv(cls, model_dir, manifest, data_path=None, **extra):
    """A command line with the tiny model and every output inside the test's folders."""
    values = dict(
        data_path=data_path or cls.data_path, text_column="review",
        label_column="sentiment", hub_handle=cls.hub_handle,
        preprocess_handle=cls.preprocess_handle, split_manifest=manifest,
        model_dir=model_dir, results_dir=os.path.join(model_dir, "results"),
        max_train_examples="0", epochs="1", batch_size="8", max_seq_length=str(_SEQ_LENGTH),
        adapter_size="4", learning_rate="0.01")
    values.update(extra)
    # `None`: a flag left out (--adapter_size with a method without adapters is refused).
    return ["run_classification"] + [f"--{k}={v}" for k, v in values.items() if v is not None]

  @staticmethod
  def _main(argv):
    """Parses `argv` like the command line and runs main; returns what it printed."""
    return cli_testing.run_main(run_classification.main, argv)

  def _new_dir(self):
    return self.create_tempdir().full_path

  def test_csv_run_trains_reports_and_exports(self):
    """A CSV run trains on the named columns, prints the split sizes and test accuracy, and
    writes results.json and the export (a SavedModel serving strings under the text
    column's name, the adapters)."""
    self.assertIn("reviews: train 24, validation 3, test 3 examples; classes "
                  "['bad', 'good', 'meh']", self.output)
    self.assertRegex(self.output, r"\ntest: accuracy \d+\.\d\d%")
    self.assertRegex(self.output, r"\nvalidation: accuracy \d+\.\d\d%")
    self.assertRegex(self.output, r"Trained [\d,]+ parameters \(\d+\.\d\d% of the base\)")
    with open(os.path.join(self.model_dir, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    self.assertEqual(results["task"], "reviews")
    self.assertEqual(results["train_examples"], 24)
    self.assertEqual(
        {k: results["config"][k] for k in ("hub_handle", "tuning", "adapter_size", "epochs",
                                          "batch_size", "max_seq_length", "learning_rate")},
        dict(hub_handle=self.hub_handle, tuning="adapters", adapter_size=4, epochs=1.0,
             batch_size=8, max_seq_length=_SEQ_LENGTH, learning_rate=0.01))
    self.assertIn(f"{results['metrics']['test']['accuracy'] * 100:.2f}%", self.output)
    export_dir = os.path.join(self.model_dir, "export")
    self.assertEqual(results["export_dir"], export_dir)
    served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](review=tf.constant(["w1 w2 w3", "w45 w50"]))["probabilities"]
    self.assertEqual(served.shape, (2, 3))
    self.assertAllClose(tf.reduce_sum(served, axis=1), [1.0, 1.0], atol=1e-6)
    with open(os.path.join(export_dir, "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      metadata = json.load(f)["metadata"]
    self.assertEqual((metadata["task"], metadata["label_names"], metadata["text_fields"]),
                     ("reviews", list(_LABELS), ["review"]))

  def test_split_manifest_is_written_and_reused(self):
    """The first run records a stratified split at --split_manifest; a second run with
    the same manifest leaves it byte for byte unchanged and trains on the recorded split."""
    manifest = splits_lib.load_split_manifest(self.manifest)
    self.assertEqual({k: len(v) for k, v in manifest.ids.items()},
                     dict(train=24, validation=3, test=3))
    self.assertEqual(manifest.class_counts["test"], dict(bad=1, good=1, meh=1))
    self.assertEqual(manifest.label_names, _LABELS)
    digest = testing.folder_digest(self.manifest)
    model_dir = os.path.join(self._new_dir(), "second")
    output = self._main(self._argv(model_dir, self.manifest))
    self.assertIn("train 24, validation 3, test 3", output)
    self.assertEqual(testing.folder_digest(self.manifest), digest)
    self.assertFalse(os.path.exists(os.path.join(model_dir, "split.json")))
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["train_examples"], 24)

  def test_split_comes_from_the_manifest(self):
    """The split is read from the manifest, not re-drawn: swapping a train and a test id of
    one class in the manifest moves exactly those examples."""
    with open(self.manifest, encoding="utf-8") as f:
      record = json.load(f)
    test_id = record["ids"]["test"][0]
    label = _LABELS[(int(test_id) - 1) % 3]  # Row r (1-based) has class (r - 1) % 3.
    train_id = next(i for i in record["ids"]["train"] if _LABELS[(int(i) - 1) % 3] == label)
    record["ids"]["test"][0] = train_id
    record["ids"]["train"][record["ids"]["train"].index(train_id)] = test_id
    edited = os.path.join(self._new_dir(), "edited.json")
    with open(edited, "w", encoding="utf-8") as f:
      json.dump(record, f)
    with flagsaver.flagsaver():
      FLAGS(self._argv(self._new_dir(), edited))
      _, splits = run_classification.load_splits()
    self.assertEqual(list(splits["test"].ids), record["ids"]["test"])
    self.assertEqual(list(splits["train"].ids), record["ids"]["train"])
    self.assertIn(train_id, splits["test"].ids)

  def test_default_manifest_goes_into_model_dir(self):
    """Without --split_manifest, a --data_path run records its split in --model_dir, never
    in the package's keras_adapters/cli/splits."""
    model_dir = self._new_dir()
    argv = [a for a in self._argv(model_dir, "unused") if not a.startswith("--split_manifest")]
    with flagsaver.flagsaver():
      FLAGS(argv)
      self.assertIsNone(FLAGS.split_manifest)
      run_classification.load_splits()
    self.assertTrue(os.path.isfile(os.path.join(model_dir, "split.json")))

  def test_method_comparison(self):
    """--methods with --seeds trains every method with every seed in its own folder and
    writes comparison.json and comparison.md to --results_dir, 2 rows of 2 seeds."""
    root = self._new_dir()
    results_dir = os.path.join(root, "tables")
    output = self._main(self._argv(os.path.join(root, "runs"), self.manifest,
                                   methods="adapters,layer_norm", seeds="0,1",
                                   results_dir=results_dir))
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      summary = json.load(f)
    self.assertEqual((summary["task"], summary["metric"], summary["eval_split"]),
                     ("reviews", "accuracy", "test"))
    self.assertEqual((summary["train_examples"], summary["eval_examples"]), (24, 3))
    self.assertEqual([row["method"] for row in summary["rows"]], ["adapters", "layer_norm"])
    for row in summary["rows"]:
      self.assertEqual(row["seeds"], [0, 1])
      self.assertLen(row["scores"], 2)
      for score in row["scores"]:
        self.assertBetween(score, 0.0, 100.0)
      self.assertAllClose(row["mean"], np.mean(row["scores"]))
    self.assertEqual(summary["rows"][1]["config"]["tuning"], "layer_norm")
    self.assertEqual(sorted(os.listdir(os.path.join(root, "runs"))),
                     ["adapters-seed0", "adapters-seed1", "layer_norm-seed0",
                      "layer_norm-seed1"])
    with open(os.path.join(results_dir, "comparison.md"), encoding="utf-8") as f:
      table = f.read()
    self.assertIn("| adapters | 2 |", table)
    self.assertIn("| layer_norm | 2 |", table)
    self.assertIn(table, output)
    self.assertIn(f"Written: {results_dir}/comparison.json", output)

  def test_lora_and_ia3_train_score_and_export(self):
    """--method=lora trains LoRA (its settings by --lora_* flags) and exports a SavedModel
    serving strings with LoRA merged into the kernels; --methods=ia3 adds an (IA)³ row."""
    root = self._new_dir()
    model_dir = os.path.join(root, "lora")
    output = self._main(self._argv(model_dir, self.manifest, method="lora", lora_r="2",
                                   lora_target_modules="query,value,output",
                                   adapter_size=None))
    self.assertRegex(output, r"\ntest: accuracy \d+\.\d\d%")
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
      config = json.load(f)["config"]
    self.assertEqual((config["method"], config["lora_r"], config["lora_target_modules"]),
                     ("lora", 2, ["query", "value", "output"]))
    export_dir = os.path.join(model_dir, "export")
    served = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures[
        "serving_default"](review=tf.constant(["w1 w2 w3"]))["probabilities"]
    self.assertAllClose(tf.reduce_sum(served, axis=1), [1.0], atol=1e-6)
    with open(os.path.join(export_dir, "adapters", "adapter_config.json"),
              encoding="utf-8") as f:
      self.assertEqual(json.load(f)["adapter_config"]["method"], "lora")
    results_dir = os.path.join(root, "tables")
    self._main(self._argv(os.path.join(root, "runs"), self.manifest, methods="ia3",
                          seeds="0", results_dir=results_dir, adapter_size=None))
    with open(os.path.join(results_dir, "comparison.json"), encoding="utf-8") as f:
      row, = json.load(f)["rows"]
    self.assertEqual((row["method"], row["config"]["method"], row["config"]["learning_rate"]),
                     ("ia3", "ia3", method_comparison.METHODS["ia3"]["learning_rate"]))

  def test_own_data_named_like_a_task_never_touches_its_committed_table(self):
    """The issue's case: `--data_path=<my own>/airline.csv --methods=adapters --seeds=0`
    would write into results/airline/ (the file's stem). Refused before any run trains,
    naming results_dir; the committed table stays byte for byte."""
    cwd = self._new_dir()
    committed = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "results", "airline", "comparison.json")
    table = os.path.join(cwd, "results", "airline", "comparison.json")
    os.makedirs(os.path.dirname(table))
    shutil.copyfile(committed, table)
    data_path = _write_csv(os.path.join(self._new_dir(), "airline.csv"), _rows())
    argv = self._argv(os.path.join(cwd, "runs"), os.path.join(cwd, "split.json"),
                      data_path=data_path, methods="adapters", seeds="0")
    argv.remove(next(arg for arg in argv if arg.startswith("--results_dir=")))
    previous = os.getcwd()
    os.chdir(cwd)
    try:
      with self.assertRaisesRegex(method_comparison.ResultsTableError,
                                  r"results/airline/comparison.json holds results of other "
                                  r"data or another budget \(.*eval_examples=1463 there, 3 now"
                                  r".*results_dir="):
        self._main(argv)
    finally:
      os.chdir(previous)
    self.assertFalse(os.path.exists(os.path.join(cwd, "runs", "adapters-seed0")))
    with open(committed, "rb") as original, open(table, "rb") as copy:
      self.assertEqual(copy.read(), original.read())

  def test_missing_file(self):
    """A --data_path that does not exist is a FileNotFoundError naming it."""
    missing = os.path.join(self._new_dir(), "nope.csv")
    with self.assertRaisesRegex(FileNotFoundError, "nope.csv does not exist"):
      self._main(self._argv(self._new_dir(), self._manifest(), data_path=missing))

  def test_missing_column(self):
    """A --text_column the file lacks is a ValueError naming the flag and the columns."""
    with self.assertRaisesRegex(
        ValueError, r"no column 'text' \(text_column\); the columns are "
        r"\['review', 'sentiment'\]"):
      self._main(self._argv(self._new_dir(), self._manifest(), text_column="text"))
    with self.assertRaisesRegex(ValueError, r"no column 'label' \(label_column\)"):
      self._main(self._argv(self._new_dir(), self._manifest(), label_column="label"))

  def test_empty_text(self):
    """An empty text is a ValueError naming the file and row."""
    rows = _rows()
    rows[4] = ("  ", rows[4][1])
    path = _write_csv(os.path.join(self._new_dir(), "holes.csv"), rows)
    with self.assertRaisesRegex(ValueError, r"holes.csv, row 5 \(line 6\): the text is empty"):
      self._main(self._argv(self._new_dir(), self._manifest(), data_path=path))

  def test_non_utf8_bytes_suggest_the_encoding(self):
    """Latin-1 bytes in a UTF-8 read are a ValueError naming line and bytes and suggesting
    an encoding; --encoding=latin-1 then reads the file."""
    path = os.path.join(self._new_dir(), "latin.csv")
    rows = _rows()
    with open(path, "wb") as f:
      f.write(b"review,sentiment\n")
      for i, (text, label) in enumerate(rows):
        f.write(f"{text}{' café' if i == 2 else ''},{label}\n".encode("latin-1"))
    with self.assertRaisesRegex(
        ValueError, r"latin.csv, line 4: bytes b'\\xe9' are not valid utf-8.*"
        r"encoding=\W*latin-1"):
      self._main(self._argv(self._new_dir(), self._manifest(), data_path=path))
    with flagsaver.flagsaver():
      FLAGS(self._argv(self._new_dir(), self._manifest(), data_path=path, encoding="latin-1"))
      _, splits = run_classification.load_splits()
    texts = [t for split in splits.values() for t in split.texts[0]]
    self.assertLen(texts, 30)
    self.assertLen([t for t in texts if t.endswith(" café")], 1)

  def test_unknown_encoding(self):
    """An --encoding Python has no codec for is a ValueError naming it."""
    with self.assertRaisesRegex(ValueError, "Unknown encoding 'utf-9'"):
      self._main(self._argv(self._new_dir(), self._manifest(), encoding="utf-9"))

  def test_unknown_method(self):
    """An unknown --methods entry is a UsageError naming it and the valid methods, raised
    before any data is read or anything is written."""
    model_dir = self._new_dir()
    with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                r"--methods=\['adapters', 'adaptors'\]: name methods among "
                                r"adapters, full, ia3, layer_norm, lora, top_k"):
      self._main(self._argv(model_dir, self._manifest(), methods="adapters,adaptors",
                            data_path=os.path.join(model_dir, "absent.csv")))
    self.assertEmpty(os.listdir(model_dir))

  def test_bad_seeds(self):
    """--seeds takes distinct whole numbers; anything else is a flag error before any data is
    read or anything is written."""
    model_dir = self._new_dir()
    with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                r"--seeds=\['abc'\]: give comma-separated whole numbers of at "
                                r"least 0, each once, e.g. --seeds=0,1,2\."):
      self._main(self._argv(model_dir, self._manifest(), methods="adapters", seeds="abc",
                            data_path=os.path.join(model_dir, "absent.csv")))
    self.assertEmpty(os.listdir(model_dir))

  def test_rerun_of_a_method_not_compared(self):
    """--rerun names methods of --methods; another is a UsageError, an unknown name a flag
    error, both before anything is read or written."""
    model_dir = self._new_dir()
    absent = os.path.join(model_dir, "absent.csv")
    with self.assertRaisesRegex(app.UsageError, r"--rerun=full,top_k: --methods does not "
                                r"compare full, top_k; list them in --methods too\."):
      self._main(self._argv(model_dir, self._manifest(), methods="adapters",
                            rerun="full,top_k", data_path=absent))
    with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                r"--rerun=\['adaptors'\]: name methods among adapters, full, "
                                r"ia3, layer_norm, lora, top_k, e.g. --rerun=adapters,full\."):
      self._main(self._argv(model_dir, self._manifest(), methods="adapters",
                            rerun="adaptors", data_path=absent))
    self.assertEmpty(os.listdir(model_dir))

  def test_stray_argument(self):
    """A positional argument is a UsageError, not silently ignored."""
    with self.assertRaisesRegex(app.UsageError, r"Unexpected arguments: \['extra'\]"):
      self._main(self._argv(self._new_dir(), self._manifest()) + ["extra"])

  def test_failed_run_loses_nothing(self):
    """Runs that fail on bad data (non-UTF-8 bytes; changed data against the recorded
    manifest) leave the earlier run's folder, export and manifest bit for bit unchanged."""
    before = (testing.folder_digest(self.model_dir), testing.folder_digest(self.manifest))
    bad = os.path.join(self._new_dir(), "reviews.csv")
    with open(bad, "wb") as f:
      f.write(b"review,sentiment\nw1 w2 \xff,good\nw3,bad\n")
    with self.assertRaisesRegex(ValueError, "not valid utf-8"):
      self._main(self._argv(os.path.join(self._new_dir(), "bad"), self.manifest,
                            data_path=bad))
    # Same file name, other examples: the recorded split does not fit them.
    rows = _rows()
    rows[0] = ("w0 w1 w2", rows[0][1])
    changed = _write_csv(bad, rows)
    failed_dir = os.path.join(self._new_dir(), "changed")
    with self.assertRaisesRegex(ValueError, "not the ones split manifest .* was made from"):
      self._main(self._argv(failed_dir, self.manifest, data_path=changed))
    self.assertEqual(
        (testing.folder_digest(self.model_dir), testing.folder_digest(self.manifest)), before)
    self.assertFalse(os.path.exists(os.path.join(failed_dir, "results.json")))

  def _manifest(self):
    return os.path.join(self._new_dir(), "split.json")


if __name__ == "__main__":
  tf.test.main()

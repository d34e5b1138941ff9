"""Tests for provenance."""

import datetime
import os
import subprocess

import tensorflow as tf

from keras_adapters.utils import cpu_kernels
from keras_adapters.utils import provenance


class ProvenanceTest(tf.test.TestCase):

  def test_record_of_this_repository(self):
    now = datetime.datetime(2026, 11, 25, 4, 0, 5, tzinfo=datetime.timezone.utc)
    program = os.path.join(provenance.REPO_DIR, "experiments", "run_automl.py")
    record = provenance.record([program, "--task=airline", "--note=two words"], now=now)
    self.assertEqual(record["command"],
                     'experiments/run_automl.py --task=airline "--note=two words"')
    self.assertEqual(record["date_utc"], "2026-11-25T04:00:05+00:00")
    self.assertEqual(set(record["packages"]), set(provenance.PACKAGES))
    self.assertEqual(record["packages"]["tensorflow"].split(".")[:2],
                     tf.__version__.split(".")[:2])
    self.assertRegex(record["code"]["commit"], r"^[0-9a-f]{40}$")
    self.assertIsInstance(record["code"]["clean"], bool)
    # Every time in a record depends on the CPU and the kernels chosen for it.
    self.assertEqual(record["machine"]["kernels"], cpu_kernels.choice())
    self.assertIn("vector_extensions", record["machine"])

  def test_stamped_adds_the_record_under_its_key(self):
    stamped = provenance.stamped(dict(score=1.5))
    self.assertEqual(stamped["score"], 1.5)
    self.assertEqual(set(stamped[provenance.KEY]),
                     {"command", "code", "packages", "date_utc", "machine"})

  def test_program_outside_the_repository_is_kept(self):
    self.assertEqual(provenance.command_line(["/usr/bin/pytest", "-q"]), "/usr/bin/pytest -q")
    self.assertIsNone(provenance.command_line([]))

  def test_no_git_is_recorded_with_its_reason(self):

    def missing_git(*args, **kwargs):
      raise FileNotFoundError(2, "No such file or directory", "git")

    code = provenance.code_version(run=missing_git)
    self.assertIsNone(code["commit"])
    self.assertIsNone(code["clean"])
    self.assertIn("git could not run", code["reason"])

  def test_outside_a_work_tree_is_recorded_with_its_reason(self):
    folder = self.create_tempdir().full_path
    code = provenance.code_version(folder)
    self.assertEqual((code["commit"], code["clean"]), (None, None))
    self.assertIn("not a git work tree", code["reason"])

  def test_edited_tracked_file_makes_the_tree_unclean(self):

    def git(command, **kwargs):
      stdout = "abc\n" if command[1] == "rev-parse" else " M keras_adapters/x.py\n"
      return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    self.assertEqual(provenance.code_version(run=git), dict(commit="abc", clean=False))

  def test_rewritten_records_leave_the_tree_clean_edited_code_does_not(self):
    repo = self.create_tempdir().full_path
    for path in ("results/airline/comparison.json", "bench/results/b.json", "code.py"):
      os.makedirs(os.path.dirname(os.path.join(repo, path)), exist_ok=True)
      with open(os.path.join(repo, path), "w", encoding="utf-8") as f:
        f.write("{}")

    def git(*args):
      subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    for path in ("results/airline/comparison.json", "bench/results/b.json"):
      with open(os.path.join(repo, path), "w", encoding="utf-8") as f:
        f.write('{"rerun": true}')
    self.assertTrue(provenance.code_version(repo)["clean"])
    with open(os.path.join(repo, "code.py"), "w", encoding="utf-8") as f:
      f.write("edited = True")
    self.assertFalse(provenance.code_version(repo)["clean"])

  def test_missing_package_is_none(self):
    self.assertEqual(provenance.package_versions(["no-such-distribution-xyz"]),
                     {"no-such-distribution-xyz": None})


if __name__ == "__main__":
  tf.test.main()

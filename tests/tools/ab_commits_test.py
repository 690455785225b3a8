"""tools/ab_commits.py: two commits' steps in their own worktrees, and the summary."""

import json
import os
import shutil
import statistics
import subprocess

from absl import app
import numpy as np
import tensorflow as tf

from tests import testing_utils
from tests import tool_testing

ab_commits = tool_testing.load('ab_commits')


def _git(repo, *args):
  return subprocess.run(['git', '-C', repo, *args], capture_output=True,
                        text=True, check=True).stdout.strip()


def _clone_with_two_commits(folder):
  """A clone of this checkout's HEAD (sharing its objects) and a second,
  empty commit on it, so that the test never adds worktrees to the
  checkout's repository. Returns (clone, [commit A, commit B])."""
  clone = os.path.join(folder, 'clone')
  subprocess.run(['git', 'clone', '--quiet', '--shared', '--no-checkout',
                  testing_utils.REPO, clone], check=True)
  # HEAD's tree again (the clone has no index to commit from).
  commit = _git(clone, '-c', 'user.name=test', '-c',
                'user.email=test@example.com', 'commit-tree', 'HEAD^{tree}',
                '-p', 'HEAD', '-m', 'B: no change')
  _git(clone, 'update-ref', 'HEAD', commit)
  return clone, [_git(clone, 'rev-parse', 'HEAD~1'),
                 _git(clone, 'rev-parse', 'HEAD')]


class SummarizeTest(tf.test.TestCase):

  def test_ratios_of_the_rounds_seconds_a_step(self):
    rng = np.random.default_rng(0)
    rounds_a = rng.uniform(0.5, 1.5, size=(3, 4))
    rounds_b = rng.uniform(0.5, 1.5, size=(3, 4))
    result = ab_commits.summarize(rounds_a.tolist(), rounds_b.tolist())
    paired = rounds_a.mean(axis=1) / rounds_b.mean(axis=1)
    self.assertAllClose(result['seconds_per_step'],
                        [rounds_a.mean(axis=1), rounds_b.mean(axis=1)])
    self.assertAllClose(result['paired_ratios'], paired)
    self.assertAllClose(result['mean_paired_ratio'], paired.mean())
    self.assertAllClose(result['median_paired_ratio'], np.median(paired))
    self.assertAllClose(result['ratio'], rounds_a.mean() / rounds_b.mean())


class WorktreeTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    folder = self.create_tempdir().full_path
    self.clone, self.commits = _clone_with_two_commits(folder)
    self.scratch = os.path.join(folder, 'scratch')

  def test_made_once_then_reused(self):
    path = ab_commits.worktree(self.clone, self.commits[0], self.scratch)
    self.assertEqual(_git(path, 'rev-parse', 'HEAD'), self.commits[0])
    self.assertTrue(os.path.exists(os.path.join(path, 'official_seg')))
    marker = os.path.join(path, 'kept')
    open(marker, 'w').close()
    self.assertEqual(
        ab_commits.worktree(self.clone, self.commits[0], self.scratch), path)
    self.assertTrue(os.path.exists(marker))

  def test_made_again_after_its_folder_was_deleted(self):
    path = ab_commits.worktree(self.clone, self.commits[0], self.scratch)
    shutil.rmtree(path)
    self.assertEqual(
        ab_commits.worktree(self.clone, self.commits[0], self.scratch), path)
    self.assertEqual(_git(path, 'rev-parse', 'HEAD'), self.commits[0])

  def test_a_folder_of_another_commit_is_refused(self):
    os.makedirs(os.path.join(self.scratch, self.commits[1]))
    with self.assertRaisesRegex(app.UsageError, 'is not a worktree of'):
      ab_commits.worktree(self.clone, self.commits[1], self.scratch)

  def test_an_unknown_commit_names_its_flag(self):
    with self.assertRaisesRegex(app.UsageError, '^--b=no-such-branch: no '):
      ab_commits.resolve(self.clone, 'b', 'no-such-branch')


class AbCommitsTest(testing_utils.TinyDataTestCase):

  def test_each_commit_steps_in_its_own_worktree(self):
    folder = self.create_tempdir().full_path
    clone, commits = _clone_with_two_commits(folder)
    scratch = os.path.join(folder, 'scratch')
    run = tool_testing.run(
        ab_commits, a=commits[0], b=commits[1], repo=clone,
        scratch_dir=scratch, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir), rounds=1,
        steps=2, warmup_steps=1)
    self.assertEqual(run.status, 0, run.stderr[-3000:])
    result = json.loads(run.stdout.splitlines()[-1])
    self.assertEqual([result['a']['commit'], result['b']['commit']], commits)
    self.assertEqual(result['b']['subject'], 'B: no change')
    (a_seconds,), (b_seconds,) = result['seconds_per_step']
    self.assertGreater(a_seconds, 0)
    self.assertGreater(b_seconds, 0)
    self.assertAllClose(result['paired_ratios'], [a_seconds / b_seconds])
    self.assertAllClose(result['median_paired_ratio'],
                        statistics.median([a_seconds / b_seconds]))
    self.assertIn('round 1: A ', run.stdout)
    for commit in commits:  # Each worktree, kept for the next run.
      self.assertEqual(_git(os.path.join(scratch, commit), 'rev-parse',
                            'HEAD'), commit)


if __name__ == '__main__':
  tf.test.main()

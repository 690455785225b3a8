"""Tests for tools/ab_step.py, run as users run it: a process of its own."""

import json
import subprocess
import sys

import tensorflow as tf

from tests import testing_utils


class AbStepTest(testing_utils.TinyDataTestCase):

  def _run(self, *argv):
    return subprocess.run(
        [sys.executable, 'tools/ab_step.py',
         '--gin_file=experiments/quickstart.gin',
         *[f'--gin_param={binding}' for binding in
           testing_utils.tiny_bindings(self.data_dir)], *argv],
        cwd=testing_utils.REPO, capture_output=True, text=True, timeout=600,
        check=False)

  def test_optimizer_change_shows_in_the_ops_of_each_arm(self):
    process = self._run(
        '--b_gin_param=make_optimizer.optimizer = @tf.train.MomentumOptimizer',
        '--b_gin_param=tf.train.MomentumOptimizer.momentum = 0.9',
        '--blocks=2', '--block_steps=1', '--warmup_blocks=1')
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])
    result = json.loads(process.stdout.splitlines()[-1])
    self.assertIn('ResourceApplyAdam', result['only_in_a'])
    self.assertIn('ResourceApplyMomentum', result['only_in_b'])
    self.assertLen(result['paired_ratios'], 2)
    self.assertTrue(all(rate > 0 for rate in result['steps_per_second']))

  def test_no_change_for_arm_b_is_a_usage_error(self):
    process = self._run()
    self.assertNotEqual(process.returncode, 0)
    self.assertIn('--b_gin_file or --b_gin_param', process.stderr)


if __name__ == '__main__':
  tf.test.main()

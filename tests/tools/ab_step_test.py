"""tools/ab_step.py: its main() in-process, a usage error as a process."""

import json
import subprocess
import sys

import tensorflow as tf

from tests import testing_utils
from tests import tool_testing

ab_step = tool_testing.load('ab_step')


class AbStepTest(testing_utils.TinyDataTestCase):

  def test_semi_supervised_arm_against_the_supervised_step(self):
    # The same labeled batch in both arms; B adds the unlabeled stream.
    run = tool_testing.run(
        ab_step, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir),
        b_gin_file=['semi_supervised/fixmatch.gin'],
        b_gin_param=["UNLABELED_SPLIT = 'train'"],
        blocks=2, block_steps=1, warmup_blocks=1)
    self.assertEqual(run.status, 0, run.stderr[-3000:])
    result = json.loads(run.stdout.splitlines()[-1])
    self.assertEqual(result['only_in_a'], [])
    # The consistency loss (soft cross-entropy) and the warnings' text.
    self.assertIn('SoftmaxCrossEntropyWithLogits', result['only_in_b'])
    self.assertIn('StringJoin', result['only_in_b'])
    self.assertLen(result['paired_ratios'], 2)
    self.assertTrue(all(rate > 0 for rate in result['steps_per_second']))

  def test_no_change_for_arm_b_is_a_usage_error(self):
    # A process: app.run prints the usage error on stderr and exits.
    process = subprocess.run(
        [sys.executable, 'tools/ab_step.py',
         '--gin_file=experiments/quickstart.gin',
         *[f'--gin_param={binding}' for binding in
           testing_utils.tiny_bindings(self.data_dir)]],
        cwd=testing_utils.REPO, capture_output=True, text=True, timeout=600,
        check=False)
    self.assertNotEqual(process.returncode, 0)
    self.assertIn('--b_gin_file or --b_gin_param', process.stderr)


if __name__ == '__main__':
  tf.test.main()

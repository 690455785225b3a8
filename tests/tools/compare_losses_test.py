"""tools/compare_losses.py: equal and differing runs, exit statuses."""

import importlib.util
import os
import subprocess
import sys

import tensorflow as tf

from tests import testing_utils

_TOOL = os.path.join(testing_utils.REPO, 'tools', 'compare_losses.py')
_SPEC = importlib.util.spec_from_file_location('compare_losses', _TOOL)
compare_losses = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(compare_losses)


def _write_losses(model_dir, losses, tag='loss/total'):
  with tf.summary.create_file_writer(model_dir).as_default():
    for step, value in losses.items():
      tf.summary.scalar(tag, value, step=step)


class CompareLossesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dirs = [self.create_tempdir().full_path for _ in range(3)]
    _write_losses(self.dirs[0], {0: 2.5, 1: 1.25, 2: 0.75, 3: 0.5})
    _write_losses(self.dirs[1], {0: 2.5, 1: 1.25, 2: 0.75})
    _write_losses(self.dirs[2], {0: 2.5, 1: 1.25, 2: 0.625, 3: 0.5})

  def test_compares_the_common_steps_in_order(self):
    self.assertEqual(compare_losses.compare({0: 1.0, 1: 0.5, 5: 0.1},
                                            {0: 1.0, 1: 0.5, 2: 0.3}),
                     (2, None))
    self.assertEqual(compare_losses.compare({0: 1.0, 1: 0.5, 2: 0.3},
                                            {0: 1.0, 1: 0.4, 2: 0.2}), (1, 1))
    self.assertEqual(compare_losses.compare({0: 1.0}, {0: 1.01},
                                            tolerance=0.02), (1, None))

  def test_verdicts(self):
    self.assertEqual(compare_losses.verdict(self.dirs[:2], 'loss/total'),
                     (0, 'loss/total: the same at all 3 steps both runs '
                         'logged.'))
    status, message = compare_losses.verdict(self.dirs[::2], 'loss/total')
    self.assertEqual(status, 1)
    self.assertIn('first 2 common steps; step 2 differs: 0.75 against 0.625',
                  message)
    self.assertEqual(
        compare_losses.verdict(self.dirs[:2], 'loss/segmentation'),
        (2, f"{self.dirs[0]} logged no 'loss/segmentation'."))

  def test_the_program_exits_1_when_runs_differ(self):
    result = subprocess.run(
        [sys.executable, _TOOL, f'--model_dirs={self.dirs[0]},{self.dirs[2]}'],
        capture_output=True, text=True, cwd=testing_utils.REPO, check=False)
    self.assertEqual(result.returncode, 1, result.stderr)
    self.assertIn('step 2 differs', result.stdout)


if __name__ == '__main__':
  tf.test.main()

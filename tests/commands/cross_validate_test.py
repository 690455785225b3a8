"""cross_validate: two folds of the tiny quickstart trained, evaluated, summarized and resumed."""

import json
import os

import numpy as np
import tensorflow as tf

from official_seg.commands import cross_validate
from official_seg.data import input_fn
from official_seg.runtime import cross_validation
from tests import testing_utils
from tests.commands import command_testing


class CrossValidateTest(testing_utils.TinyDataTestCase):

  num_train = 6
  num_val = 1

  def _run(self, **flags):
    return command_testing.run(
        cross_validate, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir, 1),
        work_dir=self.work_dir, **flags)

  def setUp(self):
    super().setUp()
    self.work_dir = self.create_tempdir().full_path

  def test_folds_trained_summarized_and_not_run_again(self):
    result = self._run(folds=2)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn("Wrote 2 folds of split 'train'", result.stdout)
    for index in range(2):
      self.assertNotEmpty(input_fn.list_shards(
          self.data_dir, f'train_fold{index}of2_val'))
    with open(os.path.join(self.work_dir, cross_validation.SUMMARY_FILE)) as f:
      summary = json.load(f)['configurations']['experiment']
    mious = [record['mean_iou'] for record in summary['folds']]
    self.assertLen(mious, 2)
    self.assertEqual([r['global_step'] for r in summary['folds']], [1, 1])
    self.assertAllClose(summary['mean_iou']['mean'], np.mean(mious))
    self.assertAllClose(summary['mean_iou']['std'], np.std(mious, ddof=1))

    again = self._run(folds=2)
    self.assertEqual(again.status, 0, again.stderr)
    self.assertIn('Folds of split \'train\': written earlier', again.stdout)
    self.assertEqual(again.stdout.count('done earlier'), 2)

  def test_compared_files_of_one_name_exit_2(self):
    result = self._run(folds=2, compare=['losses/dice.gin', 'mine/dice.gin'])
    self.assertEqual(result.status, 2)
    self.assertIn('each file names its configuration\'s folder',
                  result.stderr)

  def test_more_folds_than_images_exits_2(self):
    result = self._run(folds=7)
    self.assertEqual(result.status, 2)
    self.assertIn('--folds=7: give 2 to 6 folds', result.stderr)


if __name__ == '__main__':
  tf.test.main()

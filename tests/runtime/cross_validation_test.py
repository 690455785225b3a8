"""Cross-validation's summary over folds and a finished fold read back, not run again."""

import json
import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.runtime import cross_validation


def _record(miou, per_class):
  return {'mean_iou': miou, 'per_class_iou': per_class}


class SummaryTest(tf.test.TestCase):

  def test_mean_and_sample_deviation_over_folds(self):
    records = [_record(0.5, {'bg': 0.9, 'cat': 0.1}),
               _record(0.7, {'bg': 0.8, 'cat': None}),
               _record(0.6, {'bg': 0.95, 'cat': 0.3})]
    summary = cross_validation.summarize(records)
    self.assertAllClose(summary['mean_iou']['mean'], 0.6)
    self.assertAllClose(summary['mean_iou']['std'],
                        np.std([0.5, 0.7, 0.6], ddof=1))
    bg = summary['per_class_iou']['bg']
    self.assertAllClose([bg['mean'], bg['std']],
                        [np.mean([0.9, 0.8, 0.95]),
                         np.std([0.9, 0.8, 0.95], ddof=1)])
    # A class with no score in a fold is averaged over the others.
    self.assertEqual(summary['per_class_iou']['cat']['folds'], 2)
    self.assertAllClose(summary['per_class_iou']['cat']['mean'], 0.2)

  def test_the_best_configuration_has_the_highest_mean(self):
    summaries = {'a': {'mean_iou': {'mean': 0.61}},
                 'b': {'mean_iou': {'mean': 0.64}}}
    self.assertEqual(cross_validation.best(summaries), 'b')

  def test_table_rows(self):
    records = [_record(0.5, {'bg': 0.9}), _record(0.7, {'bg': 0.7})]
    result = {'configurations': {'dice': dict(
        cross_validation.summarize(records), folds=records)}, 'best': 'dice'}
    self.assertEqual(
        cross_validation.format_summary(result).split('\n'),
        ['configuration\tmean IoU\tbg',
         'dice\t0.6000 ± 0.1414\t0.8000 ± 0.1414', 'best: dice'])


class FinishedFoldTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path
    self.configuration = cross_validation.Configuration(
        'dice', ('experiments/quickstart.gin',), ("DATA_DIR = '/data'",))
    self.splits = ('train_fold0of2_train', 'train_fold0of2_val')
    done = {'gin_files': ['experiments/quickstart.gin'],
            'gin_params': ["DATA_DIR = '/data'",
                           "TRAIN_SPLIT = 'train_fold0of2_train'",
                           "EVAL_SPLIT = 'train_fold0of2_val'"],
            'record': _record(0.5, {'bg': 0.5}), 'seconds': 3.0}
    with open(os.path.join(self.model_dir,
                           cross_validation.DONE_FILE), 'w') as f:
      json.dump(done, f)

  def test_a_finished_fold_is_read_back_without_training(self):
    lines = []
    done = cross_validation.run_fold(self.configuration, self.splits,
                                     self.model_dir, lines.append)
    self.assertEqual(done['record']['mean_iou'], 0.5)
    self.assertEqual(lines, ['dice on train_fold0of2_val: done earlier, '
                             'mean IoU 0.5000'])

  def test_a_fold_of_other_settings_is_refused(self):
    other = cross_validation.Configuration(
        'dice', ('experiments/quickstart.gin', 'losses/dice.gin'),
        ("DATA_DIR = '/data'",))
    with self.assertRaisesRegex(validation.OutputExistsError,
                                'holds a fold trained with other gin files'):
      cross_validation.run_fold(other, self.splits, self.model_dir)


if __name__ == '__main__':
  tf.test.main()

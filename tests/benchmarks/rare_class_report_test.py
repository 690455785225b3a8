"""Tests for rare_class_report: spreads over seeds, paired differences, the markdown table."""

import numpy as np
import tensorflow as tf

from benchmarks import rare_class_report

_MIOU = {'cross_entropy': [0.80, 0.84, 0.78], 'ce_dice+crops': [0.83, 0.85,
                                                                 0.84],
         'dice': [0.70]}
_RARE = {'cross_entropy': [0.05, 0.10, None], 'ce_dice+crops': [0.40, 0.52,
                                                                0.45],
         'dice': [0.30]}


def _records():
  return [{'arm': arm, 'seed': seed, 'mean_iou': miou,
           'rare_iou': _RARE[arm][seed], 'rare_dice': 0.5,
           'rare_boundary_iou': None, 'wall_secs': 100.0 + seed,
           'rare_class': 'crack'}
          for arm, values in _MIOU.items() for seed, miou in enumerate(values)]


class ReportTest(tf.test.TestCase):

  def test_spreads_and_differences_against_numpy(self):
    summary = rare_class_report.summarize(_records())
    self.assertEqual(list(summary), ['cross_entropy', 'ce_dice+crops',
                                     'dice'])
    combined = summary['ce_dice+crops']
    self.assertEqual((combined['runs'], combined['seeds']), (3, [0, 1, 2]))
    self.assertAllClose(combined['mean_iou'],
                        (np.mean(_MIOU['ce_dice+crops']),
                         np.std(_MIOU['ce_dice+crops'], ddof=1)))
    differences = (np.array(_MIOU['ce_dice+crops']) -
                   np.array(_MIOU['cross_entropy']))
    self.assertAllClose(combined['mean_iou_difference'],
                        (differences.mean(), differences.std(ddof=1)))
    # Seed 2's rare IoU of cross-entropy is missing: seeds 0 and 1 pair.
    self.assertAllClose(summary['cross_entropy']['rare_iou'],
                        (0.075, np.std([0.05, 0.10], ddof=1)))
    self.assertAllClose(combined['rare_iou_difference'],
                        (np.mean([0.35, 0.42]), np.std([0.35, 0.42], ddof=1)))
    # One seed: no spread; nothing for a score no run has.
    self.assertEqual(summary['dice']['mean_iou'], (0.70, None))
    self.assertAllClose(summary['dice']['mean_iou_difference'][0], -0.10)
    self.assertEqual(combined['rare_boundary_iou'], (None, None))
    self.assertEqual(summary['cross_entropy']['mean_iou_difference'],
                     (None, None))

  def test_the_markdown_table(self):
    lines = rare_class_report.report(_records()).splitlines()
    self.assertEqual(lines[0], '| arm | runs | mIoU | Δ mIoU | crack IoU | '
                     'Δ crack IoU | crack Dice | crack Boundary IoU | '
                     'wall s |')
    self.assertEqual(lines[1], '|' + ' --- |' * 9)
    self.assertEqual(lines[2], '| cross_entropy | 3 | 0.807 ± 0.031 | - | '
                     '0.075 ± 0.035 | - | 0.500 ± 0.000 | - | 101 ± 1 |')
    self.assertEqual(lines[3], '| ce_dice+crops | 3 | 0.840 ± 0.010 | '
                     '+0.033 ± 0.025 | 0.457 ± 0.060 | +0.385 ± 0.049 | '
                     '0.500 ± 0.000 | - | 101 ± 1 |')
    self.assertEqual(lines[4], '| dice | 1 | 0.700 | -0.100 | 0.300 | '
                     '+0.250 | 0.500 | - | 100 |')
    self.assertStartsWith(lines[6], 'Mean ± sample standard deviation')
    self.assertEqual(rare_class_report.report([]), '')

  def test_without_the_baseline_no_difference(self):
    records = [r for r in _records() if r['arm'] != 'cross_entropy']
    summary = rare_class_report.summarize(records)
    self.assertEqual(summary['dice']['rare_iou_difference'], (None, None))


if __name__ == '__main__':
  tf.test.main()

"""Tests for the sampling settings suggested from a split's classes."""

import math

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import tfexample
from official_seg.datasets import sampling_advice
from official_seg.datasets import stats

IGNORE = 255
NAMES = ['background', 'part', 'defect', 'unused']


def _write_split(data_dir, labels):
  examples = [tfexample.make_example(
      tf.io.encode_png(np.zeros(label.shape + (3,), np.uint8)).numpy(),
      tf.io.encode_png(label[..., None]).numpy(), f'{i}.png', 'png',
      *label.shape) for i, label in enumerate(labels)]
  tfexample.write_shards(examples, data_dir, 'train', 2)


def _labels(rare):
  """12 labels of 20x20 with an ignored top row.

  rare: background around a 10x10 part in each, a 2-pixel defect in the
  first; else the three classes in thirds of every image.
  """
  labels = []
  for index in range(12):
    label = np.zeros((20, 20), np.uint8)
    if rare:
      label[5:15, 5:15] = 1
      if index == 0:
        label[2, 2:4] = 2
    else:
      label[:, 7:14] = 1
      label[:, 14:] = 2
    label[0] = IGNORE
    labels.append(label)
  return labels


class SamplingAdviceTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _suggest(self, labels):
    data_dir = self.create_tempdir().full_path
    _write_split(data_dir, labels)
    split = stats.compute_stats(data_dir, 'train', len(NAMES), IGNORE)
    return sampling_advice.suggest(split, NAMES, IGNORE)

  def test_a_rare_class_turns_every_setting_on(self):
    labels = _labels(rare=True)
    suggestions = self._suggest(labels)
    bindings = [b for s in suggestions for b in s.bindings]
    self.assertEqual(bindings, [
        ('CropSampling.cat_max_ratio', 0.75),
        ('CropSampling.foreground_share', 0.33),
        ('CropSampling.foreground_classes', [2]),
        ('train/build_dataset.repeat_factor_threshold', 0.1)])
    every = np.concatenate([label.ravel() for label in labels])
    shares = 100 * np.bincount(every[every != IGNORE], minlength=4) / (
        every != IGNORE).sum()
    self.assertIn(f'background covers {shares[0]:.1f}% of the labelled',
                  suggestions[0].reason)
    self.assertIn(f'defect {shares[2]:.2f}% of the labelled',
                  suggestions[1].reason)
    # The defect is in 1 of 12 images: LVIS's sqrt(0.1 / (1 / 12)); the
    # others repeat once.
    factor = math.sqrt(0.1 * 12)
    self.assertIn(f'defect is in 1 of 12 images: its images repeat '
                  f'{factor:.2f} times (LVIS), an epoch grows '
                  f'{(factor + 11) / 12:.2f} times.', suggestions[2].reason)
    for suggestion in suggestions:
      self.assertNotIn('\n', suggestion.reason)

  def test_balanced_classes_leave_every_setting_off(self):
    bindings = [b for s in self._suggest(_labels(rare=False))
                for b in s.bindings]
    self.assertEqual(bindings, [
        ('CropSampling.cat_max_ratio', 1.0),
        ('CropSampling.foreground_share', 0.0),
        ('train/build_dataset.repeat_factor_threshold', 0.0)])

  def test_the_gin_snippet_binds_the_suggestions(self):
    suggestions = self._suggest(_labels(rare=True))
    snippet = sampling_advice.gin_snippet(suggestions, "split 'train'")
    self.assertTrue(snippet.startswith(
        "# Sampling settings suggested by dataset_stats for split 'train'."))
    gin.parse_config(snippet)
    self.assertEqual(gin.query_parameter('CropSampling.cat_max_ratio'), 0.75)
    self.assertEqual(gin.query_parameter('CropSampling.foreground_classes'),
                     [2])
    self.assertEqual(gin.query_parameter(
        'train/build_dataset.repeat_factor_threshold'), 0.1)
    printed = sampling_advice.format_suggestions(suggestions)
    self.assertIn('  CropSampling.foreground_share = 0.33', printed)


if __name__ == '__main__':
  tf.test.main()

"""Tests for the plan's choices, against closed forms on hand-made facts."""

import collections
import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.datasets import planner


class BudgetTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(('90s', 90), ('20m', 1200), ('2h', 7200),
                            ('1h30m', 5400), ('1.5h', 5400))
  def test_durations(self, text, seconds):
    self.assertEqual(planner.seconds_of(text), seconds)

  @parameterized.parameters(('8G', 8 * 2**30), ('8GiB', 8 * 2**30),
                            ('512M', 512 * 2**20), ('1024', 1024))
  def test_sizes(self, text, size):
    self.assertEqual(planner.bytes_of(text), size)

  @parameterized.parameters('20', 'soon', '20m extra', '')
  def test_not_a_duration(self, text):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                '--time_budget=.* is not a duration'):
      planner.seconds_of(text)

  def test_not_a_size(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                '--memory_budget=.* is not a size'):
      planner.bytes_of('lots')

  def test_a_budget_start_up_uses_up_stops(self):
    planner.check_time_budget(planner.OVERHEAD_SECONDS + 1)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'raise --time_budget'):
      planner.check_time_budget(planner.OVERHEAD_SECONDS)


class SizesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((513, 16, 513), (514, 16, 529), (1, 16, 1),
                            (2, 16, 17), (145, 8, 145), (100, 32, 129))
  def test_stride_side(self, side, stride, expected):
    self.assertEqual(planner.stride_side(side, stride), expected)

  def test_median_counts_each_image(self):
    sizes = collections.Counter({(10, 20): 3, (30, 40): 1})
    self.assertEqual(planner.median_size(sizes), (10.0, 20.0))

  def test_object_range_leaves_out_the_class_of_most_pixels(self):
    # Mean sides sqrt(900 / 3), sqrt(400 / 4) = 10, sqrt(16 / 1) = 4; the
    # last class is in no image.
    smallest, largest = planner.object_range([900, 400, 16, 0], [3, 4, 1, 0])
    self.assertAllClose([smallest, largest], [4.0, 10.0])

  def test_one_class_is_its_own_object(self):
    self.assertAllClose(planner.object_range([400], [4]), [10.0, 10.0])

  @parameterized.parameters(
      # The height needs twice the object (160), the width the median.
      ((100, 300), 80, [161, 305]),
      # Larger images are capped at DeepLab's 513.
      ((1000, 2000), 30, [513, 513]),
      # Small images: the least 16k + 1 over the median.
      ((31.5, 34), 10, [33, 49]))
  def test_crop(self, median, largest_object, expected):
    choice = planner.crop_choice(median, largest_object, 16)
    self.assertEqual(choice.bindings, [('CROP_SIZE', expected)])
    self.assertNotIn('\n', choice.reason)


class EvaluationTest(tf.test.TestCase, parameterized.TestCase):

  def test_whole_images_when_one_holds_no_more_than_a_batch(self):
    # 113 x 113 = 12769 pixels <= 4 x 65 x 65 = 16900.
    choice, pixels = planner.eval_choice((100, 100), [65, 65], 4, 16)
    self.assertEqual(choice.bindings, [('EVAL_CROP_SIZE', [113, 113]),
                                       ('WINDOW_SIZE', None)])
    self.assertEqual(pixels, 113 * 113)

  def test_windows_of_the_crop_when_larger(self):
    # 305 x 305 > 16900; windows of 65 at stride 43: 1 + ceil(235 / 43) = 7
    # along each side.
    choice, pixels = planner.eval_choice((300, 300), [65, 65], 4, 16)
    self.assertEqual(choice.bindings, [('EVAL_CROP_SIZE', [65, 65]),
                                       ('WINDOW_SIZE', [65, 65])])
    self.assertEqual(pixels, 49 * 65 * 65)

  @parameterized.parameters((65, 65, 1), (64, 65, 1), (66, 65, 2),
                            (108, 65, 2), (109, 65, 3))
  def test_window_count(self, length, window, expected):
    self.assertEqual(planner.window_count(length, window), expected)

  def test_eval_seconds(self):
    # 10 images of 1000 pixels at a third of 2 s per 4 x 500 pixels.
    self.assertAllClose(
        planner.eval_seconds(10, 1000, 2.0, 4, [20, 25]),
        10 * 1000 * (2.0 / 2000) / 3)


class ScaleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      # 129 / 40 > 2: DeepLab's top; 16 / 8 = 2 > 1: no shrinking.
      ([129, 129], 8, 40, 1.0, 2.0),
      # 129 / 100 = 1.29 -> 1.25; 16 / 64 = 0.25 -> DeepLab's 0.5.
      ([129, 129], 64, 100, 0.5, 1.25),
      # 16 / 20 = 0.8 -> 1.0 (rounded up to a step: never below a cell).
      ([129, 161], 20, 300, 1.0, 1.0),
      # 16 / 24 = 0.667 -> 0.75.
      ([257, 257], 24, 100, 0.75, 2.0))
  def test_range(self, crop, smallest, largest, low, high):
    choice = planner.scale_choice(crop, smallest, largest, 16)
    self.assertEqual(choice.bindings, [('MIN_SCALE_FACTOR', low),
                                       ('MAX_SCALE_FACTOR', high)])


class StepsTest(tf.test.TestCase):

  def test_steps_fill_the_budget_after_evaluation_and_start_up(self):
    steps = planner.steps_choice(1200, 0.5, 30)
    self.assertEqual(steps, math.floor((1200 - planner.OVERHEAD_SECONDS - 30)
                                       / 0.5))

  def test_not_one_step_stops(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'no time for one training step'):
      planner.steps_choice(planner.OVERHEAD_SECONDS + 10, 20.0, 0.0)

  def test_schedule_warms_up_over_a_twentieth(self):
    # 1000 steps of 2 s: a checkpoint every 600 s / 2 s = 300 steps, and
    # evaluation throttled for the whole hour, so only the last one runs.
    bindings = dict(planner.schedule_choice(1000, 2.0, 3600.0).bindings)
    self.assertEqual(bindings['WARMUP_STEPS'], 50)
    self.assertEqual(bindings['build_run_config.save_checkpoints_steps'],
                     300)
    self.assertEqual(bindings['run.throttle_secs'], 3600)
    self.assertEqual(planner.schedule_choice(3, 2.0, 60.0).bindings[2],
                     ('WARMUP_STEPS', 1))

  def test_a_run_shorter_than_a_checkpoint_saves_at_its_end(self):
    bindings = dict(planner.schedule_choice(40, 5.0, 300.0).bindings)
    self.assertEqual(bindings['build_run_config.save_checkpoints_steps'],
                     40)


class LossTest(tf.test.TestCase):

  def test_a_class_under_one_percent_adds_dice(self):
    choice = planner.loss_choice(np.array([97.5, 2.0, 0.5]),
                                 ['background', 'part', 'crack'])
    self.assertEqual(choice.includes, ('losses/ce_dice.gin',))
    self.assertIn('crack 0.50%', choice.reason)

  def test_balanced_classes_keep_cross_entropy(self):
    choice = planner.loss_choice(np.array([50.0, 49.0, 1.0, 0.0]),
                                 ['a', 'b', 'c', 'unseen'])
    self.assertEqual((choice.includes, choice.bindings), ((), []))


if __name__ == '__main__':
  tf.test.main()

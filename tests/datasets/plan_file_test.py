"""Tests for the plan's gin text: its includes, choices and reasons parse."""

import gin
import tensorflow as tf

from official_seg.datasets import plan_file
from official_seg.datasets import planner


class GinTextTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_text_parses_with_every_choice_and_reason(self):
    choices = [
        ('scale', planner.scale_choice([129, 129], 8, 40, 16)),
        ('normalisation', planner.normalization_choice([1.0, 2.0],
                                                       [0.5, 0.0], 'train')),
        ('schedule', planner.schedule_choice(100, 1.0, 600.0))]
    text = plan_file.gin_text(['A plan.'], [], choices,
                            ["DATA_DIR = '/data'"])
    # The schedule file is included; bindings of the modules' configurables.
    self.assertIn("include 'schedules/poly_warmup.gin'", text)
    for title, choice in choices:
      self.assertIn(f'# {title}: {choice.reason}\n', text)
    body = '\n'.join(line for line in text.splitlines()
                     if not line.startswith('include'))
    gin.parse_config(body, skip_unknown=True)
    self.assertEqual(gin.query_parameter('%MIN_SCALE_FACTOR'), 1.0)
    self.assertEqual(gin.query_parameter('Parser.stddev_rgb'), [0.5, 1.0])
    self.assertEqual(gin.query_parameter('%DATA_DIR'), '/data')


if __name__ == '__main__':
  tf.test.main()

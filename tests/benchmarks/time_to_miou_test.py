"""Tests for time_to_miou: the curve, its first reach, the ratio and table."""

import time

from absl.testing import parameterized
import tensorflow as tf

from benchmarks import time_to_miou


def _result(trainer, wall_secs_to_miou, curve):
  return {'trainer': trainer, 'target_miou': 0.9, 'curve': curve,
          'steps_to_miou': curve[-1][0] if wall_secs_to_miou else None,
          'wall_secs_to_miou': wall_secs_to_miou,
          'reached': ({'train_secs': curve[-1][1], 'eval_secs': curve[-1][2]}
                      if wall_secs_to_miou else None),
          'train_secs': curve[-1][1], 'eval_secs': curve[-1][2]}


class CurveTest(tf.test.TestCase):

  def test_first_reach_is_kept_and_times_are_apart(self):
    curve = time_to_miou.Curve(0.5)
    with curve.evaluating():
      time.sleep(0.02)
    self.assertFalse(curve.add(10, 0.4))
    time.sleep(0.02)
    self.assertTrue(curve.add(20, 0.6))
    self.assertTrue(curve.add(30, 0.7))
    (_, train_10, eval_10, _), (_, train_20, eval_20, _), _ = curve.points
    self.assertGreaterEqual(eval_10, 0.02)
    self.assertEqual(eval_20, eval_10)
    self.assertGreaterEqual(train_20 - train_10, 0.02)
    result = curve.result()
    self.assertEqual((result['steps_to_miou'], result['steps_trained']),
                     (20, 30))
    self.assertAllClose(result['wall_secs_to_miou'], train_20 + eval_20)
    self.assertEqual([p[3] for p in result['curve']], [0.4, 0.6, 0.7])

  def test_never_reached_is_none(self):
    curve = time_to_miou.Curve(0.9)
    self.assertFalse(curve.add(5, 0.3))
    result = curve.result()
    self.assertIsNone(result['reached'])
    self.assertIsNone(result['steps_to_miou'])
    self.assertIsNone(result['wall_secs_to_miou'])


class HelpersTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters((250, 1000, [250, 500, 750, 1000]),
                            (2, 5, [2, 4, 5]), (10, 3, [3]), (1, 1, [1]))
  def test_evaluation_steps(self, every, max_steps, expected):
    self.assertEqual(time_to_miou.evaluation_steps(every, max_steps),
                     expected)

  def test_evaluation_steps_needs_a_cadence(self):
    with self.assertRaisesRegex(ValueError, '--eval_every_steps=0'):
      time_to_miou.evaluation_steps(0, 10)

  def test_ratio_is_ours_over_the_peer(self):
    ours = _result('official_seg', 30.0, [[100, 25.0, 5.0, 0.91]])
    peer = _result('model_garden', 120.0, [[400, 100.0, 20.0, 0.92]])
    self.assertEqual(time_to_miou.ratio(ours, peer), 0.25)
    missed = _result('model_garden', None, [[400, 100.0, 20.0, 0.5]])
    self.assertIsNone(time_to_miou.ratio(ours, missed))
    self.assertIsNone(time_to_miou.ratio(missed, peer))
    table = time_to_miou.table([ours, missed], None)
    self.assertIn('never', table)
    self.assertIn('time_to_miou_ratio: never', table)
    self.assertIn('(100, 25, 5, 0.910)', table)


if __name__ == '__main__':
  tf.test.main()

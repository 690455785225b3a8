"""Tests for ttm_ours: official_seg trained to a mean IoU, tiny."""

import os

import tensorflow as tf

from benchmarks import ttm_ours
from tests import testing_utils


class TimeToMiouOursTest(testing_utils.TinyDataTestCase):

  num_train = 8

  def _run(self, target, eval_every_steps, max_steps):
    self.model_dir = self.create_tempdir().full_path
    return ttm_ours.run(['experiments/quickstart.gin'],
                        testing_utils.tiny_bindings(self.data_dir),
                        self.model_dir, target, eval_every_steps, max_steps)

  def _checkpoints(self):
    return sorted(int(path.split('-')[-1].split('.')[0]) for path in
                  tf.io.gfile.glob(os.path.join(self.model_dir,
                                                'model.ckpt-*.index')))

  def test_stops_at_the_first_evaluation_that_reaches_the_target(self):
    # Any prediction overlapping a class scores above this.
    result = self._run(1e-6, eval_every_steps=1, max_steps=3)
    self.assertEqual([step for step, _, _, _ in result['curve']], [1])
    self.assertEqual((result['steps_to_miou'], result['steps_trained']),
                     (1, 1))
    reached = result['reached']
    self.assertAllClose(reached['wall_secs'],
                        reached['train_secs'] + reached['eval_secs'])
    self.assertEqual(result['wall_secs_to_miou'], reached['wall_secs'])
    self.assertGreaterEqual(result['curve'][0][3], 1e-6)
    self.assertEqual(self._checkpoints(), [0, 1])

  def test_unreachable_target_trains_to_max_steps_at_the_cadence(self):
    result = self._run(1.0, eval_every_steps=2, max_steps=3)
    self.assertIsNone(result['reached'])
    self.assertIsNone(result['steps_to_miou'])
    self.assertIsNone(result['wall_secs_to_miou'])
    curve = result['curve']
    self.assertEqual([step for step, _, _, _ in curve], [2, 3])
    self.assertEqual(self._checkpoints(), [0, 2, 3])
    # Time trained and time evaluated, apart, both growing.
    (_, train_2, eval_2, miou_2), (_, train_3, eval_3, miou_3) = curve
    self.assertGreater(train_2, 0)
    self.assertGreater(eval_2, 0)
    self.assertGreater(train_3, train_2)
    self.assertGreater(eval_3, eval_2)
    self.assertAllClose(result['wall_secs'],
                        result['train_secs'] + result['eval_secs'])
    for miou in (miou_2, miou_3):
      self.assertBetween(miou, 0.0, 1.0)
    self.assertEqual(
        (result['trainer'], result['max_steps'], result['batch_size'],
         result['crop_size'], result['schedule_steps']),
        ('official_seg', 3, 2, [33, 33], 3))


if __name__ == '__main__':
  tf.test.main()

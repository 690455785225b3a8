"""Tests for keeping the best checkpoint by mean IoU."""

import os

import numpy as np
import tensorflow as tf

from official_seg.evaluation import best_checkpoint


def _save(model_dir, step, value):
  """A real one-variable checkpoint whose variable holds `value`."""
  checkpoint = tf.train.Checkpoint(v=tf.Variable(value))
  return checkpoint.write(os.path.join(model_dir, f'model.ckpt-{step}'))


class BestCheckpointTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def _record(self, step, mean_iou):
    return {'global_step': step, 'mean_iou': mean_iou,
            'checkpoint': _save(self.model_dir, step, float(step))}

  def test_keeps_the_highest_mean_iou(self):
    self.assertIsNone(best_checkpoint.read_best(self.model_dir))
    self.assertTrue(best_checkpoint.update(self.model_dir, self._record(10, 0.4)))
    self.assertTrue(best_checkpoint.update(self.model_dir, self._record(20, 0.6)))
    self.assertFalse(best_checkpoint.update(self.model_dir, self._record(30, 0.5)))
    best = best_checkpoint.read_best(self.model_dir)
    self.assertEqual(best['global_step'], 20)
    self.assertEqual(best['mean_iou'], 0.6)
    best_dir = os.path.join(self.model_dir, 'best')
    latest = tf.train.latest_checkpoint(best_dir)
    self.assertEqual(latest, best['checkpoint'])
    self.assertEqual(tf.train.load_checkpoint(latest).get_tensor(
        'v/.ATTRIBUTES/VARIABLE_VALUE'), np.float32(20.0))
    # Only the best copy stays in best/.
    self.assertEqual(sorted(set(
        p.split('.ckpt-')[1].split('.')[0]
        for p in tf.io.gfile.glob(os.path.join(best_dir, 'model.ckpt-*')))), ['20'])

  def test_deleted_source_keeps_previous_best(self):
    best_checkpoint.update(self.model_dir, self._record(10, 0.4))
    record = self._record(20, 0.9)
    for path in tf.io.gfile.glob(record['checkpoint'] + '.*'):
      os.remove(path)
    self.assertFalse(best_checkpoint.update(self.model_dir, record))
    self.assertEqual(best_checkpoint.read_best(self.model_dir)['global_step'], 10)

  def test_no_valid_pixels_is_never_best(self):
    self.assertFalse(best_checkpoint.update(self.model_dir, self._record(10, None)))


if __name__ == '__main__':
  tf.test.main()

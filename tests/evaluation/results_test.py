"""Tests for metrics.jsonl records and the per-class IoU table."""

import json
import os

import numpy as np
import tensorflow as tf

from official_seg.evaluation import results

_RESULT = {'global_step': np.int64(40), 'loss': np.float32(0.5),
           'mean_iou': np.float64(0.6), 'pixel_accuracy': np.float64(0.9),
           'num_images': np.float64(7.0), 'iou/background': np.float64(0.8),
           'iou/cat': np.float64(0.4), 'iou/absent': np.float64(np.nan)}


class ResultsTest(tf.test.TestCase):

  def test_record_fields(self):
    record = results.make_record(_RESULT, '/m/model.ckpt-40')
    self.assertEqual(record['global_step'], 40)
    self.assertEqual(record['checkpoint'], '/m/model.ckpt-40')
    self.assertEqual(record['num_images'], 7)
    self.assertEqual(record['per_class_iou'],
                     {'background': 0.8, 'cat': 0.4, 'absent': None})
    self.assertAllClose(record['loss'], 0.5)
    self.assertEqual(record['weights'], 'raw')

  def test_record_says_which_weights_were_scored(self):
    record = results.make_record(dict(_RESULT, weights='moving_average'),
                                 'ckpt')
    self.assertEqual(record['weights'], 'moving_average')

  def test_record_from_confusion_equals_numpy(self):
    confusion = np.array([[5, 1, 0], [2, 7, 0], [0, 0, 0]])
    record = results.record_from_confusion(confusion, ['bg', 'cat', 'absent'],
                                           3, global_step=np.int64(40))
    # IoU = tp / (row + column - tp); 'absent' has no pixels at all.
    self.assertEqual(record['global_step'], 40)
    self.assertEqual(record['num_images'], 3)
    self.assertAllClose(record['per_class_iou']['bg'], 5 / 8)
    self.assertAllClose(record['per_class_iou']['cat'], 7 / 10)
    self.assertIsNone(record['per_class_iou']['absent'])
    self.assertAllClose(record['mean_iou'], (5 / 8 + 7 / 10) / 2)
    self.assertAllClose(record['pixel_accuracy'], 12 / 15)
    json.dumps(record)  # JSON-serializable.

  def test_both_records_share_one_shape(self):
    from_eval = results.make_record(_RESULT, 'ckpt')
    from_confusion = results.record_from_confusion(np.eye(3), ['a', 'b', 'c'],
                                                   2)
    self.assertEqual(set(from_eval) - set(from_confusion),
                     {'checkpoint', 'loss', 'weights'})
    self.assertEqual(set(from_confusion) - set(from_eval), set())
    self.assertIsNone(from_confusion['global_step'])
    self.assertIn('step None (2 images)', results.format_table(from_confusion))

  def test_append_and_read_whole_lines(self):
    eval_dir = os.path.join(self.create_tempdir().full_path, 'eval')
    for step in (10, 20):
      results.append_record(eval_dir, dict(
          results.make_record(_RESULT, 'ckpt'), global_step=step))
    with open(os.path.join(eval_dir, results.METRICS_FILE)) as f:
      lines = f.read().splitlines()
    self.assertLen(lines, 2)
    self.assertEqual([json.loads(line)['global_step'] for line in lines], [10, 20])
    self.assertEqual([r['global_step'] for r in results.read_records(eval_dir)],
                     [10, 20])

  def test_line_cut_by_a_crash_is_skipped_and_never_glued(self):
    eval_dir = self.create_tempdir().full_path
    results.append_record(eval_dir, {'global_step': 10})
    with open(os.path.join(eval_dir, results.METRICS_FILE), 'a') as f:
      f.write('{"global_step": 20, "mean_i')  # A write cut short.
    results.append_record(eval_dir, {'global_step': 30})
    with self.assertLogs(level='WARNING') as logs:
      steps = [r['global_step'] for r in results.read_records(eval_dir)]
    self.assertEqual(steps, [10, 30])
    self.assertIn('incomplete line 2', '\n'.join(logs.output))

  def test_table_lists_every_class(self):
    table = results.format_table(results.make_record(_RESULT, 'ckpt'))
    self.assertIn('step 40', table)
    self.assertRegex(table, r'cat\s+0\.4000')
    self.assertRegex(table, r'absent\s+n/a')
    self.assertRegex(table, r'mean IoU\s+0\.6000')
    self.assertRegex(table, r'pixel accuracy\s+0\.9000')


if __name__ == '__main__':
  tf.test.main()

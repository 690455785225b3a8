"""Tests for evaluation records, the metrics.jsonl view and the per-class IoU table."""

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

  def _write(self, eval_dir, *steps):
    for step in steps:
      results.write_record(eval_dir, dict(
          results.make_record(_RESULT, f'ckpt-{step}'), global_step=step))

  def test_records_out_of_order_are_read_and_viewed_in_step_order(self):
    eval_dir = os.path.join(self.create_tempdir().full_path, 'eval')
    self._write(eval_dir, 20, 10, 0)  # Step 0 last, as after train_and_eval.
    self.assertEqual(
        sorted(os.listdir(os.path.join(eval_dir, results.RECORDS_DIR))),
        ['step-000000000000.json', 'step-000000000010.json',
         'step-000000000020.json'])
    with open(os.path.join(eval_dir, results.METRICS_FILE)) as f:
      lines = f.read().splitlines()
    self.assertEqual([json.loads(line)['global_step'] for line in lines],
                     [0, 10, 20])
    self.assertEqual([json.loads(line)['checkpoint'] for line in lines],
                     ['ckpt-0', 'ckpt-10', 'ckpt-20'])
    self.assertEqual([r['global_step'] for r in results.read_records(eval_dir)],
                     [0, 10, 20])
    # Whole-file writes leave no temporary file behind.
    self.assertEqual(sorted(os.listdir(eval_dir)),
                     [results.METRICS_FILE, results.RECORDS_DIR])

  def test_a_step_written_twice_keeps_one_record(self):
    eval_dir = self.create_tempdir().full_path
    self._write(eval_dir, 10)
    results.write_record(eval_dir, {'global_step': 10, 'mean_iou': 0.5})
    self.assertEqual(results.read_records(eval_dir),
                     [{'global_step': 10, 'mean_iou': 0.5}])

  def test_record_file_cut_by_a_crash_is_skipped(self):
    eval_dir = self.create_tempdir().full_path
    self._write(eval_dir, 10)
    with open(results.record_path(eval_dir, 20), 'w') as f:
      f.write('{"global_step": 20, "mean_i')  # A write cut short.
    self._write(eval_dir, 30)
    with self.assertLogs(level='WARNING') as logs:
      steps = [r['global_step'] for r in results.read_records(eval_dir)]
    self.assertEqual(steps, [10, 30])
    self.assertIn('incomplete record', '\n'.join(logs.output))
    self.assertIn('step-000000000020.json', '\n'.join(logs.output))

  def test_metrics_jsonl_of_an_older_version_is_read_and_kept(self):
    eval_dir = self.create_tempdir().full_path
    with open(os.path.join(eval_dir, results.METRICS_FILE), 'w') as f:
      f.write('{"global_step": 20}\n{"global_step": 5}\n'
              '{"global_step": 30, "mean_i\n')  # Appended; the last cut.
    with self.assertLogs(level='WARNING') as logs:
      self.assertEqual(results.read_records(eval_dir),
                       [{'global_step': 5}, {'global_step': 20}])
    self.assertIn('line 3 of', '\n'.join(logs.output))
    results.write_record(eval_dir, {'global_step': 10})
    with open(os.path.join(eval_dir, results.METRICS_FILE)) as f:
      self.assertEqual([json.loads(line) for line in f],
                       [{'global_step': 5}, {'global_step': 10},
                        {'global_step': 20}])

  def test_nothing_recorded_reads_empty(self):
    self.assertEqual(results.read_records(
        os.path.join(self.create_tempdir().full_path, 'eval')), [])

  def test_table_lists_every_class(self):
    table = results.format_table(results.make_record(_RESULT, 'ckpt'))
    self.assertIn('step 40', table)
    self.assertRegex(table, r'cat\s+0\.4000')
    self.assertRegex(table, r'absent\s+n/a')
    self.assertRegex(table, r'mean IoU\s+0\.6000')
    self.assertRegex(table, r'pixel accuracy\s+0\.9000')


if __name__ == '__main__':
  tf.test.main()

"""Tests for evaluation records, the metrics.jsonl view, the scores table and its warning."""

import json
import os
import re

import numpy as np
import tensorflow as tf

from official_seg.evaluation import metrics
from official_seg.evaluation import results
from official_seg.runtime import gin_config

_NAMES = ['background', 'cat', 'absent']
# 'cat' is labelled (row 1) but never predicted (column 1).
_CONFUSION = np.array([[8, 0, 0], [3, 0, 0], [0, 0, 0]], np.float64)


def _summary(matrix):
  """The serialized tensor Summary the evaluator returns for the matrix."""
  return tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
      tag=metrics.CONFUSION_MATRIX,
      tensor=tf.make_tensor_proto(matrix))]).SerializeToString()


def _eval_result():
  """An eval result as the evaluator's metrics name them; 'absent' is NaN."""
  per_class = {'iou': (0.8, 0.4), 'dice': (0.85, 0.5),
               'precision': (0.9, 0.6), 'recall': (0.7, 0.3),
               'boundary_iou': (0.65, 0.25)}
  result = {'global_step': np.int64(40), 'loss': np.float32(0.5),
            'num_images': np.float64(7.0), 'pixel_accuracy': np.float64(0.9),
            'frequency_weighted_iou': np.float64(0.75),
            metrics.CONFUSION_MATRIX: _summary(_CONFUSION)}
  for score, (background, cat) in per_class.items():
    result[f'mean_{score}'] = np.float64((background + cat) / 2)
    result[f'{score}/background'] = np.float64(background)
    result[f'{score}/cat'] = np.float64(cat)
    result[f'{score}/absent'] = np.float64(np.nan)
  return result


_RESULT = _eval_result()


class ResultsTest(tf.test.TestCase):

  def test_record_fields(self):
    record = results.make_record(dict(_RESULT, boundary_tolerance=3),
                                 '/m/model.ckpt-40')
    self.assertEqual(record['global_step'], 40)
    self.assertEqual(record['checkpoint'], '/m/model.ckpt-40')
    self.assertEqual(record['num_images'], 7)
    self.assertEqual(record['per_class_iou'],
                     {'background': 0.8, 'cat': 0.4, 'absent': None})
    self.assertEqual(record['per_class_dice'],
                     {'background': 0.85, 'cat': 0.5, 'absent': None})
    self.assertEqual(record['per_class_precision']['cat'], 0.6)
    self.assertEqual(record['per_class_recall']['cat'], 0.3)
    self.assertEqual(record['per_class_boundary_iou'],
                     {'background': 0.65, 'cat': 0.25, 'absent': None})
    self.assertAllClose([record['mean_iou'], record['mean_dice'],
                         record['mean_precision'], record['mean_recall'],
                         record['mean_boundary_iou']],
                        [0.6, 0.675, 0.75, 0.5, 0.45])
    self.assertEqual(record['frequency_weighted_iou'], 0.75)
    self.assertEqual(record['pixel_accuracy'], 0.9)
    self.assertEqual(record['boundary_tolerance'], 3)
    self.assertEqual(record['never_predicted'], ['cat'])
    self.assertAllClose(record['loss'], 0.5)
    self.assertEqual(record['weights'], 'raw')
    json.dumps(record)  # JSON-serializable.

  def test_record_and_table_hold_the_calibration_error(self):
    self.assertNotIn(metrics.EXPECTED_CALIBRATION_ERROR,
                     results.make_record(_RESULT, 'ckpt'))
    record = results.make_record(
        dict(_RESULT, expected_calibration_error=np.float64(0.0625)), 'ckpt')
    self.assertEqual(record['expected_calibration_error'], 0.0625)
    self.assertIn('\nexpected calibration error 0.0625 (15 confidence bins)',
                  results.format_table(record))
    self.assertIn('(15 confidence bins, temperature 1.5000)',
                  results.format_table(dict(record, temperature=1.5)))

  def test_record_says_which_weights_were_scored(self):
    record = results.make_record(dict(_RESULT, weights='moving_average'),
                                 'ckpt')
    self.assertEqual(record['weights'], 'moving_average')

  def test_record_from_confusion_equals_numpy(self):
    confusion = np.array([[5, 1, 0], [2, 7, 0], [0, 0, 0]])
    bands = np.array([[3, 6], [1, 4], [0, 0]])
    record = results.record_from_confusion(confusion, bands,
                                           ['bg', 'cat', 'absent'], 3, 2,
                                           global_step=np.int64(40))
    # IoU = tp / (row + column - tp); 'absent' has no pixels at all.
    self.assertEqual(record['global_step'], 40)
    self.assertEqual(record['num_images'], 3)
    self.assertAllClose(record['per_class_iou']['bg'], 5 / 8)
    self.assertAllClose(record['per_class_iou']['cat'], 7 / 10)
    self.assertIsNone(record['per_class_iou']['absent'])
    self.assertAllClose(record['mean_iou'], (5 / 8 + 7 / 10) / 2)
    self.assertAllClose(record['pixel_accuracy'], 12 / 15)
    # Dice = 2 tp / (row + column); precision tp / column; recall tp / row.
    self.assertAllClose(record['per_class_dice']['bg'], 10 / 13)
    self.assertAllClose(record['mean_dice'], (10 / 13 + 14 / 17) / 2)
    self.assertAllClose(record['per_class_precision']['cat'], 7 / 8)
    self.assertAllClose(record['mean_recall'], (5 / 6 + 7 / 9) / 2)
    self.assertAllClose(record['per_class_boundary_iou']['bg'], 3 / 6)
    self.assertAllClose(record['mean_boundary_iou'], (3 / 6 + 1 / 4) / 2)
    self.assertIsNone(record['per_class_boundary_iou']['absent'])
    # Rows of 6 and 9 labelled pixels weigh the IoUs.
    self.assertAllClose(record['frequency_weighted_iou'],
                        (6 * 5 / 8 + 9 * 7 / 10) / 15)
    self.assertEqual(record['boundary_tolerance'], 2)
    self.assertEqual(record['never_predicted'], [])
    json.dumps(record)  # JSON-serializable.

  def test_both_records_share_one_shape(self):
    from_eval = results.make_record(_RESULT, 'ckpt')
    from_confusion = results.record_from_confusion(
        np.eye(3), np.ones((3, 2)), ['a', 'b', 'c'], 2, 3)
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

  def test_table_lists_every_class_and_score(self):
    table = results.format_table(
        results.make_record(dict(_RESULT, boundary_tolerance=3), 'ckpt'))
    self.assertIn('step 40', table)
    self.assertRegex(table, r'class\s+IoU\s+Dice/F1\s+precision\s+recall\s+'
                     r'boundary IoU\n')
    self.assertRegex(table, r'\ncat\s+0\.4000\s+0\.5000\s+0\.6000\s+'
                     r'0\.3000\s+0\.2500\n')
    self.assertRegex(table, r'\nabsent(\s+n/a){5}\n')
    self.assertRegex(table, r'\nmean over classes\s+0\.6000\s+0\.6750\s+'
                     r'0\.7500\s+0\.5000\s+0\.4500\n')
    self.assertRegex(table, r'mean IoU\s+0\.6000')
    self.assertRegex(table, r'frequency-weighted IoU\s+0\.7500')
    self.assertRegex(table, r'pixel accuracy\s+0\.9000')
    self.assertIn('at most 3 px from a contour', table)
    self.assertLess(max(len(line) for line in table.splitlines()), 80)

  def test_an_earlier_record_reads_back_and_prints_its_iou(self):
    eval_dir = self.create_tempdir().full_path
    earlier = {'global_step': 10, 'mean_iou': 0.5, 'pixel_accuracy': 0.8,
               'per_class_iou': {'background': 0.6, 'cat': 0.4},
               'num_images': 2, 'checkpoint': 'ckpt-10', 'loss': 1.0,
               'weights': 'raw'}
    results.write_record(eval_dir, earlier)
    [record] = results.read_records(eval_dir)
    self.assertEqual(record, earlier)
    table = results.format_table(record)
    self.assertRegex(table, r'class\s+IoU\n')
    self.assertRegex(table, r'\ncat\s+0\.4000\n')
    self.assertRegex(table, r'mean IoU\s+0\.5000')
    self.assertNotIn('Dice', table)
    with self.assertNoLogs(tf.get_logger(), level='WARNING'):
      results.warn_never_predicted(record)

  def test_classes_never_predicted_are_named_in_one_warning(self):
    confusion = np.array([[6, 0, 0, 0], [2, 0, 0, 0], [1, 0, 3, 0],
                          [0, 0, 0, 0]])
    record = results.record_from_confusion(
        confusion, np.zeros((4, 2)), ['road', 'bike', 'car', 'boat'], 5, 3,
        global_step=7)
    self.assertEqual(record['never_predicted'], ['bike'])
    with self.assertLogs(tf.get_logger(), level='WARNING') as logs:
      results.warn_never_predicted(record)
    self.assertLen(logs.records, 1)
    line = logs.output[0]
    self.assertStartsWith(line, 'WARNING:')
    self.assertIn('Never predicted in the 5 images evaluated at step 7', line)
    self.assertIn(': bike.', line)
    self.assertIn('class weights', line)
    self.assertIn('region loss', line)
    # The gin file it names ships.
    named = re.search(r'--gin_file=gin/(\S+\.gin)', line).group(1)
    self.assertTrue(os.path.exists(os.path.join(gin_config.gin_dir(), named)))
    self.assertIn('crops that hold these classes', line)
    # 'boat' is neither labelled nor predicted: nothing to warn about.
    self.assertNotIn('boat', line)

  def test_every_class_predicted_warns_nothing(self):
    record = results.record_from_confusion(np.eye(3), np.ones((3, 2)),
                                           ['a', 'b', 'c'], 1, 3)
    with self.assertNoLogs(tf.get_logger(), level='WARNING'):
      results.warn_never_predicted(record)

  def test_report_warns_once_per_evaluation(self):
    eval_dir = self.create_tempdir().full_path
    with self.assertLogs(tf.get_logger(), level='INFO') as logs:
      record = results.report(eval_dir, _RESULT, 'ckpt-40', _NAMES)
    warnings = [r for r in logs.records if r.levelname == 'WARNING']
    self.assertLen(warnings, 1)
    self.assertIn(': cat.', warnings[0].getMessage())
    self.assertEqual(results.read_records(eval_dir), [record])
    with open(os.path.join(eval_dir, 'confusion_matrix-40.json')) as f:
      self.assertEqual(json.load(f)['matrix'], _CONFUSION.tolist())


if __name__ == '__main__':
  tf.test.main()

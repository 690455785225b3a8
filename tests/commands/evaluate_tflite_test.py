"""evaluate_tflite on tiny shards, with a stand-in .tflite."""

import json
import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.commands import evaluate_tflite
from official_seg.datasets import convert
from official_seg.runtime import gin_config
from tests import testing_utils
from tests.commands import command_testing


class EvaluateTfliteToolTest(testing_utils.TinyDataTestCase,
                             parameterized.TestCase):

  def test_reports_the_numpy_mean_iou_latency_and_size(self):
    root = self.create_tempdir().full_path
    model = os.path.join(root, 'model_int8.tflite')
    testing_utils.write_stand_in_tflite(model, (41, 41), {'global_step': 3})
    output = os.path.join(root, 'record.json')
    result = command_testing.run(
        evaluate_tflite, tflite=model, gin_file=['experiments/quickstart.gin'],
        gin_param=[f"DATA_DIR = '{self.data_dir}'",
                   # The run's evaluator setting reaches the table.
                   'ModelFnOptions.boundary_tolerance = 2'], output=output,
        num_threads=1)
    self.assertEqual(result.status, 0, result.stderr)
    expected = testing_utils.stand_in_confusion(self.data_dir, 'val')
    union = expected.sum(0) + expected.sum(1) - np.diag(expected)
    present = union > 0
    self.assertGreater(present.sum(), 1, 'a vacuous comparison')
    mean_iou = (np.diag(expected)[present] / union[present]).mean()
    with open(output) as f:
      record = json.load(f)
    self.assertAllClose(record['mean_iou'], mean_iou)
    self.assertEqual(record['num_images'], self.num_val)
    self.assertEqual(record['model_bytes'], os.path.getsize(model))
    self.assertEqual(record['boundary_tolerance'], 2)
    printed = result.stdout
    self.assertIn('at most 2 px from a contour', printed)
    self.assertRegex(printed, rf'mean IoU\s+{mean_iou:.4f}')
    self.assertIn(f'model size: {os.path.getsize(model)} bytes', printed)
    self.assertRegex(printed, r'latency: \d+\.\d\d ms per image')

  def test_the_converters_dataset_file_alone_is_enough(self):
    root = self.create_tempdir().full_path
    model = os.path.join(root, 'model_int8.tflite')
    testing_utils.write_stand_in_tflite(model, (41, 41))
    info = gin_config.read_dataset(['experiments/quickstart.gin'],
                                   [f"DATA_DIR = '{self.data_dir}'"])
    dataset_gin = convert.write_dataset_gin(
        convert.classes_of(info, 'the tiny shards'), self.data_dir)
    gin.clear_config()
    result = command_testing.run(evaluate_tflite, tflite=model,
                                 gin_file=[dataset_gin], num_threads=1)
    self.assertEqual(result.status, 0, result.stderr)
    expected = testing_utils.stand_in_confusion(self.data_dir, 'val')
    union = expected.sum(0) + expected.sum(1) - np.diag(expected)
    present = union > 0
    mean_iou = (np.diag(expected)[present] / union[present]).mean()
    self.assertRegex(result.stdout, rf'mean IoU\s+{mean_iou:.4f}')

  @parameterized.named_parameters(
      ('model_missing', dict(tflite='{root}/nope.tflite'),
       '--tflite={root}/nope.tflite: no such file.'),
      ('model_a_folder', dict(tflite='{root}'),
       '--tflite={root} is a folder, not a file.'),
      ('output_a_folder', dict(output='{root}'),
       '--output={root} is a folder; give a file to write.'),
      ('output_under_a_file', dict(output='{model}/record.json'),
       '--output={model}/record.json cannot be created: {model} is a '
       'file.'),
      ('gin_file_missing', dict(gin_file=['experiments/quickstrat.gin']),
       "gin file 'experiments/quickstrat.gin' not found"),
      ('data_dir_without_shards', dict(gin_param=["DATA_DIR = '{root}'"]),
       "No TFRecord shards match '{root}/val-?????-of-?????.tfrecord'"))
  def test_a_mistake_is_one_line_and_exit_2(self, changed, message):
    root = self.create_tempdir().full_path
    model = os.path.join(root, 'model_int8.tflite')
    testing_utils.write_stand_in_tflite(model, (41, 41))
    output = os.path.join(root, 'record.json')
    flags = dict(tflite=model, gin_file=['experiments/quickstart.gin'],
                 gin_param=[f"DATA_DIR = '{self.data_dir}'"],
                 output=output, num_threads=1)
    for name, value in changed.items():
      flags[name] = ([v.format(root=root) for v in value]
                     if isinstance(value, list)
                     else value.format(root=root, model=model))
    result = command_testing.run(evaluate_tflite, **flags)
    self.assertEqual(result.status, 2)
    lines = result.stderr.splitlines()
    self.assertLen(lines, 2, result.stderr)
    self.assertEqual(lines[0], 'Invalid configuration:')
    self.assertStartsWith(lines[1], message.format(root=root, model=model))
    self.assertFalse(os.path.exists(output))


if __name__ == '__main__':
  tf.test.main()

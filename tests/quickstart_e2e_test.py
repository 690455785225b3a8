"""The shipped quickstart model and session config through every mode of the binary."""

import glob
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from official_seg.data import tfexample
from official_seg.export import predictor
from official_seg.export import tflite
from official_seg.export import tflite_runner
from tests import testing_utils

# Only the data, the length of the run and its sizes are bound: the model
# (MobileNetV2 at 0.35, output stride 8, DeepLabV3+ head), the session
# config (grappler's rewrites, the graph file), the exports and the
# evaluation are the shipped experiment's.
_STEPS = 4
_CLASSES = ['background', 'disk', 'box', 'triangle']
# tests/export/tflite_test.py's least share of float32 pixels that label as
# the SavedModel does (kernels of another summation order flip near-ties).
_FLOAT32_AGREEMENT = 0.99
# Largest difference of a float32 .tflite's class probabilities from the
# SavedModel's: float32 rounding in kernels of another summation order.
_FLOAT32_TOLERANCE = 1e-3


def _bindings(data_dir):
  return [
      f"DATA_DIR = '{data_dir}'",
      f'TRAIN_STEPS = {_STEPS}',
      'CROP_SIZE = [33, 33]',
      'EVAL_CROP_SIZE = [41, 41]',
      'TRAIN_BATCH_SIZE = 2',
      'EVAL_BATCH_SIZE = 2',
      # One evaluation (and SavedModel export) at the last step; checkpoints
      # 0 and the last kept.
      f'build_run_config.save_checkpoints_steps = {_STEPS}',
      # A model of a few steps labels every pixel background, which would
      # make a comparison of labels vacuous: the .tflite also outputs the
      # probabilities of every class, which are compared.
      'tflite_export.probabilities = True',
  ]


def _val_images(data_dir):
  """The encoded images of the val split, in shard order."""
  files = sorted(glob.glob(tfexample.shard_pattern(data_dir, 'val')))
  return [tf.train.Example.FromString(record.numpy()).features.feature[
      tfexample.IMAGE_ENCODED].bytes_list.value[0]
          for record in tf.data.TFRecordDataset(files)]


def _exports(model_dir, exporter):
  """The SavedModels of train_and_eval's `exporter`, oldest first."""
  found = glob.glob(os.path.join(model_dir, 'export', exporter, '*',
                                 'saved_model.pb'))
  return sorted((os.path.dirname(path) for path in found),
                key=lambda path: int(os.path.basename(path)))


class QuickstartEndToEndTest(tf.test.TestCase):
  """One model dir: train_and_eval, then the other modes on it, in order."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(prefix='quickstart_e2e_')
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=8, num_val=5)
    cls.model_dir = os.path.join(cls.root, 'model')
    cls.runs = {}
    for mode in ('train_and_eval', 'eval', 'continuous_eval', 'export',
                 'export_tflite'):
      cls.runs[mode] = testing_utils.run_binary(
          cls.model_dir, _bindings(cls.data_dir), mode)
      if mode == 'train_and_eval':
        cls.records_after_training = testing_utils.eval_records(cls.model_dir)
      if cls.runs[mode].returncode:
        break
    cls.images = _val_images(cls.data_dir)
    exports = glob.glob(os.path.join(cls.model_dir, 'export', '[0-9]*'))
    # --mode=export's SavedModel, loaded once for the export and TFLite tests.
    cls.exported = (predictor.Predictor(exports[0]) if len(exports) == 1
                    else None)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _succeeded(self, mode):
    self.assertIn(mode, self.runs, 'an earlier mode failed')
    proc = self.runs[mode]
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    return proc

  def test_train_and_eval_records_the_last_checkpoint_with_per_class_iou(self):
    proc = self._succeeded('train_and_eval')
    self.assertEqual(tf.train.latest_checkpoint(self.model_dir),
                     os.path.join(self.model_dir, f'model.ckpt-{_STEPS}'))
    record, = self.records_after_training
    # The untrained step-0 checkpoint is not evaluated.
    self.assertEqual(record['global_step'], _STEPS)
    self.assertEqual(record['num_images'], 5)
    self.assertCountEqual(record['per_class_iou'], _CLASSES)
    for key in ('mean_iou', 'pixel_accuracy', 'loss'):
      self.assertIsInstance(record[key], float)
    self.assertTrue(record['checkpoint'].endswith(f'model.ckpt-{_STEPS}'))
    self.assertEqual(
        os.listdir(os.path.join(self.model_dir, 'eval', 'records')),
        [f'step-{_STEPS:012d}.json'])
    self.assertIn('mean IoU', proc.stdout)
    self.assertIn('triangle', proc.stdout)
    # The shipped session config writes the graph file.
    self.assertTrue(os.path.exists(os.path.join(self.model_dir,
                                                'graph.pbtxt')))
    operative = open(glob.glob(os.path.join(
        self.model_dir, 'operative_config-*.gin'))[0]).read()
    self.assertIn("MobileNet.model_id = 'MobileNetV2'", operative)
    self.assertIn(f"'{self.data_dir}'", operative)
    # export/latest/ after the evaluation; export/best/ after the new best.
    for exporter in ('latest', 'best'):
      self.assertLen(_exports(self.model_dir, exporter), 1)

  def test_eval_evaluates_the_latest_checkpoint_and_records_no_step_twice(self):
    proc = self._succeeded('eval')
    self.assertIn(f'Evaluation at step {_STEPS}', proc.stdout)
    self.assertIn('triangle', proc.stdout)
    self.assertEqual(
        [r['global_step'] for r in testing_utils.eval_records(self.model_dir)],
        [_STEPS])

  def test_continuous_eval_after_the_last_step_exits_at_once(self):
    proc = self._succeeded('continuous_eval')
    self.assertIn(f'Step {_STEPS} is already evaluated; nothing to do',
                  proc.stderr)
    self.assertEqual(
        [r['global_step'] for r in testing_utils.eval_records(self.model_dir)],
        [_STEPS])

  def test_export_labels_as_the_train_and_eval_export(self):
    self._succeeded('export')
    self.assertIsNotNone(self.exported, 'not one export/<timestamp>/')
    self.assertEqual(self.exported.global_step, _STEPS)
    latest = predictor.Predictor(_exports(self.model_dir, 'latest')[-1])
    self.assertEqual(latest.global_step, _STEPS)
    for encoded in self.images:
      labels = self.exported(encoded)
      image = tf.io.decode_image(encoded).numpy()
      self.assertEqual(labels.shape, image.shape[:2])
      self.assertAllInSet(np.unique(labels), range(len(_CLASSES)))
      # One checkpoint, two exports: the same labels.
      self.assertAllEqual(labels, latest(encoded))

  def test_export_tflite_runs_in_the_interpreter_as_the_saved_model(self):
    self._succeeded('export_tflite')
    path = tflite.tflite_path(self.model_dir, 'float32')
    model = tflite_runner.TfliteModel(path, num_threads=1)
    self.assertEqual(model.input_size, (41, 41))  # EVAL_CROP_SIZE.
    self.assertIsNotNone(self.exported, 'not one export/<timestamp>/')
    same = total = 0
    for encoded in self.images:
      expected = self.exported(encoded)
      labels = model(encoded)
      self.assertEqual(labels.shape, expected.shape)
      same += (labels == expected).sum()
      total += expected.size
      fitted, size = tflite_runner.fit_image(
          tf.io.decode_image(encoded).numpy(), model.input_size)
      ours = model.run_probabilities(fitted, size)[:size[0], :size[1]]
      served = self.exported.probabilities(encoded)[:size[0], :size[1]]
      self.assertEqual(ours.shape, served.shape)
      self.assertGreater(served.std(), 0.01, 'a vacuous comparison')
      self.assertAllClose(ours, served, atol=_FLOAT32_TOLERANCE, rtol=0)
    self.assertGreaterEqual(same / total, _FLOAT32_AGREEMENT)

if __name__ == '__main__':
  tf.test.main()

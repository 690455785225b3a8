"""TFLite export: each kind against the SavedModel, metadata, bad input."""

import glob
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import tfexample
from official_seg.export import predictor
from official_seg.export import tflite
from official_seg.export import tflite_runner
from official_seg.runtime import config_checks
from official_seg.runtime import experiment
from tests import testing_utils

# A learning rate of 0 keeps the seeded initial weights, whose label maps mix
# classes (as in saved_model_test), so a wrong preprocessing shows.
_EXTRA = ['BASE_LEARNING_RATE = 0.0', 'train/build_dataset.seed = 1']
_KINDS = ['float32', 'float16', 'dynamic_range', 'int8', 'int8_per_tensor']
# Least share of pixels whose label equals the float SavedModel's. On these
# untrained weights the classes' logits lie close together, so a pixel
# flips whenever rounding moves its logits by more than their margin (a
# trained model has wider margins). float32 and float16 (computed in
# float32) differ from TensorFlow only by other kernels' summation order
# (XNNPACK): 1% of pixels leaves room for those near-ties. dynamic_range
# rounds weights to 8 bits (2%); int8 also activations (5%), and
# int8_per_tensor rounds each kernel to one scale (the same 5% on these
# weights; a trained model's accuracy is measured in docs/deployment.md).
# qat_int8 needs a quantization-aware checkpoint:
# tests/modeling/quantized_test.py.
_AGREEMENT = {'float32': 0.99, 'float16': 0.99, 'dynamic_range': 0.98,
              'int8': 0.95, 'int8_per_tensor': 0.95}


class TfliteExportTest(tf.test.TestCase):
  """One tiny model, trained once, exported as a SavedModel and as TFLite."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=4, num_val=5,
                                     num_shards=1)
    cls.model_dir = os.path.join(cls.root, 'model')
    testing_utils.parse_tiny_quickstart(
        cls.data_dir, train_steps=1,
        extra=_EXTRA + [f'tflite_export.kinds = {_KINDS}'])
    tf.keras.utils.set_random_seed(2)
    experiment.run('train', cls.model_dir)
    experiment.run('export', cls.model_dir)
    experiment.run('export_tflite', cls.model_dir)
    cls.saved = predictor.Predictor(predictor.find_saved_model(cls.model_dir))
    files = glob.glob(tfexample.shard_pattern(cls.data_dir, 'val'))
    cls.encoded = [
        tf.train.Example.FromString(record.numpy()).features.feature[
            tfexample.IMAGE_ENCODED].bytes_list.value[0]
        for record in tf.data.TFRecordDataset(files)]
    cls.expected = [cls.saved(encoded) for encoded in cls.encoded]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=1,
                                        extra=_EXTRA)

  def _agreement(self, path):
    model = tflite_runner.TfliteModel(path, num_threads=1)
    self.assertEqual(model.input_size, (41, 41))  # EVAL_CROP_SIZE.
    same = total = 0
    for encoded, expected in zip(self.encoded, self.expected):
      labels = model(encoded)
      self.assertEqual(labels.shape, expected.shape)
      same += (labels == expected).sum()
      total += expected.size
    return same / total

  def test_each_kind_labels_as_the_saved_model(self):
    classes = set(np.unique(np.concatenate(
        [e.ravel() for e in self.expected])))
    self.assertGreater(len(classes), 1, 'a vacuous comparison')
    for kind in _KINDS:
      path = tflite.tflite_path(self.model_dir, kind)
      self.assertEqual(path, os.path.join(self.model_dir, 'export', 'tflite',
                                          f'model_{kind}.tflite'))
      self.assertGreaterEqual(self._agreement(path), _AGREEMENT[kind], kind)

  def test_quantized_sizes_and_metadata(self):
    sizes = {kind: os.path.getsize(tflite.tflite_path(self.model_dir, kind))
             for kind in _KINDS}
    self.assertLess(sizes['float16'], sizes['float32'])
    self.assertLess(sizes['int8'], sizes['float32'])
    metadata = tflite_runner.read_metadata(
        tflite.tflite_path(self.model_dir, 'int8'))
    self.assertEqual(metadata['class_names'],
                     ['background', 'disk', 'box', 'triangle'])
    self.assertEqual(metadata['global_step'], 1)
    self.assertEqual(metadata['resize_range'], [None, None, None])

  def _scale_counts(self, kind):
    interpreter = tf.lite.Interpreter(
        model_path=tflite.tflite_path(self.model_dir, kind))
    return [len(d['quantization_parameters']['scales'])
            for d in interpreter.get_tensor_details()
            if d['dtype'] == np.int8]

  def test_int8_per_tensor_has_one_scale_per_tensor(self):
    per_channel = self._scale_counts('int8')
    per_tensor = self._scale_counts('int8_per_tensor')
    self.assertGreater(max(per_channel), 1)
    self.assertEqual(set(per_tensor), {1})
    self.assertLen(per_tensor, len(per_channel))
    self.assertLess(
        os.path.getsize(tflite.tflite_path(self.model_dir, 'int8_per_tensor')),
        os.path.getsize(tflite.tflite_path(self.model_dir, 'int8')))

  def test_bad_kinds_name_the_binding_on_one_line(self):
    for kinds, expected in (
        (['float32', 'int4'], r"tflite_export.kinds has unknown kinds \['int4'"),
        (['qat_int8'], r"tflite_export.kinds asks for 'qat_int8', but the "
         r'model is not quantization-aware trained')):
      testing_utils.parse_tiny_quickstart(
          self.data_dir, train_steps=1,
          extra=_EXTRA + [f'tflite_export.kinds = {kinds}'])
      with self.assertRaisesRegex(config_checks.ConfigurationError,
                                  expected) as caught:
        experiment.run('export_tflite', self.model_dir)
      # The binary prints the message before gin's call trace.
      message = str(caught.exception).split('\n  In call to configurable')[0]
      self.assertNotIn('\n', message)

  def test_no_checkpoint_names_the_model_dir(self):
    empty = self.create_tempdir().full_path
    with self.assertRaisesRegex(validation.MissingFileError,
                                f'No checkpoint to export in {empty};'):
      experiment.run('export_tflite', empty)


if __name__ == '__main__':
  tf.test.main()

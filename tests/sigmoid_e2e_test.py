"""Overlapping class masks through build_tfrecords, train_and_eval, export and predict_images."""

import json
import os
import shutil
import tempfile

import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg import validation
from official_seg.commands import build_tfrecords
from official_seg.commands import predict_images
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from tests import testing_utils
from tests.commands import command_testing

CLASSES = ('left', 'top')
SPLITS = {'train': 4, 'val': 2}


def write_class_mask_folders(root, splits=None):
  """Images and one 0/255 mask per class: 'left' its left half, 'top' its top.

  The two overlap in the top-left quarter. Returns {stem: (image, {class:
  mask})}.
  """
  rng = np.random.default_rng(0)
  written = {}
  os.makedirs(os.path.join(root, 'images'))
  os.makedirs(os.path.join(root, 'lists'))
  for name in CLASSES:
    os.makedirs(os.path.join(root, 'masks', name))
  for split, count in (splits or SPLITS).items():
    stems = [f'{split}{i}' for i in range(count)]
    with open(os.path.join(root, 'lists', f'{split}.txt'), 'w') as f:
      f.write('\n'.join(stems) + '\n')
    for stem in stems:
      height, width = rng.integers(24, 33, size=2)
      image = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
      masks = {'left': np.zeros((height, width), np.uint8),
               'top': np.zeros((height, width), np.uint8)}
      masks['left'][:, :width // 2] = 255
      masks['top'][:height // 2] = 255
      image[masks['left'] > 0, 0] = 255
      Image.fromarray(image).save(os.path.join(root, 'images', stem + '.png'))
      for name, mask in masks.items():
        Image.fromarray(mask).save(
            os.path.join(root, 'masks', name, stem + '.png'))
      written[stem] = (image, masks)
  return written


class SigmoidEndToEndTest(tf.test.TestCase):
  """One tiny model: converted class masks, trained, evaluated, exported."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.written = write_class_mask_folders(os.path.join(cls.root, 'raw'))
    cls.data_dir = os.path.join(cls.root, 'data')
    cls.convert = command_testing.run(
        build_tfrecords, layout='folders',
        image_dir=os.path.join(cls.root, 'raw', 'images'),
        label_dir=os.path.join(cls.root, 'raw', 'masks'),
        split_list_dir=os.path.join(cls.root, 'raw', 'lists'),
        class_masks=True, output_dir=cls.data_dir, num_workers=1)
    cls._parse()
    cls.model_dir = os.path.join(cls.root, 'model')
    experiment.run('train_and_eval', cls.model_dir)
    experiment.run('export', cls.model_dir)
    gin.clear_config()

  @classmethod
  def _parse(cls):
    gin.clear_config()
    gin_config.parse(
        ['experiments/quickstart.gin',
         os.path.join(cls.data_dir, 'dataset.gin')],
        testing_utils.tiny_bindings(
            cls.data_dir, train_steps=2,
            extra=['OutputKind.thresholds = [0.5, 0.4]']))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_conversion_writes_bit_mask_labels_and_a_sigmoid_dataset(self):
    self.assertEqual(self.convert.status, 0, self.convert.stderr)
    with open(os.path.join(self.data_dir, 'dataset.gin')) as f:
      text = f.read()
    self.assertIn('NUM_CLASSES = 2', text)
    self.assertIn("CLASS_NAMES = ['left', 'top']", text)
    self.assertIn("include 'heads/sigmoid.gin'", text)
    labels = testing_utils.shard_image_labels(self.data_dir, 'train')
    # Bit 0 left, bit 1 top: 3 top-left, 1 bottom-left, 2 top-right, 0.
    for name, values in labels.items():
      self.assertEqual(values, [0, 1, 2, 3], name)

  def test_evaluation_records_each_class_at_its_threshold(self):
    record = testing_utils.eval_records(self.model_dir)[-1]
    self.assertEqual(record['num_images'], SPLITS['val'])
    self.assertCountEqual(record['per_class_iou'], CLASSES)
    ious = [v for v in record['per_class_iou'].values() if v is not None]
    self.assertAllInRange(ious, 0.0, 1.0)
    self.assertAlmostEqual(record['mean_iou'], np.mean(ious))

  def test_predict_images_writes_each_class_mask_and_probabilities(self):
    out = os.path.join(self.root, 'predictions')
    result = command_testing.run(
        predict_images, model_dir=self.model_dir,
        input=os.path.join(self.root, 'raw', 'images'), output_dir=out)
    self.assertEqual(result.status, 0, result.stderr)
    for stem, (image, _) in self.written.items():
      probabilities = np.load(
          os.path.join(out, 'class_probabilities', stem + '.npy'))
      self.assertEqual(probabilities.shape, image.shape[:2] + (2,))
      masks = [np.asarray(Image.open(
          os.path.join(out, 'masks', name, stem + '.png')))
               for name in CLASSES]
      # The masks are the probabilities at the thresholds 0.5 and 0.4.
      for mask, channel, threshold in zip(masks, range(2), (0.5, 0.4)):
        np.testing.assert_array_equal(
            mask, np.where(probabilities[..., channel] > threshold, 255, 0))
      labels = np.asarray(Image.open(os.path.join(out, 'labels',
                                                  stem + '.png')))
      np.testing.assert_array_equal(
          labels, (masks[0] > 0) * 1 + (masks[1] > 0) * 2)

  def test_tflite_export_stops_with_one_line(self):
    self._parse()
    self.addCleanup(gin.clear_config)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'exports a SavedModel only'):
      experiment.run('export_tflite', self.model_dir)


if __name__ == '__main__':
  tf.test.main()

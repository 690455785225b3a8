"""Layouts: Cityscapes ids, the files each reads, missing splits, gin files."""

import os

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import layouts
from official_seg.runtime import gin_config

# cityscapesScripts' labels.py: the label id of each train id 0-18.
_LABEL_ID_OF_TRAIN_ID = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26,
                         27, 28, 31, 32, 33)


class CityscapesIdsTest(tf.test.TestCase, parameterized.TestCase):

  def test_every_train_id_maps_back_to_its_label_id(self):
    train_ids = np.arange(19).reshape(1, 19)
    self.assertAllEqual(
        layouts.to_cityscapes_label_ids(train_ids)[0],
        [7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31,
         32, 33])
    with self.assertRaisesRegex(ValueError, r'\[19\].*Cityscapes train ids'):
      layouts.to_cityscapes_label_ids(np.array([[0, 19]]))

  def test_label_ids_are_uint8_of_the_input_shape(self):
    train_ids = np.random.default_rng(0).integers(0, 19, (5, 7))
    label_ids = layouts.to_cityscapes_label_ids(train_ids)
    self.assertEqual(label_ids.dtype, np.uint8)
    self.assertAllEqual(label_ids, np.array(_LABEL_ID_OF_TRAIN_ID)[train_ids])

  @parameterized.parameters(-1, 255, 256)
  def test_values_of_no_train_id_are_refused(self, value):
    with self.assertRaisesRegex(ValueError, rf'\[{value}\]'):
      layouts.to_cityscapes_label_ids(np.array([[0, value]]))

  def test_the_two_tables_are_inverse(self):
    self.assertEqual(
        {train: label for label, train in layouts.CITYSCAPES_TRAIN_IDS.items()},
        layouts.CITYSCAPES_LABEL_IDS)
    self.assertEqual(tuple(layouts.CITYSCAPES_LABEL_IDS[i] for i in range(19)),
                     _LABEL_ID_OF_TRAIN_ID)


class ImageExtensionsTest(tf.test.TestCase):

  def test_served_images_are_jpeg_and_png(self):
    self.assertEqual(layouts.IMAGE_EXTENSIONS, ('.jpg', '.jpeg', '.png'))

  def test_folders_read_every_image_extension_and_bmp(self):
    root = self.create_tempdir().full_path
    for folder in ('img', 'mask'):
      os.makedirs(os.path.join(root, folder))
    stems = ['a', 'b', 'c', 'd', 'e']
    names = ['a.jpg', 'b.JPEG', 'c.png', 'd.bmp', 'e.gif']
    for stem, name in zip(stems, names):
      Image.new('RGB', (2, 2)).save(os.path.join(root, 'img', name))
      Image.new('L', (2, 2)).save(os.path.join(root, 'mask', f'{stem}.png'))
    pairs = layouts.folder_pairs(os.path.join(root, 'img'),
                                 os.path.join(root, 'mask'), 'train')
    self.assertEqual([pair.name for pair in pairs],
                     ['a.jpg', 'b.JPEG', 'c.png', 'd.bmp'])


class FindPairsTest(tf.test.TestCase):
  """A split that find_pairs cannot list names the path it looked for."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.root = self.create_tempdir().full_path

  def test_missing_voc_split_list(self):
    os.makedirs(os.path.join(self.root, 'SegmentationClass'))
    with self.assertRaisesRegex(layouts.DatasetError, 'ImageSets/Segmentation/'
                                'train_aug.txt does not exist'):
      layouts.find_pairs('voc', 'train_aug', input_dir=self.root)

  def test_empty_cityscapes_split(self):
    with self.assertRaisesRegex(layouts.DatasetError,
                                f'{self.root}/leftImg8bit/val/'):
      layouts.find_pairs('cityscapes', 'val', input_dir=self.root)


class LayoutGinFilesTest(tf.test.TestCase, parameterized.TestCase):
  """The shipped dataset file of each layout, as the tool reads it."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(('voc', 21, 255, 'tvmonitor'),
                            ('cityscapes', 19, 255, 'bicycle'),
                            ('ade20k', 151, 0, 'flag'))
  def test_each_layout_reads_its_shipped_file(self, layout, num_classes,
                                              ignore_label, last_name):
    info = gin_config.read_dataset([layouts.LAYOUT_GIN_FILES[layout]])
    self.assertEqual((info.num_classes, info.ignore_label),
                     (num_classes, ignore_label))
    self.assertEqual(info.class_names[-1], last_name)


if __name__ == '__main__':
  tf.test.main()

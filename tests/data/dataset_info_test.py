"""DatasetInfo: defaults, checks, frozen fields, the gin files binding it."""

import dataclasses
import re

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.runtime import gin_config

# gin/datasets/synthetic.gin's values (palette, splits and data dir there;
# the rest through gin/datasets/dataset.gin's macros).
_SYNTHETIC = {
    'num_classes': 4,
    'class_names': ['background', 'disk', 'box', 'triangle'],
    'ignore_label': 255,
    'palette': 'synthetic',
    'data_dir': 'data/synthetic',
    'train_split': 'train',
    'eval_split': 'val',
    'split_sizes': {'train': 400, 'val': 61},
    'image_channels': 3,
    'image_bit_depth': 8,
}


class DatasetInfoTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_class_names_default_to_numbered_names(self):
    info = dataset_info.DatasetInfo(num_classes=3)
    self.assertEqual(info.class_names, ('class_0', 'class_1', 'class_2'))

  def test_given_class_names_become_a_tuple(self):
    info = dataset_info.DatasetInfo(num_classes=2, class_names=['sky', 'road'])
    self.assertEqual(info.class_names, ('sky', 'road'))

  @parameterized.parameters((3, ['a', 'b'], 2), (1, ['a', 'b'], 2))
  def test_class_names_of_another_count_name_both_macros(self, num_classes,
                                                          names, count):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        rf'DatasetInfo.num_classes = {num_classes}, DatasetInfo.class_names '
        rf'= {re.escape(repr(names))}: expected one class name per class'):
      dataset_info.DatasetInfo(num_classes=num_classes, class_names=names)

  @parameterized.named_parameters(
      ('no_class', 0, 255), ('too_many_classes', 257, 255),
      ('negative_ignore', 21, -1), ('ignore_beyond_8_bits', 21, 256))
  def test_values_beyond_8_bit_pngs_are_refused(self, num_classes,
                                                ignore_label):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        rf'DatasetInfo.(num_classes = {num_classes}|ignore_label = '
        rf'{ignore_label}): expected a whole number from .* \(labels are '
        '8-bit PNGs\)'):
      dataset_info.DatasetInfo(num_classes=num_classes,
                               ignore_label=ignore_label)

  @parameterized.parameters((1, 0), (256, 255), (151, 0), (21, 255))
  def test_the_ends_of_the_8_bit_ranges_are_allowed(self, num_classes,
                                                    ignore_label):
    info = dataset_info.DatasetInfo(num_classes=num_classes,
                                    ignore_label=ignore_label)
    self.assertEqual((info.num_classes, info.ignore_label),
                     (num_classes, ignore_label))
    self.assertLen(info.class_names, num_classes)

  @parameterized.named_parameters(
      ('no_channel', 'image_channels = 0', dict(image_channels=0)),
      ('twelve_bits', 'image_bit_depth = 12', dict(image_bit_depth=12)))
  def test_image_channels_and_depth_are_checked(self, text, kwargs):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                rf'DatasetInfo.{text}: expected'):
      dataset_info.DatasetInfo(num_classes=2, **kwargs)

  def test_fields_cannot_be_assigned(self):
    info = dataset_info.DatasetInfo(num_classes=2)
    with self.assertRaises(dataclasses.FrozenInstanceError):
      info.num_classes = 3
    with self.assertRaises(dataclasses.FrozenInstanceError):
      info.class_names = ('a', 'b')
    self.assertEqual(info.num_classes, 2)

  def test_split_sizes_are_a_copy(self):
    sizes = {'train': 3}
    info = dataset_info.DatasetInfo(num_classes=2, split_sizes=sizes)
    sizes['val'] = 1
    self.assertEqual(info.split_sizes, {'train': 3})
    self.assertEqual(dataset_info.DatasetInfo(num_classes=2).split_sizes, {})


class DatasetGinFilesTest(tf.test.TestCase):
  """gin/datasets/dataset.gin with a dataset file binds every field."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_synthetic_binds_every_field(self):
    info = gin_config.read_dataset(['datasets/synthetic.gin'])
    fields = [field.name for field in dataclasses.fields(info)]
    self.assertCountEqual(fields, _SYNTHETIC)
    for name in fields:
      # Bound in the files, not left at the dataclass's default.
      self.assertEqual(gin_config.binding(f'DatasetInfo.{name}'),
                       _SYNTHETIC[name], name)
    self.assertEqual(
        dataclasses.asdict(info),
        dict(_SYNTHETIC, class_names=('background', 'disk', 'box',
                                      'triangle')))


if __name__ == '__main__':
  tf.test.main()

"""Class masks: combined into bit-mask labels, and each bad mask named in one line."""

import os

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import build_tfrecords
from official_seg.data import layouts
from official_seg.datasets import class_masks
from tests.commands import command_testing

NAMES = ['a_scratch', 'b_dent', 'c_rust']


def _save(path, pixels):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  Image.fromarray(np.asarray(pixels, np.uint8)).save(path)


class ClassMasksTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    rng = np.random.default_rng(0)
    self.image = rng.integers(0, 256, size=(6, 7, 3))
    _save(os.path.join(self.root, 'images', 'x.png'), self.image)
    # Overlapping masks, saved as 0/255, 0/1 and 0/255.
    self.masks = [rng.integers(0, 2, size=(6, 7)) for _ in NAMES]
    for name, mask, on in zip(NAMES, self.masks, (255, 1, 255)):
      _save(self._mask_path(name), mask * on)
    self.pair = layouts.Pair('x.png', os.path.join(self.root, 'images',
                                                   'x.png'),
                             self._mask_path(NAMES[0]))

  def _mask_path(self, name, stem='x'):
    return os.path.join(self.root, 'masks', name, stem + '.png')

  def _encode(self):
    return class_masks.encode_pair(self.pair, os.path.join(self.root,
                                                           'masks'), NAMES)

  def test_classes_are_the_folders_sorted(self):
    self.assertEqual(class_masks.class_names(os.path.join(self.root,
                                                          'masks')), NAMES)

  def test_label_is_the_bit_mask_of_the_classes(self):
    encoded = self._encode()
    label = tf.io.decode_png(encoded.label_bytes).numpy()[..., 0]
    expected = sum(mask << bit for bit, mask in enumerate(self.masks))
    self.assertAllEqual(label, expected)
    self.assertAllEqual(encoded.class_counts,
                        np.bincount(expected.ravel(), minlength=256))
    # Each class's pixels, read back from the counts of the bit masks.
    lines = class_masks.format_counts(encoded.class_counts, NAMES)
    for bit, (name, mask) in enumerate(zip(NAMES, self.masks)):
      self.assertIn(f'{bit:>4} {name:<24} {int(mask.sum()):>14,}', lines)

  def _assert_one_line(self, message_part, path):
    with self.assertRaises(layouts.DatasetError) as caught:
      self._encode()
    message = str(caught.exception)
    self.assertIn(path, message)
    self.assertIn(message_part, message)
    self.assertNotIn('\n', message)

  def test_mask_of_another_size_names_the_file(self):
    _save(self._mask_path('b_dent'), np.zeros((6, 8)))
    self._assert_one_line('is 8x6 but its image', self._mask_path('b_dent'))

  @parameterized.parameters(([0, 1, 255],), ([0, 2],), ([1, 255],))
  def test_mask_that_is_not_binary_names_the_file(self, values):
    _save(self._mask_path('c_rust'), np.resize(values, (6, 7)))
    self._assert_one_line('is not binary', self._mask_path('c_rust'))

  def test_missing_mask_names_the_file(self):
    os.remove(self._mask_path('b_dent'))
    with self.assertRaisesRegex(layouts.DatasetError,
                                'has no mask .*b_dent/x.png'):
      class_masks.mask_pairs([self.pair], os.path.join(self.root, 'masks'),
                             NAMES)

  def test_too_many_class_folders(self):
    for index in range(8):
      os.makedirs(os.path.join(self.root, 'many', str(index)))
    with self.assertRaisesRegex(layouts.DatasetError, '8 class folders'):
      class_masks.class_names(os.path.join(self.root, 'many'))

  def test_command_stops_at_a_bad_mask_with_one_line(self):
    _save(self._mask_path('c_rust'), np.full((6, 7), 7))
    result = command_testing.run(
        build_tfrecords, layout='folders',
        image_dir=os.path.join(self.root, 'images'),
        label_dir=os.path.join(self.root, 'masks'), class_masks=True,
        splits=['train'], output_dir=os.path.join(self.root, 'out'),
        num_workers=1)
    self.assertEqual(result.status, 2)
    self.assertIn(self._mask_path('c_rust'), result.stderr)
    self.assertIn('is not binary', result.stderr)
    self.assertEmpty(tf.io.gfile.glob(os.path.join(self.root, 'out',
                                                   '*.tfrecord')))

  def test_command_refuses_class_masks_with_a_palette(self):
    result = command_testing.run(
        build_tfrecords, layout='folders',
        image_dir=os.path.join(self.root, 'images'),
        label_dir=os.path.join(self.root, 'masks'), class_masks=True,
        palette='pascal_voc', output_dir=os.path.join(self.root, 'out'))
    self.assertEqual(result.status, 2)
    self.assertIn('--class_masks gives the classes', result.stderr)


if __name__ == '__main__':
  tf.test.main()

"""The channel evidence sets: what 8 bits and RGB lose of them, and their records."""

import os

import numpy as np
import tensorflow as tf

from official_seg.commands import make_channel_dataset
from official_seg.data import input_fn
from official_seg.data import tfexample
from official_seg.datasets import channel_evidence
from tests.commands import command_testing

_SIZES = {'min_size': 40, 'max_size': 56}


def _pairs(name, count, reduce=False, seed=300):
  return list(channel_evidence.samples(name, count, seed, reduce, **_SIZES))


class Faint16Test(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.full = _pairs('faint16', 12)
    self.reduced = _pairs('faint16', 12, reduce=True)

  def test_16_bits_separate_faint_objects_by_a_threshold(self):
    faint_images = 0
    for image, label in self.full:
      self.assertEqual(image.dtype, np.uint16)
      self.assertEqual(image.shape, label.shape + (1,))
      background, faint = image[label == 0], image[label == 2]
      if faint.size:
        faint_images += 1
        self.assertGreater(faint.min(), background.max())
        self.assertLess(faint.mean() - background.mean(), 257)
    self.assertGreater(faint_images, 3)

  def test_8_bits_make_faint_objects_equal_to_the_background(self):
    for (image, label), (image8, label8) in zip(self.full, self.reduced):
      self.assertAllEqual(label8, label)
      # The usual scaling, v * 255 / 65535 rounded.
      expected = np.floor(image.astype(np.float64) * 255 / 65535 + 0.5)
      self.assertAllEqual(image8, expected.astype(np.uint8))
      background = np.unique(image8[label == 0])
      self.assertLen(background, 1)
      self.assertAllEqual(np.unique(image8[label == 2]),
                          background if (label == 2).any() else [])
      self.assertNotIn(background[0], image8[label == 1])


class FourthChannelTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.full = _pairs('fourth_channel', 60)

  def _pixels(self, class_id):
    return np.concatenate([image[label == class_id]
                           for image, label in self.full]).astype(np.float64)

  def test_the_marks_change_the_fourth_channel_and_labels_alone(self):
    # The same scene with other marks: RGB equal pixel for pixel, so box
    # and marked box share one RGB distribution.
    first, second = (channel_evidence.fourth_channel_sample(
        np.random.default_rng(7), np.random.default_rng(seed), **_SIZES)
                     for seed in (1, 2))
    (image, label), (other, other_label) = first, second
    self.assertAllEqual(image[..., :3], other[..., :3])
    self.assertAllEqual(np.minimum(label, 2), np.minimum(other_label, 2))
    swapped = label != other_label
    self.assertTrue(swapped.any(), 'a vacuous comparison')
    self.assertAllEqual(np.unique(np.stack([label, other_label])[
        :, swapped]), [2, 3])
    self.assertAllEqual(image[..., 3] != other[..., 3], swapped)
    marked_first = swapped & (label == 3)
    self.assertTrue(np.all(image[..., 3][marked_first] >
                           other[..., 3][marked_first]))

  def test_box_and_marked_box_differ_in_the_fourth_channel(self):
    box, marked, background = (self._pixels(c) for c in (2, 3, 0))
    self.assertGreater(len(box), 5000)
    self.assertGreater(len(marked), 5000)
    self.assertGreater(marked[:, 3].mean() - box[:, 3].mean(), 50)
    self.assertAllClose(box[:, 3].mean(), background[:, 3].mean(), atol=3)
    # Thresholding the fourth channel halfway tells them apart.
    self.assertGreater((marked[:, 3] > 135).mean(), 0.99)
    self.assertGreater((box[:, 3] <= 135).mean(), 0.99)

  def test_the_reduced_arm_is_the_rgb_of_the_same_images(self):
    for (image, label), (rgb, label3) in zip(
        self.full[:5], _pairs('fourth_channel', 5, reduce=True)):
      self.assertEqual(image.shape[2], 4)
      self.assertAllEqual(rgb, image[..., :3])
      self.assertAllEqual(label3, label)


class MakeChannelDatasetTest(tf.test.TestCase):

  def test_records_hold_the_drawn_pixels_and_the_gin_file_their_kind(self):
    for name, reduced, kind in (('faint16', False, (1, 16)),
                                ('fourth_channel', False, (4, 8)),
                                ('fourth_channel', True, (3, 8))):
      output = self.create_tempdir().full_path
      result = command_testing.run(
          make_channel_dataset, output_dir=output, num_train=2, num_val=1,
          num_shards=1, reduced=reduced, **{'set': name}, **_SIZES)
      self.assertEqual(result.status, 0, result.stderr)
      with open(os.path.join(output, 'dataset.gin')) as f:
        text = f.read()
      self.assertIn(f'IMAGE_CHANNELS = {kind[0]}\nIMAGE_BIT_DEPTH = {kind[1]}',
                    text)
      self.assertIn(f'NUM_CLASSES = {len(channel_evidence.CLASS_NAMES[name])}',
                    text)
      decoder = tfexample.Decoder(channels=kind[0], bit_depth=kind[1])
      records = tf.data.TFRecordDataset(input_fn.list_shards(output, 'val'))
      decoded = [decoder.decode(r) for r in records]
      (image, label), = _pairs(name, 1, reduced, seed=301)
      self.assertLen(decoded, 1)
      self.assertAllEqual(decoded[0]['image'], image)
      self.assertAllEqual(decoded[0]['label'][..., 0], label)


if __name__ == '__main__':
  tf.test.main()

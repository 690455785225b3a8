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

  def _pixels(self, pairs):
    return (np.concatenate([image.ravel() for image, _ in pairs]).astype(
        np.float64), np.concatenate([label.ravel() for _, label in pairs]))

  def test_16_bits_separate_faint_objects_by_one_threshold(self):
    for image, label in self.full:
      self.assertEqual(image.dtype, np.uint16)
      self.assertEqual(image.shape, label.shape + (1,))
    pixels, labels = self._pixels(self.full)
    background, faint = pixels[labels == 0], pixels[labels == 2]
    self.assertGreater(faint.size, 1000)
    # One threshold for all images, and less than an 8-bit step in each.
    self.assertGreater(faint.min(), background.max())
    for image, label in self.full:
      if (label == 2).any():
        self.assertLess(image[label == 2].max() - image[label == 0].min(),
                        257)

  def test_faint_offset_exceeds_the_set_standard_deviation(self):
    # What the normalization of `dataset_stats` divides by: the standard
    # deviation of all pixels of the set.
    pixels, labels = self._pixels(_pairs('faint16', 100))
    offset = pixels[labels == 2].mean() - pixels[labels == 0].mean()
    self.assertGreater(offset / pixels.std(), 1.0)

  def test_8_bits_make_faint_objects_equal_to_the_background(self):
    for (image, label), (image8, label8) in zip(self.full, self.reduced):
      self.assertAllEqual(label8, label)
      # The usual scaling, v * 255 / 65535 rounded.
      expected = np.floor(image.astype(np.float64) * 255 / 65535 + 0.5)
      self.assertAllEqual(image8, expected.astype(np.uint8))
      background = np.unique(image8[label == 0])
      self.assertLen(background, 1)
      if (label == 1).any():
        self.assertAllEqual(np.unique(image8[label == 1]), background - 1)
      # Faint pixels round to the background's value or one step above.
      self.assertContainsSubset(np.unique(image8[label == 2]),
                                [background[0], background[0] + 1])

  def test_8_bits_hide_every_faint_pixel_in_most_images(self):
    pairs = _pairs('faint16', 300)
    hidden = []
    for image, label in pairs:
      image8 = channel_evidence.to_8_bit(image)
      if (label == 2).any():
        hidden.append(np.all(image8[label == 2] == image8[label == 0][0]))
    # Closed form: the levels r in [-122, -26] at which r + 160 + 6 rounds
    # down to the background's step, r <= -38: 85 of 97. Otherwise some
    # faint pixels differ, those of noise > -31 - r.
    expected = 85 / 97
    tolerance = 3 * np.sqrt(expected * (1 - expected) / len(hidden))
    self.assertGreater(len(hidden), 150)
    self.assertAllClose(np.mean(hidden), expected, atol=tolerance)


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

"""Tests of the rare-class synthetic set: class shares, thin dark cracks, seeds, written files."""

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import image_classes
from official_seg.data import input_fn
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import rare
from official_seg.runtime import gin_config
from tests import testing_utils

_TRAIN = 24


def _decoded(data_dir, split):
  """[(image uint8 [H, W, 3], label uint8 [H, W])] read from a split's shards."""
  decoder = tfexample.Decoder()
  records = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  return [(d['image'].numpy(), d['label'].numpy()[..., 0])
          for d in map(decoder.decode, records)]


def _shifts(mask, radius):
  """The copies of a boolean mask shifted by every offset up to `radius`,
  outside the image counting as False."""
  padded = np.pad(mask, radius)
  height, width = mask.shape
  return [padded[radius + dy:radius + dy + height,
                 radius + dx:radius + dx + width]
          for dy in range(-radius, radius + 1)
          for dx in range(-radius, radius + 1)]


class RareTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tf.compat.v1.test.get_temp_dir() + '/rare_set'
    rare.write_dataset(cls.data_dir, {'train': _TRAIN, 'val': 3},
                       num_shards=2)
    cls.train = _decoded(cls.data_dir, 'train')

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_the_crack_is_at_most_one_percent_of_the_labelled_pixels(self):
    counts = sum(np.bincount(label.ravel(), minlength=256)
                 for _, label in self.train)
    self.assertLen(self.train, _TRAIN)
    self.assertEqual(counts[rare.IGNORE_LABEL], 0)
    self.assertEqual(np.flatnonzero(counts).tolist(), [0, 1, 2, 3])
    shares = counts[:4] / counts.sum()
    self.assertLessEqual(shares[rare.CRACK], 0.01)
    self.assertGreater(shares[rare.CRACK], 0.002)
    # The other classes are large: the crack is the one rare class.
    self.assertGreater(shares[0], 0.5)
    self.assertGreater(min(shares[1], shares[2]), 0.05)
    for _, label in self.train:
      self.assertLessEqual((label == rare.CRACK).mean(), 0.01)
    # A smaller cap cuts each crack to it.
    rng = np.random.default_rng(4)
    for _ in range(10):
      _, label = rare.make_sample(rng, crack_chance=1.0, crack_share=0.002)
      self.assertBetween((label == rare.CRACK).sum(), 1,
                         int(0.002 * label.size))

  def test_a_crack_is_thin_and_darker_than_around_it(self):
    with_crack = [(image, label == rare.CRACK) for image, label in self.train
                  if (label == rare.CRACK).any()]
    # Most images hold one (crack_chance 0.8).
    self.assertGreater(len(with_crack), _TRAIN // 2)
    for image, crack in with_crack:
      # No 5 x 5 block is all crack: it is at most 4 pixels across.
      self.assertFalse(np.logical_and.reduce(_shifts(crack, 2)).any())
      around = np.logical_or.reduce(_shifts(crack, 3)) & ~crack
      brightness = image.astype(np.float64).mean(-1)
      self.assertLess(brightness[crack].mean(),
                      0.6 * brightness[around].mean())

  def test_the_same_seed_gives_the_same_records(self):
    serialized = lambda seed: [e.SerializeToString()
                               for e in rare.examples(3, seed, min_size=48,
                                                      max_size=64)]
    self.assertEqual(serialized(7), serialized(7))
    self.assertNotEqual(serialized(7), serialized(8))
    # The train split is seed 200's, as write_dataset says.
    first = rare.make_sample(np.random.default_rng(200))
    self.assertIn(first[0].shape, [image.shape for image, _ in self.train])

  def test_metadata_and_image_classes_files_hold_the_shards_facts(self):
    for split in ('train', 'val'):
      self.assertEqual(image_classes.read(self.data_dir, split, 'S'),
                       testing_utils.shard_image_labels(self.data_dir, split))
      self.assertEqual(split_metadata.read(self.data_dir, split),
                       split_metadata.compute(self.data_dir, split))
    presence = image_classes.read(self.data_dir, 'train', 'S')
    self.assertLen(presence, _TRAIN)
    self.assertEqual(
        sum(rare.CRACK in values for values in presence.values()),
        sum((label == rare.CRACK).any() for _, label in self.train))

  def test_the_dataset_gin_file_names_the_generator_s_classes(self):
    info = gin_config.read_dataset(['datasets/rare.gin'])
    self.assertEqual(info.num_classes, len(rare.CLASS_NAMES))
    self.assertEqual(tuple(info.class_names), rare.CLASS_NAMES)
    self.assertEqual(info.ignore_label, rare.IGNORE_LABEL)
    self.assertEqual(info.data_dir, 'data/rare')


if __name__ == '__main__':
  tf.test.main()

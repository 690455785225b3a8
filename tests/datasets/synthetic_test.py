"""Tests for the synthetic dataset."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import image_classes
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import synthetic
from tests import testing_utils


class SyntheticTest(tf.test.TestCase):

  def test_samples_have_shapes_ignore_bands_and_varying_sizes(self):
    rng = np.random.default_rng(3)
    sizes = set()
    classes = set()
    for _ in range(20):
      image, label = synthetic.make_sample(rng)
      self.assertEqual(image.shape[:2], label.shape)
      self.assertEqual(image.dtype, np.uint8)
      sizes.add(image.shape[:2])
      classes.update(np.unique(label).tolist())
      # The ignore band separates every object from the background.
      self.assertIn(synthetic.IGNORE_LABEL, np.unique(label))
    self.assertGreater(len(sizes), 10)
    self.assertEqual(classes, {0, 1, 2, 3, synthetic.IGNORE_LABEL})

  def test_no_two_classes_touch_without_ignore_between(self):
    _, label = synthetic.make_sample(np.random.default_rng(5))
    valid = label != synthetic.IGNORE_LABEL
    right = valid[:, :-1] & valid[:, 1:] & (label[:, :-1] != label[:, 1:])
    down = valid[:-1] & valid[1:] & (label[:-1] != label[1:])
    self.assertFalse(right.any() or down.any())

  def test_write_dataset_is_reproducible(self):
    first = self.create_tempdir().full_path
    second = self.create_tempdir().full_path
    for out in (first, second):
      synthetic.write_dataset(out, {'val': 3}, num_shards=1, min_size=16,
                              max_size=20)
    read = lambda d: [r.numpy() for r in tf.data.TFRecordDataset(
        tf.io.gfile.glob(tfexample.shard_pattern(d, 'val')))]
    self.assertEqual(read(first), read(second))
    self.assertLen(read(first), 3)


class MetadataTest(tf.test.TestCase, parameterized.TestCase):
  """The metadata written from memory is what reading the shards gives."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dirs = {}
    for image_format in ('jpeg', 'png'):
      self.data_dirs[image_format] = self.create_tempdir().full_path
      testing_utils.write_tiny_dataset(
          self.data_dirs[image_format], num_train=4, num_val=3,
          image_format=image_format)

  @parameterized.parameters('jpeg', 'png')
  def test_written_metadata_equals_computed(self, image_format):
    data_dir = self.data_dirs[image_format]
    for split, count in (('train', 4), ('val', 3)):
      written = split_metadata.read(data_dir, split)
      self.assertEqual(written, split_metadata.compute(data_dir, split))
      self.assertEqual(written['num_images'], count)
      self.assertContainsSubset(['0', str(synthetic.IGNORE_LABEL)],
                                written['label_histogram'])
      self.assertEqual(image_classes.read(data_dir, split, 'S'),
                       testing_utils.shard_image_labels(data_dir, split))

if __name__ == '__main__':
  tf.test.main()

"""Tests for the input_fn: shards, static shapes, exact eval batches, errors."""

import numpy as np
import tensorflow as tf

from official_seg.data import input_fn as input_lib
import testing_utils


class InputFnTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(self.data_dir, num_train=6, num_val=5)
    testing_utils.parse_tiny_quickstart(self.data_dir)

  def test_train_batches_have_static_shapes(self):
    dataset = input_lib.make_input_fn(is_training=True)({'batch_size': 3})
    features, labels = next(iter(dataset))
    self.assertEqual(features['image'].shape, (3, 33, 33, 3))
    self.assertEqual(labels.shape, (3, 33, 33, 1))
    self.assertEqual(dataset.element_spec[1].shape, (3, 33, 33, 1))

  def test_eval_reads_each_image_once_and_pads_the_last_batch(self):
    dataset = input_lib.make_input_fn(is_training=False)({'batch_size': 2})
    self.assertEqual(dataset.element_spec[0]['image'].shape, (2, 41, 41, 3))
    batches = list(dataset)
    self.assertLen(batches, 3)
    valid = np.concatenate([f['valid'].numpy() for f, _ in batches])
    self.assertAllEqual(valid, [1, 1, 1, 1, 1, 0])
    padding_labels = batches[-1][1][1].numpy()
    self.assertTrue((padding_labels == 255).all())
    heights = np.concatenate([f['height'].numpy() for f, _ in batches])
    self.assertTrue(((heights[:5] >= 24) & (heights[:5] <= 40)).all())

  def test_missing_shards_name_the_pattern(self):
    empty = self.create_tempdir().full_path
    with self.assertRaisesRegex(FileNotFoundError,
                                f'{empty}/train-.....-of-.....\\.tfrecord'):
      input_lib.build_dataset(2, True, data_dir=empty, split='train',
                              ignore_label=255)


if __name__ == '__main__':
  tf.test.main()

"""Serving label maps: cut, resized back and padded to each image's size."""

import gin
import numpy as np
import tensorflow as tf

from official_seg.export import signatures


class LabelsAtOriginalSizeTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_labels_cut_resized_back_and_padded(self):
    semantic = np.arange(2 * 4 * 6, dtype=np.int32).reshape(2, 4, 6) % 7
    labels = signatures.labels_at_original_size(
        tf.constant(semantic), tf.constant([[3, 5], [2, 2]]),
        tf.constant([[3, 5], [4, 4]])).numpy()
    self.assertEqual(labels.shape, (2, 4, 5))
    self.assertAllEqual(labels[0, :3], semantic[0, :3, :5])
    self.assertAllEqual(labels[0, 3], [-1] * 5)
    # 2x2 to 4x4 with aligned corners: rows and columns 0, 0, 1, 1.
    self.assertAllEqual(labels[1, :, :4],
                        semantic[1][np.ix_([0, 0, 1, 1], [0, 0, 1, 1])])
    self.assertAllEqual(labels[1, :, 4], [-1] * 4)

  def test_confidence_and_entropy_cut_resized_back_and_padded(self):
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3), (2, 4, 6)).astype(np.float32)
    found = signatures.uncertainty_outputs(
        tf.constant(probabilities), tf.constant([[3, 5], [2, 2]]),
        tf.constant([[3, 5], [4, 4]]))
    top = probabilities.max(axis=-1)
    nats = -(probabilities * np.log(probabilities)).sum(axis=-1)
    rows = np.ix_([0, 0, 1, 1], [0, 0, 1, 1])
    for name, expected in (('confidence', top), ('entropy', nats)):
      values = found[name].numpy()
      self.assertEqual(values.shape, (2, 4, 5))
      self.assertAllClose(values[0, :3], expected[0, :3, :5], rtol=1e-6)
      self.assertAllEqual(values[0, 3], [0.0] * 5)
      self.assertAllClose(values[1, :, :4], expected[1][rows], rtol=1e-6)
      self.assertAllEqual(values[1, :, 4], [0.0] * 4)

  def test_class_masks_and_probabilities_cut_resized_back_and_padded(self):
    rng = np.random.default_rng(1)
    probabilities = rng.uniform(size=(2, 4, 6, 2)).astype(np.float32)
    masks = (probabilities > 0.5).astype(np.int32)
    found = signatures.class_outputs(
        {'masks': tf.constant(masks),
         'probabilities': tf.constant(probabilities)},
        tf.constant([[3, 5], [2, 2]]), tf.constant([[3, 5], [4, 4]]))
    rows = np.ix_([0, 0, 1, 1], [0, 0, 1, 1])
    for name, expected in (('masks', masks),
                           ('class_probabilities', probabilities)):
      values = found[name].numpy()
      self.assertEqual(values.shape, (2, 4, 5, 2))
      self.assertAllEqual(values[0, :3], expected[0, :3, :5])
      self.assertAllEqual(values[0, 3], np.zeros((5, 2)))
      self.assertAllEqual(values[1, :, :4], expected[1][rows])
      self.assertAllEqual(values[1, :, 4], np.zeros((4, 2)))
    self.assertEqual(found['masks'].dtype, tf.int32)


if __name__ == '__main__':
  tf.test.main()

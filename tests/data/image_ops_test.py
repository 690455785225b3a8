"""Image ops the Parser composes: crop windows, scale factors, resize sizes."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import image_ops


def _deeplab_resize_size(height, width, min_size, max_size, factor):
  """NumPy float32 reference of DeepLab's resize_to_range output size."""
  f32 = np.float32
  max_size = f32(max_size - (max_size - 1) % factor)
  size = np.array([height, width], f32)
  large = np.floor(size * (f32(min_size) / size.min())).astype(np.int32)
  small = np.floor(size * (max_size / size.max())).astype(np.int32)
  new_size = small if large.max() > max_size else large
  return new_size + (factor - (new_size - 1) % factor) % factor


class ImageOpsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_crop_offsets_cover_every_valid_offset(self):
    offsets, flips = set(), set()
    for seed in range(300):
      offset, flipped = image_ops.random_crop_window(
          tf.constant([12, 7]), (8, 5), True, tf.constant([seed, 4]))
      offsets.add(tuple(offset.numpy()))
      flips.add(bool(flipped))
    # The padded 12x7 image has offsets 0-4 down and 0-2 across.
    self.assertEqual(offsets, {(y, x) for y in range(5) for x in range(3)})
    self.assertEqual(flips, {False, True})
    # An image smaller than the crop is padded: the only offset is 0.
    offset, _ = image_ops.random_crop_window(
        tf.constant([6, 3]), (8, 5), True, tf.constant([1, 4]))
    self.assertAllEqual(offset, [0, 0])

  def test_random_scale_factor_draws_from_the_step_grid(self):
    draws = {round(float(image_ops.random_scale_factor(0.5, 2.0, 0.25)), 4)
             for _ in range(200)}
    self.assertEqual(draws, {0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0})

  @parameterized.parameters(
      # VOC-sized images fit 513 with sides 16k + 1, as DeepLab resizes ADE20K.
      (375, 500, 513, 513, 16, (385, 513)),
      (500, 375, 513, 513, 16, (513, 385)),
      (100, 200, 50, None, None, (50, 100)),
      (100, 200, 50, None, 16, (65, 113)),
      (30, 22, 40, 45, None, (45, 33)))
  def test_resize_to_range_size_on_known_sizes(self, height, width, min_size,
                                               max_size, factor, expected):
    size = image_ops.resize_to_range_size(height, width, min_size, max_size,
                                           factor)
    self.assertAllEqual(size, expected)

  def test_resize_to_range_size_matches_deeplab_rule(self):
    rng = np.random.default_rng(4)
    for height, width in rng.integers(100, 2200, size=(40, 2)):
      self.assertAllEqual(
          image_ops.resize_to_range_size(height, width, 513, 513, 16),
          _deeplab_resize_size(height, width, 513, 513, 16))


if __name__ == '__main__':
  tf.test.main()

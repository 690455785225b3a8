"""Image bytes to pixels of the dataset's channels and depth, checked."""

import numpy as np
import tensorflow as tf

from official_seg.data import encode
from official_seg.data import pixels


class PixelsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.rng = np.random.default_rng(9)

  def test_8_bit_grey_png_decodes_as_rgb_with_grey_repeated(self):
    grey = self.rng.integers(0, 256, (3, 4, 1), dtype=np.uint8)
    rgb = pixels.decode_pixels(encode.encode_pixels_png(grey), 3, 8)
    self.assertAllEqual(rgb, np.repeat(grey, 3, axis=-1))

  def test_16_bit_png_keeps_its_values_where_an_8_bit_decode_keeps_bytes(self):
    values = np.array([[[4095], [65535]], [[0], [257]]], np.uint16)
    png = encode.encode_pixels_png(values)
    self.assertAllEqual(pixels.decode_pixels(png, 1, 16), values)
    # What the dataset's depth guards against: the high byte alone.
    self.assertAllEqual(tf.io.decode_png(png), values >> 8)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "(?s)bit depth 8.*in example.*s_1"):
      pixels.decode_pixels(png, 1, 8, 's_1')

  def test_raw_pixels_decode_to_the_given_size(self):
    values = self.rng.integers(0, 256, (2, 3, 6), dtype=np.uint8)
    stored = encode.stored_pixels(values, 'x')
    self.assertAllEqual(pixels.decode_stored(stored.data, 2, 3, 6, 8),
                        values)


if __name__ == '__main__':
  tf.test.main()

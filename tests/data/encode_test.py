"""Label PNGs: lossless class ids, values an 8-bit PNG cannot hold; images of any
channels and depth stored losslessly."""

import importlib.util
import io
import os
import unittest

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import encode
from official_seg.data import layouts


class EncodePngTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(np.uint8, np.int32, np.int64)
  def test_round_trips_every_8_bit_value(self, dtype):
    labels = np.arange(256 * 3).reshape(24, 32) % 256
    encoded = encode.encode_png(labels.astype(dtype))
    self.assertEqual(encoded[:8], b'\x89PNG\r\n\x1a\n')
    with Image.open(io.BytesIO(encoded)) as image:
      self.assertEqual(image.mode, 'L')
      self.assertEqual(image.size, (32, 24))
      self.assertAllEqual(np.asarray(image), labels)
    decoded = tf.io.decode_png(encoded).numpy()
    self.assertEqual(decoded.shape, (24, 32, 1))
    self.assertAllEqual(decoded[..., 0], labels)

  @parameterized.parameters(([[0, -1]], '-1 to 0'), ([[3, 256]], '3 to 256'))
  def test_values_outside_8_bits_are_refused(self, labels, found):
    with self.assertRaisesRegex(ValueError, f'0-255.*got {found}'):
      encode.encode_png(np.array(labels))

  def test_checked_labels_are_uint8(self):
    checked = encode.checked_labels(np.array([[0, 7], [255, 1]], np.int64))
    self.assertEqual(checked.dtype, np.uint8)
    self.assertAllEqual(checked, [[0, 7], [255, 1]])


if __name__ == '__main__':
  tf.test.main()


_needs_tifffile = unittest.skipUnless(
    importlib.util.find_spec('tifffile'), 'tifffile is not installed')


class ImageChannelsTest(tf.test.TestCase, parameterized.TestCase):
  """Images of 1 to N channels and 8 or 16 bits read and stored losslessly."""

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    self.rng = np.random.default_rng(0)

  def _write(self, name, data):
    path = os.path.join(self.dir, name)
    with open(path, 'wb') as f:
      f.write(data)
    return path

  @parameterized.product(dtype=(np.uint8, np.uint16), channels=(1, 3, 4))
  def test_encode_pixels_png_decodes_to_the_same_values(self, dtype, channels):
    pixels = self.rng.integers(0, np.iinfo(dtype).max, (5, 7, channels),
                               endpoint=True).astype(dtype)
    decoded = tf.io.decode_png(encode.encode_pixels_png(pixels),
                               dtype=tf.as_dtype(dtype))
    self.assertAllEqual(decoded, pixels)

  @parameterized.parameters(1, 3, 4)
  def test_16_bit_png_is_kept_with_its_channels_and_depth(self, channels):
    pixels = self.rng.integers(0, 4096, (6, 5, channels)).astype(np.uint16)
    data = tf.io.encode_png(pixels).numpy()
    image = encode.read_image(self._write('a.png', data))
    self.assertEqual(image, encode.ImageFile(data, 'png', 6, 5, channels, 16))

  @parameterized.parameters(('L', 1), ('RGB', 3), ('RGBA', 4), ('LA', 2))
  def test_8_bit_png_keeps_its_bytes_and_names_its_channels(self, mode,
                                                            channels):
    shape = (4, 3) if channels == 1 else (4, 3, channels)
    buffer = io.BytesIO()
    Image.fromarray(self.rng.integers(0, 256, shape, dtype=np.uint8),
                    mode).save(buffer, format='PNG')
    image = encode.read_image(self._write('a.png', buffer.getvalue()))
    self.assertEqual(image, encode.ImageFile(buffer.getvalue(), 'png', 4, 3,
                                             channels, 8))

  @parameterized.parameters(2, 5)
  def test_other_channel_counts_are_stored_raw_little_endian(self, channels):
    pixels = self.rng.integers(0, 65536, (3, 4, channels)).astype(np.uint16)
    image = encode.stored_pixels(pixels, 'a.tif')
    self.assertEqual(image[1:], (encode.RAW_FORMAT, 3, 4, channels, 16))
    self.assertAllEqual(
        np.frombuffer(image.data, '<u2').reshape(3, 4, channels), pixels)

  def test_float_pixels_are_refused_naming_the_file(self):
    with self.assertRaisesRegex(layouts.DatasetError, r'^Image a\.tif holds '
                                r'float32 pixels[^\n]*$'):
      encode.stored_pixels(np.zeros((2, 2, 5), np.float32), 'a.tif')

  def test_16_bit_label_is_refused_in_one_line(self):
    path = self._write('l.png', tf.io.encode_png(
        np.ones((3, 3, 1), np.uint16)).numpy())
    with self.assertRaisesRegex(layouts.DatasetError,
                                r'^Label .*l\.png is a I;16 image of more '
                                r'than 8 bits[^\n]*$'):
      encode.read_label(path)

  @_needs_tifffile
  def test_tiff_of_five_16_bit_channels_is_stored_raw(self):
    import tifffile  # pylint: disable=g-import-not-at-top
    pixels = self.rng.integers(0, 4096, (4, 6, 5)).astype(np.uint16)
    path = os.path.join(self.dir, 'a.tif')
    tifffile.imwrite(path, pixels, planarconfig='contig')
    image = encode.read_image(path)
    self.assertEqual(image[1:], (encode.RAW_FORMAT, 4, 6, 5, 16))
    self.assertAllEqual(
        np.frombuffer(image.data, '<u2').reshape(4, 6, 5), pixels)

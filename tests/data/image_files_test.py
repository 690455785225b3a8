"""Image files read for a model's channels and depth, against the pixels written."""

import os

import numpy as np
import tensorflow as tf
import tifffile

from official_seg import validation
from official_seg.data import encode
from official_seg.data import image_files


class ImageFilesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    self.rng = np.random.default_rng(0)

  def _write(self, name, data):
    path = os.path.join(self.folder, name)
    with open(path, 'wb') as f:
      f.write(data)
    return path

  def _read(self, path, channels, bit_depth):
    return image_files.decode(image_files.read(path), path, channels,
                              bit_depth)

  def test_16_bit_pngs_and_tiffs_keep_their_values(self):
    for channels in (1, 4):
      pixels = self.rng.integers(0, 65536, (5, 7, channels)).astype(np.uint16)
      png = self._write(f'a{channels}.png', encode.encode_pixels_png(pixels))
      self.assertAllEqual(self._read(png, channels, 16), pixels)
      tiff = os.path.join(self.folder, f'a{channels}.tif')
      tifffile.imwrite(tiff, pixels[..., 0] if channels == 1 else pixels)
      self.assertAllEqual(self._read(tiff, channels, 16), pixels)

  def test_a_five_channel_tiff_is_read_raw(self):
    pixels = self.rng.integers(0, 65536, (4, 3, 5)).astype(np.uint16)
    path = os.path.join(self.folder, 'five.tiff')
    tifffile.imwrite(path, pixels, photometric='minisblack',
                     planarconfig='contig')
    self.assertEqual(image_files.read(path).image_format, encode.RAW_FORMAT)
    self.assertAllEqual(self._read(path, 5, 16), pixels)

  def test_an_rgb_model_reads_grey_and_rgba_as_rgb(self):
    grey = self.rng.integers(0, 256, (4, 6, 1)).astype(np.uint8)
    path = self._write('grey.png', encode.encode_pixels_png(grey))
    self.assertAllEqual(self._read(path, 3, 8), np.repeat(grey, 3, axis=2))
    rgba = self.rng.integers(0, 256, (4, 6, 4)).astype(np.uint8)
    path = self._write('rgba.png', encode.encode_pixels_png(rgba))
    self.assertAllEqual(self._read(path, 3, 8), rgba[..., :3])

  def test_another_kind_is_refused_in_one_line_naming_the_file(self):
    for pixels, channels, bit_depth, stored in (
        (np.zeros((3, 3, 1), np.uint16), 3, 8, '1 channels of 16 bits'),
        (np.zeros((3, 3, 3), np.uint8), 4, 8, '3 channels of 8 bits'),
        (np.zeros((3, 3, 4), np.uint8), 4, 16, '4 channels of 8 bits')):
      path = self._write('x.png', encode.encode_pixels_png(pixels))
      with self.assertRaisesRegex(
          validation.ConfigurationError,
          f'^{path} has {stored}; the model reads {channels} channels of '
          f'{bit_depth} bits [^\n]*$'):
        self._read(path, channels, bit_depth)

  def test_other_bytes_are_no_image(self):
    self.assertIsNone(image_files.encoded_file(b'not an image'))
    self.assertIsNone(image_files.read(self._write('x.png', b'GIF89a')))


if __name__ == '__main__':
  tf.test.main()

"""Label PNGs: lossless class ids, and values an 8-bit PNG cannot hold."""

import io

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import encode


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

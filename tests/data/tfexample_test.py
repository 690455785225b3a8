"""Tests for the DeepLab TFExample format."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.data import encode
from official_seg.data import tfexample


def _example(image, label, filename='a.png', image_format='png'):
  encode = tf.io.encode_png if image_format == 'png' else tf.io.encode_jpeg
  return tfexample.make_example(
      encode(image).numpy(), tf.io.encode_png(label).numpy(), filename,
      image_format, image.shape[0], image.shape[1])


class TfExampleTest(tf.test.TestCase, parameterized.TestCase):

  def test_keys_are_deeplab_keys(self):
    example = _example(np.zeros((4, 5, 3), np.uint8), np.zeros((4, 5, 1), np.uint8))
    self.assertCountEqual(example.features.feature.keys(), [
        'image/encoded', 'image/filename', 'image/format', 'image/height',
        'image/width', 'image/channels', 'image/segmentation/class/encoded',
        'image/segmentation/class/format'])

  @parameterized.parameters('png', 'jpeg')
  def test_decode_round_trips_label_exactly(self, image_format):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    label = rng.integers(0, 4, (6, 7, 1), dtype=np.uint8)
    label[0, 0] = 255
    serialized = _example(image, label, 'x.jpg', image_format).SerializeToString()
    decoded = tfexample.Decoder().decode(tf.constant(serialized))
    self.assertAllEqual(decoded['label'], label)
    self.assertEqual(decoded['image'].shape, (6, 7, 3))
    self.assertEqual(int(decoded['height']), 6)
    self.assertEqual(int(decoded['width']), 7)
    self.assertEqual(decoded['filename'].numpy(), b'x.jpg')
    if image_format == 'png':
      self.assertAllEqual(decoded['image'], image)

  def test_size_mismatch_names_the_file(self):
    serialized = _example(np.zeros((4, 5, 3), np.uint8),
                          np.zeros((4, 6, 1), np.uint8),
                          'broken_007.png').SerializeToString()
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                'broken_007.png'):
      tfexample.Decoder().decode(tf.constant(serialized))

  def test_bytes_that_are_not_an_image_name_the_file(self):
    label = tf.io.encode_png(np.zeros((4, 5, 1), np.uint8)).numpy()
    example = tfexample.make_example(b'not an image at all', label,
                                     'garbled_3.jpg', 'jpeg', 4, 5)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)not a JPEG or PNG.*garbled_3.jpg'):
      tfexample.Decoder().decode(tf.constant(example.SerializeToString()))

  def test_label_that_is_not_png_names_the_file(self):
    image = np.zeros((4, 5, 3), np.uint8)
    example = tfexample.make_example(
        tf.io.encode_png(image).numpy(), tf.io.encode_jpeg(image).numpy(),
        'jpeg_label.png', 'png', 4, 5)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)class/encoded is not a PNG.*jpeg_label.png'):
      tfexample.Decoder().decode(tf.constant(example.SerializeToString()))

  def test_example_without_label_decodes_only_when_labels_are_optional(self):
    image = np.random.default_rng(1).integers(0, 256, (5, 6, 3), np.uint8)
    example = tfexample.make_example(tf.io.encode_png(image).numpy(), None,
                                     'u.png', 'png', 5, 6)
    self.assertNotIn(tfexample.LABEL_ENCODED, example.features.feature)
    serialized = tf.constant(example.SerializeToString())
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)not a PNG image.*u.png'):
      tfexample.Decoder().decode(serialized)
    decoded = tfexample.Decoder(label_optional=True).decode(serialized)
    self.assertAllEqual(decoded['image'], image)
    self.assertAllEqual(decoded['label'], np.zeros((5, 6, 1), np.uint8))
    self.assertFalse(decoded['has_label'])
    labeled = _example(image, np.full((5, 6, 1), 3, np.uint8))
    decoded = tfexample.Decoder(label_optional=True).decode(
        tf.constant(labeled.SerializeToString()))
    self.assertTrue(decoded['has_label'])
    self.assertAllEqual(decoded['label'], np.full((5, 6, 1), 3))

  def test_bytes_that_are_not_an_example_fail_cleanly(self):
    with self.assertRaises(tf.errors.DataLossError):
      tfexample.Decoder().decode(tf.constant(b'\xf3\xfe\x08\xfa garbage'))

  def test_placeholder_example_decodes_to_one_black_pixel(self):
    decoded = tfexample.Decoder().decode(
        tf.constant(tfexample.placeholder_example()))
    self.assertAllEqual(decoded['image'], np.zeros((1, 1, 3), np.uint8))
    self.assertAllEqual(decoded['label'], np.zeros((1, 1, 1), np.uint8))
    self.assertEqual(decoded['filename'].numpy(), b'')

  @parameterized.parameters(
      (b'\x89PNG\r\n\x1a\n', True), (b'\x89PNG\r\n\x1a\nIHDR', True),
      (b'\x89PNG\r\n', False), (b'\xff\xd8\xff\xe0', False), (b'', False))
  def test_is_png_reads_the_signature(self, encoded, expected):
    self.assertEqual(bool(tfexample.is_png(tf.constant(encoded))), expected)

  def test_is_png_of_a_batch(self):
    image = np.zeros((2, 3, 3), np.uint8)
    batch = tf.constant([tf.io.encode_png(image).numpy(),
                         tf.io.encode_jpeg(image).numpy(), b'nope'])
    self.assertAllEqual(tfexample.is_png(batch), [True, False, False])

  def test_encoded_keeps_the_bytes(self):
    example = _example(np.zeros((4, 5, 3), np.uint8),
                       np.ones((4, 5, 1), np.uint8), 'e.jpg', 'jpeg')
    feature = example.features.feature
    image, label, filename = tfexample.Decoder().encoded(
        tf.constant(example.SerializeToString()))
    self.assertEqual(image.numpy(),
                     feature[tfexample.IMAGE_ENCODED].bytes_list.value[0])
    self.assertEqual(label.numpy(),
                     feature[tfexample.LABEL_ENCODED].bytes_list.value[0])
    self.assertEqual(filename.numpy(), b'e.jpg')

  def test_decode_label_equals_the_label_of_decode(self):
    label = np.random.default_rng(1).integers(0, 5, (6, 7, 1)).astype(np.uint8)
    serialized = tf.constant(_example(np.zeros((6, 7, 3), np.uint8),
                                      label).SerializeToString())
    self.assertAllEqual(tfexample.Decoder().decode_label(serialized), label)

  def test_decode_label_of_a_non_png_label_names_the_file(self):
    image = np.zeros((4, 5, 3), np.uint8)
    example = tfexample.make_example(
        tf.io.encode_png(image).numpy(), tf.io.encode_jpeg(image).numpy(),
        'jpeg_label.png', 'png', 4, 5)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)not a PNG.*jpeg_label.png'):
      tfexample.Decoder().decode_label(tf.constant(
          example.SerializeToString()))

  def test_record_filename_reads_the_name_alone(self):
    # Bytes that are no image pass: nothing but the name is read.
    example = tfexample.make_example(b'not an image', b'', 'a\u00e9.png',
                                     'png', 1, 1)
    example.features.feature[tfexample.IMAGE_FILENAME].bytes_list.value[
        0] = b'bad\xff.png'
    self.assertEqual(tfexample.record_filename(tf.constant(
        example.SerializeToString())).numpy(), 'bad\ufffd.png'.encode())
    good = _example(np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 1),
                                                            np.uint8),
                    'b\u00e9.png').SerializeToString()
    self.assertEqual(tfexample.record_filename(tf.constant(good)).numpy(),
                     tfexample.Decoder().decode(tf.constant(good))[
                         'filename'].numpy())

  def test_write_shards_names_and_counts(self):
    out = self.create_tempdir().full_path
    examples = [_example(np.zeros((2, 2, 3), np.uint8),
                         np.zeros((2, 2, 1), np.uint8), f'{i}.png')
                for i in range(5)]
    self.assertEqual(tfexample.write_shards(examples, out, 'val', 2), 5)
    self.assertCountEqual(os.listdir(out), ['val-00000-of-00002.tfrecord',
                                            'val-00001-of-00002.tfrecord'])
    records = tf.data.TFRecordDataset(
        tf.io.gfile.glob(tfexample.shard_pattern(out, 'val')))
    self.assertEqual(sum(1 for _ in records), 5)


if __name__ == '__main__':
  tf.test.main()


def _stored_example(image, label):
  """The record the converter writes of uint8 or uint16 [H, W, C] pixels."""
  stored = encode.stored_pixels(image, 'a')
  return tfexample.make_example(
      stored.data, tf.io.encode_png(label).numpy(), 'scan_7',
      stored.image_format,
      stored.height, stored.width, stored.channels)


class ChannelsAndDepthTest(tf.test.TestCase, parameterized.TestCase):
  """Records of 1 to N channels and 8 or 16 bits decode to their values."""

  def setUp(self):
    super().setUp()
    self.rng = np.random.default_rng(0)
    self.label = self.rng.integers(0, 3, (4, 5, 1)).astype(np.uint8)

  def _decode(self, example, channels, bit_depth):
    decoder = tfexample.Decoder(channels=channels, bit_depth=bit_depth)
    return decoder.decode(example.SerializeToString())

  @parameterized.product(channels=(1, 2, 3, 4, 5), dtype=(np.uint8, np.uint16))
  def test_stored_pixels_decode_exactly(self, channels, dtype):
    image = self.rng.integers(0, np.iinfo(dtype).max, (4, 5, channels),
                              endpoint=True).astype(dtype)
    decoded = self._decode(_stored_example(image, self.label), channels,
                           8 * np.dtype(dtype).itemsize)
    self.assertEqual(decoded['image'].dtype, tf.as_dtype(dtype))
    self.assertAllEqual(decoded['image'], image)
    self.assertAllEqual(decoded['label'], self.label)

  def test_8_bit_decoder_refuses_a_16_bit_png_naming_the_file(self):
    image = np.full((4, 5, 3), 4095, np.uint16)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)bit depth 8.*scan_7'):
      self._decode(_stored_example(image, self.label), 3, 8)

  def test_16_bit_decoder_refuses_an_8_bit_png(self):
    image = np.zeros((4, 5, 3), np.uint8)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                'bit depth 16'):
      self._decode(_stored_example(image, self.label), 3, 16)

  def test_raw_pixels_of_another_size_name_the_file(self):
    image = np.zeros((4, 5, 5), np.uint8)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)raw pixels do not number.*scan_7'):
      self._decode(_stored_example(image, self.label), 6, 8)

  def test_png_of_other_channels_names_the_file(self):
    example = tfexample.make_example(
        encode.encode_pixels_png(np.zeros((4, 5, 4), np.uint8)),
        tf.io.encode_png(self.label).numpy(), 'scan_7', 'png', 4, 5, 4)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "(?s)not the dataset's 5 channels.*scan_7"):
      self._decode(example, 5, 8)

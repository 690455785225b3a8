"""Decodes a record's image bytes to pixels of the dataset's channels and depth."""

import tensorflow as tf

from official_seg import validation

_PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def is_png(encoded):
  """Whether encoded images start with the PNG signature.

  The companion of `tf.io.is_jpeg`, which TensorFlow has no PNG twin of.

  Args:
    encoded: tf.string of any shape, encoded images.

  Returns:
    tf.bool of the shape of `encoded`.
  """
  return tf.equal(tf.strings.substr(encoded, 0, len(_PNG_MAGIC)), _PNG_MAGIC)


def assert_with_filename(condition, filename, message):
  """An Assert whose message names the example, as decoding errors must."""
  return tf.debugging.Assert(
      condition, [validation.CHECK_MARK, message, 'in example', filename])


def pixel_type(bit_depth):
  """tf.uint16 for 16 bits a channel, else tf.uint8."""
  return tf.uint16 if bit_depth == 16 else tf.uint8


def _is_png16(encoded):
  """Whether encoded bytes are a PNG of 16 bits a sample (IHDR's depth)."""
  return tf.logical_and(is_png(encoded),
                        tf.equal(tf.strings.substr(encoded, 24, 1), b'\x10'))


def decode_pixels(encoded, channels=3, bit_depth=8, filename=''):
  """Decodes JPEG or PNG bytes to `channels` channels of `bit_depth` bits.

  A JPEG or 8-bit PNG converts between 1, 3 and 4 channels as
  `tf.io.decode_image` does (grey repeated, alpha dropped); a 16-bit PNG
  keeps its values, which an 8-bit decode would cut to their high byte, so
  the depth must be the image's.

  Args:
    encoded: scalar string, JPEG or PNG bytes.
    channels: 1, 3 or 4.
    bit_depth: 8 (uint8) or 16 (uint16, PNG only).
    filename: scalar string naming the example in errors.

  Returns:
    uint8 or uint16 [H, W, channels].

  Raises:
    tf.errors.InvalidArgumentError: at run time, a 16-bit PNG where the
      depth is 8, or another image where it is 16.
  """
  wide = _is_png16(encoded)
  check = assert_with_filename(
      wide if bit_depth == 16 else tf.logical_not(wide), filename,
      f'the image is not of the dataset\'s bit depth {bit_depth} '
      '(IMAGE_BIT_DEPTH; the split metadata file gives the records\' depth)')
  with tf.control_dependencies([check]):
    if bit_depth == 16:
      return tf.io.decode_png(encoded, channels=channels, dtype=tf.uint16)
    return tf.io.decode_image(encoded, channels=channels,
                              expand_animations=False)


def decode_stored(encoded, height, width, channels, bit_depth, filename=''):
  """Decodes a PNG as it is, or raw little-endian pixels of a given size.

  For the channel counts `decode_pixels` does not decode to (2, or more
  than 4), which the dataset converter stores raw.

  Args:
    encoded: scalar string, PNG bytes or raw pixels.
    height: scalar int, the image's height (the record's), for raw pixels.
    width: scalar int, likewise its width.
    channels: int, the dataset's channels.
    bit_depth: 8 or 16.
    filename: scalar string naming the example in errors.

  Returns:
    uint8 or uint16 [H, W, channels].

  Raises:
    tf.errors.InvalidArgumentError: at run time, raw pixels that do not
      number height x width x channels, or another channel count.
  """
  dtype = pixel_type(bit_depth)
  shape = tf.cast(tf.stack([height, width, channels]), tf.int32)

  def raw():
    values = tf.io.decode_raw(encoded, dtype, little_endian=True)
    check = assert_with_filename(
        tf.equal(tf.size(values), tf.reduce_prod(shape)), filename,
        'raw pixels do not number image/height x image/width x channels')
    with tf.control_dependencies([check]):
      return tf.reshape(values, shape)

  image = tf.cond(is_png(encoded),
                  lambda: tf.io.decode_png(encoded, dtype=dtype), raw)
  check = assert_with_filename(
      tf.equal(tf.shape(image)[2], channels), filename,
      f'the image has not the dataset\'s {channels} channels '
      '(IMAGE_CHANNELS)')
  with tf.control_dependencies([check]):
    return tf.ensure_shape(tf.identity(image), [None, None, channels])

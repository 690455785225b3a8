"""The DeepLab TFExample format: writing examples and shards, and decoding them."""

import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import encode
from official_seg.data import example_proto
from official_seg.data import pixels

IMAGE_ENCODED = 'image/encoded'
IMAGE_FILENAME = 'image/filename'
IMAGE_FORMAT = 'image/format'
IMAGE_HEIGHT = 'image/height'
IMAGE_WIDTH = 'image/width'
IMAGE_CHANNELS = 'image/channels'
LABEL_ENCODED = 'image/segmentation/class/encoded'
LABEL_FORMAT = 'image/segmentation/class/format'

SHARD_SUFFIX = '.tfrecord'


def _bytes(value):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def make_example(image_bytes, label_bytes, filename, image_format, height,
                 width, channels=3):
  """Builds one DeepLab-format example.

  Args:
    image_bytes: bytes, the encoded JPEG or PNG image, or raw pixels
      (`encode.RAW_FORMAT`).
    label_bytes: bytes, the single-channel PNG label map; None writes an
      example without one (unlabeled data, see `Decoder`).
    filename: str, the image's name, reported in errors and predictions.
    image_format: str, 'jpeg', 'png' or `encode.RAW_FORMAT`.
    height: int, image height in pixels.
    width: int, image width in pixels.
    channels: int, image channels.

  Returns:
    A `tf.train.Example`.
  """
  feature = {
      IMAGE_ENCODED: _bytes(image_bytes),
      IMAGE_FILENAME: _bytes(filename.encode('utf-8')),
      IMAGE_FORMAT: _bytes(image_format.encode('utf-8')),
      IMAGE_HEIGHT: _int64(height),
      IMAGE_WIDTH: _int64(width),
      IMAGE_CHANNELS: _int64(channels),
  }
  if label_bytes is not None:
    feature.update({LABEL_ENCODED: _bytes(label_bytes),
                    LABEL_FORMAT: _bytes(b'png')})
  return tf.train.Example(features=tf.train.Features(feature=feature))


def placeholder_example():
  """A serialized example of a 1x1 black image and label 0, no filename.

  Returns:
    bytes; it decodes like any example, so a pipeline can use it as a marker.
  """
  # Encoded in Python, not with tf.io: this also runs while building graphs.
  png = encode.encode_png(np.zeros((1, 1), np.uint8))
  return make_example(png, png, '', 'png', 1, 1).SerializeToString()


def shard_path(output_dir, split, index, num_shards):
  """Returns `<output_dir>/<split>-NNNNN-of-NNNNN.tfrecord`."""
  return os.path.join(
      output_dir, f'{split}-{index:05d}-of-{num_shards:05d}{SHARD_SUFFIX}')


def shard_pattern(data_dir, split):
  """Returns the glob that matches every shard of `split` in `data_dir`."""
  return os.path.join(data_dir, f'{split}-?????-of-?????{SHARD_SUFFIX}')


def write_shards(examples, output_dir, split, num_shards):
  """Writes serialized examples round-robin into `num_shards` shards.

  Args:
    examples: iterable of `tf.train.Example`.
    output_dir: str, the folder to write into; created when missing.
    split: str, the split name that prefixes each shard.
    num_shards: int, how many shards to write.

  Returns:
    The number of examples written.
  """
  tf.io.gfile.makedirs(output_dir)
  writers = [tf.io.TFRecordWriter(shard_path(output_dir, split, i, num_shards))
             for i in range(num_shards)]
  count = 0
  try:
    for count, example in enumerate(examples, start=1):
      writers[(count - 1) % num_shards].write(example.SerializeToString())
  finally:
    for writer in writers:
      writer.close()
  return count


# The companion of `tf.io.is_jpeg`; records and served bytes alike.
is_png = pixels.is_png


def decode_rgb(encoded):
  """Decodes JPEG or PNG bytes as evaluation and serving both do.

  decode_image handles JPEG and PNG alike; expand_animations=False keeps
  the rank static at 3, which the rest of the pipeline relies on.

  Args:
    encoded: scalar string, JPEG or PNG bytes.

  Returns:
    uint8 [H, W, 3].
  """
  return tf.io.decode_image(encoded, channels=3, expand_animations=False)


def record_filename(serialized):
  """The `image/filename` of a serialized example, nothing else read or checked.

  Decoded as `Decoder` decodes it (invalid UTF-8 replaced), so the two agree.

  Raises:
    tf.errors.DataLossError: at run time, for bytes that are not an Example.
  """
  values, _ = example_proto.parse(serialized, {IMAGE_FILENAME: b''}, {})
  return tf.strings.unicode_transcode(
      values[IMAGE_FILENAME], input_encoding='UTF-8', output_encoding='UTF-8',
      errors='replace')


class Decoder:
  """Parses serialized DeepLab examples into image, label and metadata tensors.

  Args:
    label_optional: bool; False (labeled data) makes an example without a
      label map an error, True (unlabeled data) decodes it with an all-zero
      label and 'has_label' False.
    channels: int, the channels images decode to (the dataset's).
    bit_depth: 8 or 16, their bits a channel (the dataset's).
  """

  def __init__(self, label_optional=False, channels=3, bit_depth=8):
    self._label_optional = label_optional
    self._channels = channels
    self._bit_depth = bit_depth
    self._strings = {IMAGE_ENCODED: b'', IMAGE_FILENAME: b'',
                     LABEL_ENCODED: b'', IMAGE_FORMAT: b''}

  def encoded(self, serialized):
    """The encoded image and label of one example, checked but not decoded.

    Args:
      serialized: scalar tf.string, a serialized `tf.train.Example`.

    Returns:
      (image, label, filename): scalar tf.string each; the image is JPEG or
      PNG bytes or raw pixels (`encode.RAW_FORMAT`), the label PNG bytes.

    Raises:
      tf.errors.DataLossError: at run time, for bytes that are not an
        Example.
      tf.errors.InvalidArgumentError: at run time, when the image is not a
        JPEG, PNG or raw pixels or the label not a PNG; the message names
        the example's filename.
    """
    values, _ = example_proto.parse(serialized, self._strings, {})
    # Invalid UTF-8 in a (corrupt) filename would make the error messages
    # that quote it fail to decode in Python; replace those bytes.
    filename = tf.strings.unicode_transcode(
        values[IMAGE_FILENAME], input_encoding='UTF-8',
        output_encoding='UTF-8', errors='replace')
    image, label = values[IMAGE_ENCODED], values[LABEL_ENCODED]
    label_ok = is_png(label)
    if self._label_optional:
      label_ok = tf.logical_or(label_ok, tf.equal(label, b''))
    checks = [
        pixels.assert_with_filename(
            tf.reduce_any([tf.io.is_jpeg(image), is_png(image),
                           tf.equal(values[IMAGE_FORMAT], encode.RAW_FORMAT)]),
            filename, f'{IMAGE_ENCODED} is not a JPEG or PNG image'),
        pixels.assert_with_filename(label_ok, filename,
                              f'{LABEL_ENCODED} is not a PNG image'),
    ]
    with tf.control_dependencies(checks):
      return tf.identity(image), tf.identity(label), filename

  def decode(self, serialized):
    """Decodes one serialized example.

    Args:
      serialized: scalar tf.string, a serialized `tf.train.Example`.

    Returns:
      A dict with 'image' (uint8, or uint16 at 16 bits, [H, W, channels]),
      'label' (uint8 [H, W, 1]),
      'filename' (scalar string), 'height' and 'width' (scalar int32 of the
      decoded image); with `label_optional`, also 'has_label' (bool scalar;
      when False the label is all 0).

    Raises:
      tf.errors.DataLossError: at run time, for bytes that are not an
        Example.
      tf.errors.InvalidArgumentError: at run time, when the image is not a
        JPEG, PNG or raw pixels, not of the bit depth, the label not a PNG,
        or their sizes differ; the message names the example's filename.
    """
    image_bytes, label_bytes, filename = self.encoded(serialized)
    image = self._decode_image(serialized, image_bytes, filename)
    image_size = tf.shape(image)[:2]
    if self._label_optional:
      has_label = tf.not_equal(label_bytes, b'')
      label = tf.cond(
          has_label, lambda: tf.io.decode_png(label_bytes, channels=1),
          lambda: tf.zeros(tf.concat([image_size, [1]], 0), tf.uint8))
    else:
      label = tf.io.decode_png(label_bytes, channels=1)
    check = tf.debugging.Assert(
        tf.reduce_all(tf.equal(image_size, tf.shape(label)[:2])),
        [validation.CHECK_MARK, 'Image and label sizes differ in example',
         filename, 'image',
         image_size, 'label', tf.shape(label)[:2]])
    with tf.control_dependencies([check]):
      label = tf.identity(label)
    decoded = {
        'image': image,
        'label': label,
        'filename': filename,
        'height': image_size[0],
        'width': image_size[1],
    }
    if self._label_optional:
      decoded['has_label'] = has_label
    return decoded

  def _decode_image(self, serialized, image_bytes, filename):
    """The decoded image; a raw one takes its size from the record."""
    if self._channels in encode.PNG_CHANNELS:
      return pixels.decode_pixels(image_bytes, self._channels,
                                  self._bit_depth, filename)
    values, _ = example_proto.parse(serialized, {},
                                    {IMAGE_HEIGHT: 0, IMAGE_WIDTH: 0})
    return pixels.decode_stored(
        image_bytes, values[IMAGE_HEIGHT], values[IMAGE_WIDTH],
        self._channels, self._bit_depth, filename)

  def decode_label(self, serialized):
    """Decodes the label of one serialized example, leaving the image encoded.

    Args:
      serialized: scalar tf.string, a serialized `tf.train.Example`.

    Returns:
      uint8 [H, W, 1].

    Raises:
      The run-time errors of `encoded`.
    """
    _, label_bytes, _ = self.encoded(serialized)
    return tf.io.decode_png(label_bytes, channels=1)

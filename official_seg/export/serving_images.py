"""The serving receiver's images: encoded bytes or pixels to the eval parser's batch."""

import tensorflow as tf

from official_seg import validation
from official_seg.data import pixels as pixels_lib


def decode(encoded, channels=3, bit_depth=8):
  """JPEG or PNG bytes decoded as the dataset's records are.

  Args:
    encoded: scalar string.
    channels: int, the dataset's; a count other than 1, 3 or 4 takes a PNG
      of that many channels.
    bit_depth: 8 or 16, the dataset's.

  Returns:
    uint8 or uint16 [H, W, channels].
  """
  if channels in (1, 3, 4):
    return pixels_lib.decode_pixels(encoded, channels, bit_depth)
  return pixels_lib.decode_stored(encoded, 0, 0, channels, bit_depth)


def _decode_one(encoded, index, parser):
  """Decodes input `index` of a batch and preprocesses it as evaluation does.

  Args:
    encoded: scalar string, the input's bytes.
    index: scalar int32, its index in the batch, for the error message.
    parser: the eval `preprocess.Parser`.

  Returns:
    (image float32 ragged [h, (w), C], normalized as the eval parser does;
     size int32 [2] of that image; original size int32 [2] as decoded).
  """
  # decode_image's own error does not say which input of the batch failed.
  check = tf.debugging.Assert(
      tf.logical_or(tf.io.is_jpeg(encoded), pixels_lib.is_png(encoded)),
      [validation.CHECK_MARK, tf.strings.format(
          'input {} of the batch ({} bytes) is not a JPEG or PNG image; '
          'send encoded JPEG or PNG bytes, or use the image_tensor signature '
          'for decoded pixels.', [index, tf.strings.length(encoded)])])
  with tf.control_dependencies([check]):
    decoded = decode(encoded, parser.image_channels, parser.image_bit_depth)
  image = parser.serving_image(decoded)
  return (tf.RaggedTensor.from_tensor(image, ragged_rank=1),
          tf.shape(image)[:2], tf.shape(decoded)[:2])


def decode_images(encoded, parser):
  """Decodes a batch of encoded images into one padded, normalized batch.

  Each image is preprocessed by the eval parser's own `serving_image` and
  sits in the top-left corner, padded with 0 (the mean pixel once
  normalized): exactly the eval parser's output for that image.

  Args:
    encoded: string [B], JPEG or PNG bytes.
    parser: the eval `preprocess.Parser`; its crop size is the least padded
      size, and a batch with a larger image is padded to its largest height
      and width.

  Returns:
    (images float32 [B, H, W, C] normalized, sizes int32 [B, 2] of each
    image in `images`, original_sizes int32 [B, 2] as decoded).

  Raises:
    tf.errors.InvalidArgumentError: at run time, an input is not a JPEG or
      PNG image; the message names its index in the batch.
  """
  index, channels = tf.range(tf.shape(encoded)[0]), parser.image_channels
  images, sizes, original_sizes = tf.map_fn(
      lambda args: _decode_one(*args, parser), (encoded, index),
      fn_output_signature=(
          tf.RaggedTensorSpec([None, None, channels], tf.float32,
                              ragged_rank=1),
          tf.TensorSpec([2], tf.int32), tf.TensorSpec([2], tf.int32)))
  padded = tf.maximum(tf.constant(parser.crop_size, tf.int32),
                      tf.reduce_max(sizes, axis=0))
  images = images.to_tensor(
      default_value=0.0,
      shape=tf.stack([tf.shape(encoded)[0], padded[0], padded[1], channels]))
  return images, sizes, original_sizes


def pixels_features(pixels, parser):
  """The image_tensor alternative: float pixels normalized, sizes as given."""
  shape = tf.shape(pixels)
  rows = tf.reshape(pixels, [shape[0] * shape[1], shape[2], shape[3]])
  images = tf.reshape(parser.normalize(rows), shape)
  sizes = tf.tile(shape[None, 1:3], [shape[0], 1])
  return images, sizes, sizes


def padded_to_crop(images, sizes, crop_size):
  """The batch padded with 0 to exactly the crop size, a static shape.

  Raises:
    tf.errors.InvalidArgumentError: at run time, an image (after the eval
      parser's resize) is larger than the crop.
  """
  height, width = crop_size
  check = tf.debugging.Assert(
      tf.reduce_all(tf.shape(images)[1:3] <= crop_size),
      [validation.CHECK_MARK, tf.strings.format(
          'a quantization-aware model serves images of at most '
          'EVAL_CROP_SIZE = {} (after the eval parser\'s resize); got sizes '
          '{}.', [tf.constant(crop_size), sizes])])
  with tf.control_dependencies([check]):
    padded = tf.image.pad_to_bounding_box(images, 0, 0, height, width)
  return tf.ensure_shape(padded, [None, height, width, images.shape[-1]])

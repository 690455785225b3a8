"""Reads image files of any channels and depth for a model, refusing another kind."""

import os
import struct

import tensorflow as tf

from official_seg import validation
from official_seg.data import encode
from official_seg.data import pixels as pixels_lib

# Extensions of the files a prediction reads.
EXTENSIONS = ('.jpg', '.jpeg', '.png') + encode.TIFF_EXTENSIONS


def encoded_file(data):
  """The `encode.ImageFile` of JPEG or PNG bytes, from their header alone.

  Args:
    data: bytes.

  Returns:
    `encode.ImageFile` ('jpeg' or 'png', the stored channels and depth; a
    palette PNG counts 3 channels, as it decodes), or None for other bytes.
  """
  if data.startswith(b'\x89PNG\r\n\x1a\n') and len(data) >= 26:
    depth, channels = encode.png_header(data)
    width, height = struct.unpack('>II', data[16:24])
    return encode.ImageFile(data, 'png', height, width, channels,
                            16 if depth == 16 else 8)
  if data.startswith(b'\xff\xd8'):
    height, width, channels = (
        int(v) for v in tf.io.extract_jpeg_shape(data).numpy())
    return encode.ImageFile(data, 'jpeg', height, width, channels, 8)
  return None


def read(path):
  """The `encode.ImageFile` of a JPEG, PNG or TIFF file (None: neither).

  A TIFF (read by tifffile) becomes a PNG of its depth for 1, 3 or 4
  channels, else raw pixels (`encode.stored_pixels`).

  Raises:
    layouts.DatasetError: an unreadable TIFF; names the file.
  """
  if os.path.splitext(path)[1].lower() in encode.TIFF_EXTENSIONS:
    return encode.stored_pixels(encode.read_tiff(path), path)
  with tf.io.gfile.GFile(path, 'rb') as f:
    return encoded_file(f.read())


def check_kind(found, name, channels, bit_depth):
  """Raises unless the image is of the model's channels and depth.

  An 8-bit image of 1, 2 or 4 channels counts as RGB for a model of 8-bit
  RGB, which decodes it as the records and the SavedModel do (grey
  repeated, alpha dropped).

  Args:
    found: `encode.ImageFile`.
    name: str, the file, for the message.
    channels: int, the model's channels (its dataset's IMAGE_CHANNELS).
    bit_depth: 8 or 16, its bits a channel (IMAGE_BIT_DEPTH).

  Raises:
    validation.ConfigurationError: another channel count or depth; one
      line naming the file.
  """
  stored = (found.channels, found.bit_depth)
  as_rgb = (channels, bit_depth) == (3, 8) and found.bit_depth == 8
  if stored == (channels, bit_depth) or (
      as_rgb and found.image_format != encode.RAW_FORMAT):
    return
  raise validation.ConfigurationError(
      f'{name} has {found.channels} channels of {found.bit_depth} bits; the '
      f'model reads {channels} channels of {bit_depth} bits (its dataset\'s '
      'IMAGE_CHANNELS and IMAGE_BIT_DEPTH).')


def decode(found, name, channels, bit_depth):
  """The pixels of an image, checked against the model's kind.

  Decoded as the records' and the SavedModel's images are
  (`pixels.decode_pixels`, `pixels.decode_stored`).

  Args:
    found: `encode.ImageFile`.
    name: str, the file, for messages.
    channels: int, the model's channels.
    bit_depth: 8 or 16, the model's bits a channel.

  Returns:
    NumPy uint8 or uint16 (16 bits) [h, w, channels].

  Raises:
    validation.ConfigurationError: see `check_kind`.
  """
  check_kind(found, name, channels, bit_depth)
  data = tf.constant(found.data)
  if channels in encode.PNG_CHANNELS and found.image_format != (
      encode.RAW_FORMAT):
    image = pixels_lib.decode_pixels(data, channels, bit_depth, name)
  else:
    image = pixels_lib.decode_stored(data, found.height, found.width,
                                     channels, bit_depth, name)
  return image.numpy()

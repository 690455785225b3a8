"""Reads, checks and encodes one image and label pair; runs in worker processes."""

import collections
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image

from official_seg.data.layouts import DatasetError

# Encoded formats that tf.io.decode_image(channels=3) turns into the same
# uint8 pixels Pillow reads, by Pillow format and mode; anything else (CMYK,
# 16-bit, BMP, ...) is re-encoded as an RGB PNG, which is lossless.
_PASSTHROUGH = {
    'JPEG': ('jpeg', ('RGB', 'L')),
    'PNG': ('png', ('RGB', 'RGBA', 'L', 'LA', 'P')),
}
_LABEL_MODES = ('P', 'L')
# Pillow's modes of more than 8 bits a channel; a label of one is refused.
_WIDE_MODES = ('I', 'I;16', 'I;16B', 'I;16L', 'F')
# The image format of records that hold pixels as they are: little-endian
# uint8 or uint16 [H, W, C], for the channel counts a PNG cannot hold.
RAW_FORMAT = 'raw'
# Channels a PNG holds and TensorFlow's PNG decoder returns.
PNG_CHANNELS = (1, 3, 4)
TIFF_EXTENSIONS = ('.tif', '.tiff')
_PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
# PNG colour type of each channel count, and channels of each colour type
# (a palette PNG decodes as RGB).
_PNG_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}
_PNG_TYPE_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
_PILLOW_CHANNELS = {'1': 1, 'L': 1, 'P': 3, 'RGB': 3, 'RGBA': 4, 'LA': 2}

# channels and bit_depth: of the pixels stored, as `ImageFile`'s.
Encoded = collections.namedtuple('Encoded', [
    'name', 'image_bytes', 'image_format', 'label_bytes', 'height', 'width',
    'class_counts', 'channels', 'bit_depth'], defaults=(3, 8))

# data: the bytes a record stores; image_format: 'jpeg', 'png' or
# RAW_FORMAT; channels: 1 to N; bit_depth: 8 or 16.
ImageFile = collections.namedtuple('ImageFile', [
    'data', 'image_format', 'height', 'width', 'channels', 'bit_depth'])


def _open_fully(path, kind):
  """Opens and fully decodes an image file with Pillow.

  Raises:
    DatasetError: unreadable, not an image, or truncated; names the file.
  """
  try:
    with open(path, 'rb') as f:
      data = f.read()
    image = Image.open(io.BytesIO(data))
    # load() decodes every pixel: a truncated file fails here, not later in
    # the training input pipeline.
    image.load()
  except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
    raise DatasetError(
        f'Cannot read {kind} {path}: {e}. The file is unreadable or '
        'truncated; replace it, or remove it from the split.') from None
  return data, image


def _png_chunk(kind, data):
  return (struct.pack('>I', len(data)) + kind + data +
          struct.pack('>I', zlib.crc32(kind + data)))


def encode_pixels_png(pixels):
  """Encodes uint8 or uint16 pixels as a PNG of their depth, losslessly.

  Written out because Pillow writes no 16-bit colour PNG, and the converter's
  workers do not load TensorFlow.

  Args:
    pixels: uint8 or uint16 [H, W, C], C in 1 to 4.

  Returns:
    bytes, a non-interlaced PNG without filters.
  """
  height, width, channels = pixels.shape
  depth = 8 * pixels.dtype.itemsize
  rows = np.ascontiguousarray(pixels, f'>u{pixels.dtype.itemsize}')
  rows = rows.view(np.uint8).reshape(height, -1)
  scanlines = np.concatenate([np.zeros((height, 1), np.uint8), rows], 1)
  header = struct.pack('>IIBBBBB', width, height, depth,
                       _PNG_COLOUR_TYPES[channels], 0, 0, 0)
  return (_PNG_MAGIC + _png_chunk(b'IHDR', header) +
          _png_chunk(b'IDAT', zlib.compress(scanlines.tobytes(), 6)) +
          _png_chunk(b'IEND', b''))


def png_header(data):
  """(bit depth, channels as decoded) from the IHDR chunk of PNG bytes."""
  return data[24], _PNG_TYPE_CHANNELS.get(data[25], 0)


def stored_pixels(pixels, path):
  """Encodes pixels read from a file for a record: PNG or raw.

  Args:
    pixels: uint8 or uint16 [H, W] or [H, W, C].
    path: str, the file, for the message.

  Returns:
    `ImageFile`: a PNG of the pixels' depth for 1, 3 or 4 channels, else
    `RAW_FORMAT` bytes.

  Raises:
    DatasetError: pixels of another type; the message names the file.
  """
  if pixels.dtype.kind != 'u' or pixels.dtype.itemsize > 2:
    raise DatasetError(
        f'Image {path} holds {pixels.dtype} pixels; images must be 8-bit or '
        '16-bit unsigned integers: rescale it to uint16 first.')
  pixels = pixels.reshape(pixels.shape[:2] + (-1,))
  height, width, channels = pixels.shape
  depth = 8 * pixels.dtype.itemsize
  if channels in PNG_CHANNELS:
    return ImageFile(encode_pixels_png(pixels), 'png', height, width,
                     channels, depth)
  data = np.ascontiguousarray(pixels, pixels.dtype.newbyteorder('<'))
  return ImageFile(data.tobytes(), RAW_FORMAT, height, width, channels, depth)


def read_tiff(path):
  """The pixels of a TIFF, height, width and channels (tifffile's series 0).

  tifffile is imported here: only TIFF datasets need it.

  Raises:
    DatasetError: unreadable, or not 2-D with at most one sample axis.
  """
  import tifffile  # pylint: disable=g-import-not-at-top
  try:
    with tifffile.TiffFile(path) as tiff:
      if not tiff.series:
        # A header whose first page's offset leads nowhere: tifffile
        # opens it and finds no image in it.
        raise ValueError('no image in the file')
      series = tiff.series[0]
      pixels, axes = series.asarray(), series.axes
  except (OSError, ValueError, tifffile.TiffFileError) as e:
    raise DatasetError(f'Cannot read image {path}: {e}. The file is '
                       'unreadable or truncated; replace it.') from None
  order = [axes.index(a) for a in 'YX'] + [
      i for i, a in enumerate(axes) if a not in 'YX']
  pixels = np.transpose(pixels, order)
  if pixels.ndim > 3:
    raise DatasetError(f'Image {path} has axes {axes!r}; a TIFF image must '
                       'be one plane of height, width and channels.')
  return pixels


def read_image(path):
  """Reads an image, keeping its encoded bytes when TensorFlow decodes them.

  JPEGs and PNGs are kept as they are (TensorFlow decodes a 16-bit PNG's
  uint16 values); other images are re-encoded losslessly: a PNG of their
  depth for 1, 3 or 4 channels, raw pixels for other counts.

  Args:
    path: str, a JPEG, PNG, TIFF (with the tifffile package) or other image
      Pillow reads.

  Returns:
    `ImageFile`.

  Raises:
    DatasetError: the file is unreadable or truncated, or its pixels are
      neither 8-bit nor 16-bit unsigned integers.
  """
  if os.path.splitext(path)[1].lower() in TIFF_EXTENSIONS:
    return stored_pixels(read_tiff(path), path)
  data, image = _open_fully(path, 'image')
  if image.format == 'PNG':
    depth, channels = png_header(data)
    if depth == 16:  # Pillow reads colour PNGs of 16 bits as 8-bit.
      return ImageFile(data, 'png', image.height, image.width, channels, 16)
  if image.mode in _WIDE_MODES:
    return stored_pixels(np.asarray(image), path)
  image_format, modes = _PASSTHROUGH.get(image.format, (None, ()))
  if image.mode not in modes:
    buffer = io.BytesIO()
    image = image.convert('RGB')
    image.save(buffer, format='PNG')
    data, image_format = buffer.getvalue(), 'png'
  return ImageFile(data, image_format, image.height, image.width,
                   _PILLOW_CHANNELS[image.mode], 8)


def read_label(path):
  """Reads a label map by stored value: the palette index of a palette PNG.

  Args:
    path: str, a single-channel label image.

  Returns:
    uint8 [H, W] array of stored values.

  Raises:
    DatasetError: unreadable, truncated, 16-bit or colour (RGB) labels.
  """
  _, label = _open_fully(path, 'label')
  if label.mode in _WIDE_MODES:
    raise DatasetError(
        f'Label {path} is a {label.mode} image of more than 8 bits; labels '
        'must be 8-bit PNGs of class ids (0-255).')
  if label.mode not in _LABEL_MODES:
    raise DatasetError(
        f'Label {path} is a {label.mode} image; labels must be single-channel '
        'PNGs whose values are class ids (palette PNGs are read by palette '
        'index). Convert colour-coded labels to class ids first.')
  # For mode 'P' this is the palette index, never the RGB colour it shows.
  return np.asarray(label)


def map_label(values, lookup, path, valid_text):
  """Maps stored label values to classes and rejects values of no class.

  Args:
    values: int [H, W], from `read_label`.
    lookup: int16 [256] from `layouts.label_lookup`.
    path: str, the label file, for the message.
    valid_text: str, the valid values in words, for the message.

  Returns:
    uint8 [H, W] class map.

  Raises:
    DatasetError: a value is neither a class nor the ignore label.
  """
  too_large = np.unique(values[values > 255])
  mapped = lookup[np.minimum(values, 255)]
  bad = np.union1d(too_large, np.unique(values[mapped < 0]))
  if bad.size:
    raise DatasetError(
        f'Label {path} has values {bad[:10].tolist()} that are neither a class '
        f'nor the ignore label ({valid_text}). Fix the label, or set '
        'NUM_CLASSES and IGNORE_LABEL in the dataset gin file.')
  return mapped.astype(np.uint8)


def checked_labels(labels):
  """Class ids as the uint8 values of an 8-bit label PNG.

  Args:
    labels: int [H, W], class ids.

  Returns:
    uint8 [H, W].

  Raises:
    ValueError: a value outside 0-255; the message gives the range found.
  """
  labels = np.asarray(labels)
  if labels.dtype != np.uint8 and labels.size and (
      labels.min() < 0 or labels.max() > 255):
    raise ValueError(f'Label values must lie in 0-255 (8-bit PNG); got '
                     f'{labels.min()} to {labels.max()}.')
  return labels.astype(np.uint8)


def encode_png(labels):
  """Encodes class ids as a single-channel (grey) 8-bit PNG, losslessly.

  Args:
    labels: int [H, W], class ids in 0-255.

  Returns:
    bytes.

  Raises:
    ValueError: a value outside 0-255.
  """
  buffer = io.BytesIO()
  Image.fromarray(checked_labels(labels), mode='L').save(buffer, format='PNG')
  return buffer.getvalue()


def encode_pair(pair, lookup, valid_text):
  """Reads, checks and encodes one `layouts.Pair`.

  Args:
    pair: `layouts.Pair`.
    lookup: int16 [256] from `layouts.label_lookup`.
    valid_text: str, the valid label values in words, for messages.

  Returns:
    `Encoded`, whose class_counts is int64 [256], the pixels of each label
    value after mapping.

  Raises:
    DatasetError: unreadable files, sizes that differ, or bad label values;
      the message names the file.
  """
  return encoded_pair(pair, read_image(pair.image), read_label(pair.label),
                      lookup, valid_text)


def encoded_pair(pair, image, values, lookup, valid_text):
  """The `Encoded` of an image read by `read_image` and its label values.

  Raises:
    DatasetError: their sizes differ, or bad label values.
  """
  if values.shape != (image.height, image.width):
    raise DatasetError(
        f'Image {pair.image} is {image.width}x{image.height} but its label '
        f'{pair.label} is {values.shape[1]}x{values.shape[0]} (width x '
        'height); labels must match their images pixel for pixel.')
  label = map_label(values, lookup, pair.label, valid_text)
  return Encoded(pair.name, image.data, image.image_format, encode_png(label),
                 image.height, image.width,
                 np.bincount(label.ravel(), minlength=256), image.channels,
                 image.bit_depth)

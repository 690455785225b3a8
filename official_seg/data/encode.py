"""Reads, checks and encodes one image and label pair; runs in worker processes."""

import collections
import io

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
_LABEL_MODES = ('P', 'L', 'I', 'I;16', 'I;16B', 'I;16L')

Encoded = collections.namedtuple('Encoded', [
    'name', 'image_bytes', 'image_format', 'label_bytes', 'height', 'width',
    'class_counts'])


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


def read_image(path):
  """Reads an image, keeping its encoded bytes when TensorFlow decodes them.

  Args:
    path: str, a JPEG, PNG or other image Pillow reads.

  Returns:
    (encoded bytes, 'jpeg' or 'png', height, width).

  Raises:
    DatasetError: the file is unreadable or truncated.
  """
  data, image = _open_fully(path, 'image')
  image_format, modes = _PASSTHROUGH.get(image.format, (None, ()))
  if image.mode not in modes:
    buffer = io.BytesIO()
    image.convert('RGB').save(buffer, format='PNG')
    data, image_format = buffer.getvalue(), 'png'
  return data, image_format, image.height, image.width


def read_label(path):
  """Reads a label map by stored value: the palette index of a palette PNG.

  Args:
    path: str, a single-channel label image.

  Returns:
    int [H, W] array of stored values (uint8 or uint16).

  Raises:
    DatasetError: unreadable, truncated or colour (RGB) labels.
  """
  _, label = _open_fully(path, 'label')
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
  image_bytes, image_format, height, width = read_image(pair.image)
  values = read_label(pair.label)
  if values.shape != (height, width):
    raise DatasetError(
        f'Image {pair.image} is {width}x{height} but its label {pair.label} is '
        f'{values.shape[1]}x{values.shape[0]} (width x height); labels must '
        'match their images pixel for pixel.')
  label = map_label(values, lookup, pair.label, valid_text)
  return Encoded(pair.name, image_bytes, image_format, encode_png(label),
                 height, width, np.bincount(label.ravel(), minlength=256))

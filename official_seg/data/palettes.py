"""Colours of class ids: the shipped datasets' palettes and custom ones."""

import math

import numpy as np
import tensorflow as tf

from official_seg import validation

PALETTE_NAMES = ('pascal_voc', 'cityscapes', 'ade20k', 'synthetic')
# Cityscapes' colours of the 19 train ids (cityscapesScripts' labels.py).
_CITYSCAPES = (
    (128, 64, 128), (244, 35, 232), (70, 70, 70), (102, 102, 156),
    (190, 153, 153), (153, 153, 153), (250, 170, 30), (220, 220, 0),
    (107, 142, 35), (152, 251, 152), (70, 130, 180), (220, 20, 60),
    (255, 0, 0), (0, 0, 142), (0, 0, 70), (0, 60, 100), (0, 80, 100),
    (0, 0, 230), (119, 11, 32))
# DeepLab's ADE20K colour map (create_ade20k_label_colormap): 151 classes,
# 0 ('other') black.
_ADE20K = (
    (0, 0, 0), (120, 120, 120), (180, 120, 120), (6, 230, 230), (80, 50, 50),
    (4, 200, 3), (120, 120, 80), (140, 140, 140), (204, 5, 255),
    (230, 230, 230), (4, 250, 7), (224, 5, 255), (235, 255, 7), (150, 5, 61),
    (120, 120, 70), (8, 255, 51), (255, 6, 82), (143, 255, 140), (204, 255, 4),
    (255, 51, 7), (204, 70, 3), (0, 102, 200), (61, 230, 250), (255, 6, 51),
    (11, 102, 255), (255, 7, 71), (255, 9, 224), (9, 7, 230), (220, 220, 220),
    (255, 9, 92), (112, 9, 255), (8, 255, 214), (7, 255, 224), (255, 184, 6),
    (10, 255, 71), (255, 41, 10), (7, 255, 255), (224, 255, 8), (102, 8, 255),
    (255, 61, 6), (255, 194, 7), (255, 122, 8), (0, 255, 20), (255, 8, 41),
    (255, 5, 153), (6, 51, 255), (235, 12, 255), (160, 150, 20), (0, 163, 255),
    (140, 140, 140), (250, 10, 15), (20, 255, 0), (31, 255, 0), (255, 31, 0),
    (255, 224, 0), (153, 255, 0), (0, 0, 255), (255, 71, 0), (0, 235, 255),
    (0, 173, 255), (31, 0, 255), (11, 200, 200), (255, 82, 0), (0, 255, 245),
    (0, 61, 255), (0, 255, 112), (0, 255, 133), (255, 0, 0), (255, 163, 0),
    (255, 102, 0), (194, 255, 0), (0, 143, 255), (51, 255, 0), (0, 82, 255),
    (0, 255, 41), (0, 255, 173), (10, 0, 255), (173, 255, 0), (0, 255, 153),
    (255, 92, 0), (255, 0, 255), (255, 0, 245), (255, 0, 102), (255, 173, 0),
    (255, 0, 20), (255, 184, 184), (0, 31, 255), (0, 255, 61), (0, 71, 255),
    (255, 0, 204), (0, 255, 194), (0, 255, 82), (0, 10, 255), (0, 112, 255),
    (51, 0, 255), (0, 194, 255), (0, 122, 255), (0, 255, 163), (255, 153, 0),
    (0, 255, 10), (255, 112, 0), (143, 255, 0), (82, 0, 255), (163, 255, 0),
    (255, 235, 0), (8, 184, 170), (133, 0, 255), (0, 255, 92), (184, 0, 255),
    (255, 0, 31), (0, 184, 255), (0, 214, 255), (255, 0, 112), (92, 255, 0),
    (0, 224, 255), (112, 224, 255), (70, 184, 160), (163, 0, 255),
    (153, 0, 255), (71, 255, 0), (255, 0, 163), (255, 204, 0), (255, 0, 143),
    (0, 255, 235), (133, 255, 0), (255, 0, 235), (245, 0, 255), (255, 0, 122),
    (255, 245, 0), (10, 190, 212), (214, 255, 0), (0, 204, 255), (20, 0, 255),
    (255, 255, 0), (0, 153, 255), (0, 41, 255), (0, 255, 204), (41, 0, 255),
    (41, 255, 0), (173, 0, 255), (0, 245, 255), (71, 0, 255), (122, 0, 255),
    (0, 255, 184), (0, 92, 255), (184, 255, 0), (0, 133, 255), (255, 214, 0),
    (25, 194, 194), (102, 255, 0), (92, 0, 255))
# The synthetic dataset draws red disks, green boxes and blue triangles;
# colours unlike those keep an overlay readable.
_SYNTHETIC = ((0, 0, 0), (255, 215, 0), (255, 0, 255), (0, 255, 255))


def pascal_voc_palette():
  """DeepLab's PASCAL VOC colour map: label bits spread over R, G and B.

  Returns:
    uint8 [256, 3]; 0 is black, 255 (VOC's ignore label) (224, 224, 192).
  """
  palette = np.zeros((256, 3), np.int64)
  ids = np.arange(256)
  for shift in reversed(range(8)):
    for channel in range(3):
      palette[:, channel] |= ((ids >> channel) & 1) << shift
    ids >>= 3
  return palette.astype(np.uint8)


def _padded(colours):
  """Colours of the first ids, black for the rest of 0-255."""
  palette = np.zeros((256, 3), np.uint8)
  palette[:len(colours)] = colours
  return palette


def get_palette(name):
  """The colours of class ids 0-255 in a shipped dataset's palette.

  Args:
    name: one of `PALETTE_NAMES`.

  Returns:
    uint8 [256, 3]; ids a dataset does not name (its ignore label among them)
    are black, except in 'pascal_voc', which colours all 256.

  Raises:
    ValueError: an unknown name; the message lists the known ones.
  """
  if name == 'pascal_voc':
    return pascal_voc_palette()
  named = {'cityscapes': _CITYSCAPES, 'ade20k': _ADE20K,
           'synthetic': _SYNTHETIC}
  if name not in named:
    raise validation.ConfigurationError(
        f'Unknown palette {name!r}; use one of {PALETTE_NAMES}.')
  return _padded(named[name])


def _custom(colours):
  """A palette from a list of [r, g, b], checked; see `resolve`."""
  array = np.asarray(colours)
  if (array.ndim != 2 or array.shape[1] != 3 or len(array) > 256
      or not np.issubdtype(array.dtype, np.integer)
      or array.min(initial=0) < 0 or array.max(initial=0) > 255):
    raise validation.ConfigurationError(
        f'A palette list must hold at most 256 [r, g, b] of integers in '
        f'0-255, one per class; got {colours!r:.200}.')
  return _padded(array)


def resolve(palette):
  """The colours of class ids 0-255 for a `DatasetInfo.palette` value.

  Args:
    palette: None (DeepLab's PASCAL VOC colour map), a name in
      `PALETTE_NAMES`, or a list of [r, g, b] per class, as a dataset gin
      file or an export's metadata holds it.

  Returns:
    uint8 [256, 3]; ids a named or listed palette does not cover are black.

  Raises:
    ValueError: an unknown name, or a list that is not [r, g, b] integers in
      0-255 for at most 256 classes.
  """
  if palette is None:
    return pascal_voc_palette()
  if isinstance(palette, str):
    return get_palette(palette)
  return _custom(palette)


# Ignored pixels in label pictures (TensorBoard, overlays): white, a colour
# no shipped palette gives a class the pictures show.
IGNORE_COLOUR = (255, 255, 255)


def label_colours(palette, ignore_label):
  """The colours of class ids 0-255, the ignore label in `IGNORE_COLOUR`.

  Args:
    palette: a `DatasetInfo.palette` value (see `resolve`).
    ignore_label: int in 0-255.

  Returns:
    uint8 [256, 3].
  """
  colours = resolve(palette).copy()
  colours[ignore_label] = IGNORE_COLOUR
  return colours


def pictures(images, labels, predictions, colours, max_images=3,
             max_side=256):
  """The first few images, labels and predictions as small RGB pictures.

  Runs in the graph (on a TPU too), so only these few small pictures leave
  the device. Labels are subsampled with a whole-pixel stride, never blended,
  so every picture pixel is exactly a class colour.

  Args:
    images: float [B, H, W, C], any normalisation; each picture is stretched
      to its own minimum and maximum. Shown are the first three channels, or
      the first as grey when there are fewer.
    labels: int [B, H, W] or [B, H, W, 1] class ids or the ignore label.
    predictions: int [B, H, W] class ids.
    colours: uint8 [256, 3], from `label_colours`.
    max_images: int, pictures kept of the batch.
    max_side: int; larger sides are subsampled to at most this.

  Returns:
    dict of 'image', 'label' and 'prediction' to uint8 [N, h, w, 3],
    N = min(B, max_images).
  """
  side = max(images.shape[1] or max_side, images.shape[2] or max_side)
  stride = max(1, math.ceil(side / max_side))
  images = tf.cast(images[:max_images, ::stride, ::stride], tf.float32)
  channels = images.shape[-1]
  images = (images[..., :3] if channels >= 3 else
            tf.repeat(images[..., :1], 3, axis=-1))
  low = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
  high = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
  stretched = tf.math.divide_no_nan(images - low, high - low) * 255.0
  colours = tf.constant(colours, tf.uint8)
  labels = tf.reshape(labels, tf.shape(labels)[:3])
  return {
      'image': tf.cast(tf.round(stretched), tf.uint8),
      'label': tf.gather(colours,
                         labels[:max_images, ::stride, ::stride]),
      'prediction': tf.gather(
          colours, predictions[:max_images, ::stride, ::stride]),
  }

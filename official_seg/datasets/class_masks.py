"""Overlapping classes given as one binary mask per class, encoded as one label of bits."""

import os

import numpy as np

from official_seg.data import encode
from official_seg.data import layouts
from official_seg.datasets import colour_masks

DatasetError = layouts.DatasetError
# One bit per class in an 8-bit label, 255 left for the ignore label
# (`modeling.outputs.MAX_SIGMOID_CLASSES`, which this TensorFlow-free module
# cannot import).
MAX_CLASSES = 7
IGNORE_LABEL = 255
# The values a binary mask may hold: 0 (absent) and one of these (present).
_PRESENT_VALUES = (1, 255)


def class_names(mask_dir):
  """The classes of `mask_dir`: its subfolders, sorted by name.

  Raises:
    DatasetError: not a folder, no subfolder, or more than `MAX_CLASSES`.
  """
  if not mask_dir or not os.path.isdir(mask_dir):
    raise DatasetError(f'--label_dir {mask_dir!r} is not a folder; '
                       '--class_masks needs one folder of masks per class.')
  names = sorted(name for name in os.listdir(mask_dir)
                 if os.path.isdir(os.path.join(mask_dir, name)))
  if not names or len(names) > MAX_CLASSES:
    raise DatasetError(
        f'--label_dir {mask_dir} has {len(names)} class folders; '
        f'--class_masks takes 1 to {MAX_CLASSES} (one bit each of an 8-bit '
        'label).')
  return names


def mask_pairs(pairs, mask_dir, names):
  """`layouts.Pair`s whose label is the first class's mask of each image.

  Args:
    pairs: `layouts.Pair`s of the folders layout read with `--label_dir` set
      to the first class's folder.
    mask_dir: str, the folder of class folders.
    names: the class names, `class_names(mask_dir)`.

  Returns:
    The pairs; each class's mask is `mask_paths` of the pair.

  Raises:
    DatasetError: a class's mask of an image is missing; names the file.
  """
  for pair in pairs:
    for path in mask_paths(pair, mask_dir, names):
      if not os.path.isfile(path):
        raise DatasetError(
            f'Image {pair.image} has no mask {path}; --class_masks needs '
            "<label_dir>/<class>/<image stem>.png for every class (all 0 "
            'where the class is absent).')
  return pairs


def mask_paths(pair, mask_dir, names):
  """The mask of each class of one pair, in class order."""
  stem = os.path.basename(pair.label)
  return [os.path.join(mask_dir, name, stem) for name in names]


def read_mask(path, height, width, image):
  """A binary mask as bool [H, W]: 0 is absent, 1 or 255 present.

  Raises:
    DatasetError: a size other than the image's, or values other than 0
      and one of 1 or 255; names the file.
  """
  values = encode.read_label(path)
  if values.shape != (height, width):
    raise DatasetError(
        f'Mask {path} is {values.shape[1]}x{values.shape[0]} but its image '
        f'{image} is {width}x{height} (width x height); masks must match '
        'their images pixel for pixel.')
  found = np.unique(values)
  present = [v for v in found if v != 0]
  if len(present) > 1 or (present and present[0] not in _PRESENT_VALUES):
    raise DatasetError(
        f'Mask {path} is not binary: it holds values {found[:10].tolist()}; '
        'a class mask holds 0 (absent) and 1 or 255 (present).')
  return values > 0


def encode_pair(pair, mask_dir, names):
  """Reads an image and its class masks; the label is their bit mask.

  A pixel's label is the sum of 2**c over the classes c whose mask marks
  it, the sigmoid output kind's labels (`modeling.outputs.label_bits`).

  Args:
    pair: `layouts.Pair` of `mask_pairs`.
    mask_dir: str, the folder of class folders.
    names: the class names.

  Returns:
    `encode.Encoded`, class_counts the pixels of each bit mask value.

  Raises:
    DatasetError: unreadable files, a mask of another size than its image
      or not binary; the message names the file.
  """
  image = encode.read_image(pair.image)
  label = np.zeros([image.height, image.width], np.uint8)
  for bit, path in enumerate(mask_paths(pair, mask_dir, names)):
    mask = read_mask(path, image.height, image.width, pair.image)
    label |= (mask.astype(np.uint8) << bit)
  return encode.Encoded(pair.name, image.data, image.image_format,
                        encode.encode_png(label), image.height, image.width,
                        np.bincount(label.ravel(), minlength=256),
                        image.channels, image.bit_depth)


# The written dataset gin file's lines that make the run read bit masks.
GIN_LINES = (
    '# The labels are bit masks of the classes (build_tfrecords '
    '--class_masks):',
    '# the sigmoid output kind reads them. docs/binary_and_multilabel.md.',
    "include 'heads/sigmoid.gin'")


def colour_map(mask_dir, names):
  """The `colour_masks.ColourMap` the dataset gin file is written from."""
  return colour_masks.ColourMap(mask_dir, tuple(names), np.zeros([0, 3]),
                                np.zeros([0], np.int64), IGNORE_LABEL, None)


def format_counts(counts, names):
  """Each class's pixels and share, from the counts of each bit mask value.

  Args:
    counts: int [256], the pixels of each label value.
    names: the class names, bit c for class c.

  Returns:
    str, one line a class.
  """
  counts = np.asarray(counts, np.int64)
  total = max(int(counts[:IGNORE_LABEL].sum()), 1)
  values = np.arange(IGNORE_LABEL)
  lines = [f'  {"bit":>4} {"class":<24} {"pixels":>14} {"share":>7}']
  for bit, name in enumerate(names):
    pixels = int(counts[:IGNORE_LABEL][(values >> bit) & 1 == 1].sum())
    lines.append(f'  {bit:>4} {name:<24} {pixels:>14,} '
                 f'{100 * pixels / total:>6.2f}%')
  return '\n'.join(lines)

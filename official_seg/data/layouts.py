"""Dataset layouts on disk (VOC, Cityscapes, ADE20K, folders): image-label pairs."""

import collections
import glob
import os

import numpy as np

from official_seg import validation

LAYOUTS = ('voc', 'cityscapes', 'ade20k', 'folders')
# The shipped dataset gin file of each layout: class names, NUM_CLASSES,
# IGNORE_LABEL and SPLIT_SIZES. A 'folders' dataset brings its own.
LAYOUT_GIN_FILES = {
    'voc': 'datasets/pascal_voc.gin',
    'cityscapes': 'datasets/cityscapes.gin',
    'ade20k': 'datasets/ade20k.gin',
}
# VOC label folders, in the order they are tried: DeepLab's colormap-free
# copy, the original palette PNGs, then SBD's augmented set (train_aug).
VOC_LABEL_DIRS = ('SegmentationClassRaw', 'SegmentationClass',
                  'SegmentationClassAug')
# Cityscapes label id -> train id, as labels.py of cityscapesScripts defines
# them; the other ids 0-33 (trainId 255 or -1) map to the ignore label.
CITYSCAPES_TRAIN_IDS = {
    7: 0, 8: 1, 11: 2, 12: 3, 13: 4, 17: 5, 19: 6, 20: 7, 21: 8, 22: 9,
    23: 10, 24: 11, 25: 12, 26: 13, 27: 14, 28: 15, 31: 16, 32: 17, 33: 18}
CITYSCAPES_NUM_IDS = 34
# Train id -> label id, the Cityscapes benchmark server's format.
CITYSCAPES_LABEL_IDS = {train_id: label_id for label_id, train_id
                        in CITYSCAPES_TRAIN_IDS.items()}
ADE20K_SPLIT_DIRS = {'train': 'training', 'val': 'validation'}
# The image files the records and a served model accept: JPEG and PNG.
IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png')
# The folders layout also reads BMP and TIFF: conversion re-encodes them.
_FOLDER_IMAGE_EXTENSIONS = IMAGE_EXTENSIONS + ('.bmp', '.tif', '.tiff')

# name: the image's path relative to the dataset root, stored in the record
# and named in errors; image, label: absolute paths.
Pair = collections.namedtuple('Pair', ['name', 'image', 'label'])


class DatasetError(validation.ConfigurationError):
  """Input data that contradicts its settings; the message names the file at
  fault and what to do (exit status 2)."""


def label_lookup(num_classes, ignore_label, source_ids=None):
  """Builds the table from a stored label value to the written class.

  Args:
    num_classes: int, classes of the dataset.
    ignore_label: int, the label value that counts nowhere.
    source_ids: optional dict from stored id to class (Cityscapes); ids in
      [0, max id] that it does not name map to `ignore_label`. None keeps
      values as they are.

  Returns:
    int16 [256]: the class of each stored value, or -1 where that value is
    neither a class nor the ignore label.
  """
  lookup = np.full(256, -1, np.int16)
  if source_ids is None:
    lookup[:min(num_classes, 256)] = np.arange(min(num_classes, 256))
    lookup[ignore_label] = ignore_label
  else:
    lookup[:max(source_ids) + 1] = ignore_label
    for source_id, class_id in source_ids.items():
      lookup[source_id] = class_id
  return lookup


def layout_lookup(layout, num_classes, ignore_label):
  """The `label_lookup` of a layout (Cityscapes maps ids to train ids)."""
  source_ids = CITYSCAPES_TRAIN_IDS if layout == 'cityscapes' else None
  return label_lookup(num_classes, ignore_label, source_ids)


def to_cityscapes_label_ids(train_ids):
  """Maps Cityscapes train ids (0-18) back to label ids, as the server wants.

  Args:
    train_ids: int [H, W], predicted train ids.

  Returns:
    uint8 [H, W] label ids.

  Raises:
    ValueError: a value is not a Cityscapes train id.
  """
  lookup = np.full(256, -1, np.int64)
  for train_id, label_id in CITYSCAPES_LABEL_IDS.items():
    lookup[train_id] = label_id
  train_ids = np.asarray(train_ids)
  label_ids = lookup[np.clip(train_ids, 0, 255)]
  bad = (train_ids < 0) | (train_ids > 255) | (label_ids < 0)
  if bad.any():
    raise ValueError(f'{np.unique(train_ids[bad])} are not Cityscapes train '
                     'ids (0-18); was the model trained on Cityscapes?')
  return label_ids.astype(np.uint8)


def read_split_list(path):
  """Reads the names of a split list: the first word of each non-blank line.

  Raises:
    DatasetError: the list is missing or names no file.
  """
  if not os.path.isfile(path):
    others = sorted(glob.glob(os.path.join(os.path.dirname(path), '*.txt')))
    raise DatasetError(
        f'Split list {path} does not exist; the lists there are '
        f'{[os.path.basename(p) for p in others]}. Pick a split with --splits.')
  with open(path) as f:
    names = [line.split()[0] for line in f if line.strip()]
  if not names:
    raise DatasetError(f'Split list {path} is empty: the split has no images. '
                       'List one image name per line, or drop the split.')
  return names


def _checked(pairs, source):
  """Returns `pairs`, or raises naming the first missing file and `source`."""
  if not pairs:
    raise DatasetError(f'No images found for {source}: the split is empty. '
                       'Check --input_dir and --splits.')
  for pair in pairs:
    for kind, path in (('image', pair.image), ('label', pair.label)):
      if not os.path.isfile(path):
        raise DatasetError(
            f'{source} needs the {kind} {path}, which does not exist. Add the '
            'file, or remove the image from the split.')
  return pairs


def voc_pairs(input_dir, split, label_subdir=None):
  """Pairs of PASCAL VOC 2012 (`VOCdevkit/VOC2012`) listed in `<split>.txt`.

  Args:
    input_dir: str, the folder holding JPEGImages/ and ImageSets/.
    split: str, a list in ImageSets/Segmentation/ (train, val, trainval,
      train_aug).
    label_subdir: optional label folder; default the first of
      `VOC_LABEL_DIRS` that exists (pass SegmentationClassAug for train_aug).

  Returns:
    A list of `Pair`.

  Raises:
    DatasetError: no label folder, a missing or empty list, a missing file.
  """
  list_path = os.path.join(input_dir, 'ImageSets', 'Segmentation',
                           f'{split}.txt')
  label_dir = _voc_label_dir(input_dir, label_subdir)
  return _checked([
      Pair(os.path.join('JPEGImages', f'{name}.jpg'),
           os.path.join(input_dir, 'JPEGImages', f'{name}.jpg'),
           os.path.join(label_dir, f'{name}.png'))
      for name in read_split_list(list_path)], f'split list {list_path}')


def _voc_label_dir(input_dir, label_subdir):
  candidates = [label_subdir] if label_subdir else VOC_LABEL_DIRS
  for subdir in candidates:
    if os.path.isdir(os.path.join(input_dir, subdir)):
      return os.path.join(input_dir, subdir)
  raise DatasetError(
      f'No label folder {" or ".join(candidates)} in {input_dir}; point '
      '--input_dir at VOCdevkit/VOC2012 or set --label_subdir.')


def cityscapes_pairs(input_dir, split):
  """Pairs of Cityscapes: leftImg8bit/<split>/<city>/ and gtFine labelIds.

  Args:
    input_dir: str, the folder holding leftImg8bit/ and gtFine/.
    split: str, train, val or test.

  Returns:
    A list of `Pair`.

  Raises:
    DatasetError: no image in the split, or an image without its label.
  """
  pattern = os.path.join(input_dir, 'leftImg8bit', split, '*',
                         '*_leftImg8bit.png')
  pairs = []
  for image in sorted(glob.glob(pattern)):
    city = os.path.basename(os.path.dirname(image))
    stem = os.path.basename(image)[:-len('_leftImg8bit.png')]
    label = os.path.join(input_dir, 'gtFine', split, city,
                         f'{stem}_gtFine_labelIds.png')
    pairs.append(Pair(os.path.relpath(image, input_dir), image, label))
  return _checked(pairs, f'Cityscapes split {split!r} ({pattern})')


def ade20k_pairs(input_dir, split):
  """Pairs of ADE20K (ADEChallengeData2016): images/ and annotations/.

  Args:
    input_dir: str, the folder holding images/ and annotations/.
    split: str, train or val (the folders training/ and validation/).

  Returns:
    A list of `Pair`.

  Raises:
    DatasetError: no image in the split, or an image without its label.
  """
  subdir = ADE20K_SPLIT_DIRS.get(split, split)
  pattern = os.path.join(input_dir, 'images', subdir, '*.jpg')
  pairs = []
  for image in sorted(glob.glob(pattern)):
    stem = os.path.splitext(os.path.basename(image))[0]
    label = os.path.join(input_dir, 'annotations', subdir, f'{stem}.png')
    pairs.append(Pair(os.path.relpath(image, input_dir), image, label))
  return _checked(pairs, f'ADE20K split {split!r} ({pattern})')


def _files_by_stem(folder, extensions):
  """Maps file stem to path for the files of `folder` with `extensions`."""
  found = {}
  for name in sorted(os.listdir(folder)):
    stem, extension = os.path.splitext(name)
    if extension.lower() not in extensions:
      continue
    if stem in found:
      raise DatasetError(
          f'{found[stem]} and {os.path.join(folder, name)} have the same stem; '
          'images and labels are matched by stem, so keep only one.')
    found[stem] = os.path.join(folder, name)
  return found


def folder_pairs(image_dir, label_dir, split, split_list_dir=None):
  """Pairs of images and PNG labels in two folders, matched by file stem.

  Args:
    image_dir: str, images (.jpg, .jpeg, .png, .bmp, .tif, .tiff).
    label_dir: str, labels (.png) with the same stems.
    split: str, the split name.
    split_list_dir: optional folder with `<split>.txt` listing stems; without
      it every image of `image_dir` belongs to the split.

  Returns:
    A list of `Pair`.

  Raises:
    DatasetError: a missing folder, list or label, or an empty split.
  """
  for flag, folder in (('--image_dir', image_dir), ('--label_dir', label_dir)):
    if not folder or not os.path.isdir(folder):
      raise DatasetError(f'{flag} {folder!r} is not a folder; the folders '
                         'layout needs --image_dir and --label_dir.')
  images = _files_by_stem(image_dir, _FOLDER_IMAGE_EXTENSIONS)
  if split_list_dir:
    list_path = os.path.join(split_list_dir, f'{split}.txt')
    names, source = read_split_list(list_path), f'split list {list_path}'
  else:
    names, source = sorted(images), f'split {split!r} ({image_dir})'
  pairs = []
  for name in names:
    image = images.get(name, os.path.join(image_dir, f'{name}.<jpg|png>'))
    pairs.append(Pair(os.path.basename(image), image,
                      os.path.join(label_dir, f'{name}.png')))
  return _checked(pairs, source)


def find_pairs(layout, split, input_dir=None, image_dir=None, label_dir=None,
               split_list_dir=None, label_subdir=None):
  """The pairs of one split of a dataset in `layout` (see `LAYOUTS`)."""
  if layout == 'folders':
    return folder_pairs(image_dir, label_dir, split, split_list_dir)
  if not input_dir or not os.path.isdir(input_dir):
    raise DatasetError(f'--input_dir {input_dir!r} is not a folder; the '
                       f'{layout} layout needs the dataset root.')
  if layout == 'voc':
    return voc_pairs(input_dir, split, label_subdir)
  if layout == 'cityscapes':
    return cityscapes_pairs(input_dir, split)
  if layout == 'ade20k':
    return ade20k_pairs(input_dir, split)
  raise DatasetError(f'Unknown --layout {layout!r}; use one of {LAYOUTS}.')

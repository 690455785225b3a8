"""The label values each image of a split holds, kept beside its shards as JSON."""

import json
import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage

# How to write the file for shards made elsewhere; the dataset writers
# (build_tfrecords, make_synthetic_dataset, make_scarce_dataset,
# make_rare_dataset, make_labeled_subset) write it with the shards.
WRITE_COMMAND = ('dataset_stats --gin_file=<your dataset.gin> '
                 '--write_image_classes')


def path(data_dir, split):
  """Returns `<data_dir>/<split>-image-classes.json`."""
  return os.path.join(data_dir, f'{split}-image-classes.json')


def values_present(label_counts):
  """The label values with pixels: sorted ints from an int [256] histogram."""
  return [int(v) for v in np.flatnonzero(np.asarray(label_counts))]


def merged(image_labels, filename, values):
  """Adds one image's label values under its filename, in place.

  Records are keyed by their filename; two records of one name share the
  union of their values, so both get the larger repeat factor.
  """
  known = image_labels.get(filename, [])
  image_labels[filename] = sorted(set(known) | set(values))


def write(data_dir, split, image_labels):
  """Writes the file of a split, whole (`storage.write_whole`).

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    image_labels: dict of record filename to its sorted label values with
      pixels (the ignore label among them when it has pixels).

  Returns:
    str, the path written.
  """
  content = {'split': split,
             'image_labels': {name: image_labels[name]
                              for name in sorted(image_labels)}}
  return storage.write_whole(path(data_dir, split),
                             json.dumps(content) + '\n')


def read(data_dir, split, setting):
  """Reads the file of a split that `setting` needs.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    setting: str, the binding that needs the file, for the message.

  Returns:
    dict of record filename to its label values.

  Raises:
    validation.ConfigurationError: the file is missing or malformed; the
      message names it, the setting and the command that writes it.
  """
  name = path(data_dir, split)
  if not tf.io.gfile.exists(name):
    raise validation.MissingFileError(
        f'{setting} needs {name} (the classes of each image of split '
        f'{split!r}), which is missing: write it with `{WRITE_COMMAND}` '
        f'(DATA_DIR={data_dir!r}, TRAIN_SPLIT={split!r}).')
  with tf.io.gfile.GFile(name, 'rb') as f:
    try:
      image_labels = json.loads(f.read())['image_labels']
    except (ValueError, KeyError, TypeError):
      image_labels = None
  if not isinstance(image_labels, dict) or not all(
      isinstance(v, list) and all(isinstance(x, int) for x in v)
      for v in image_labels.values()):
    raise validation.ConfigurationError(
        f'{name} does not map each record filename to its label values; '
        f'write it again with `{WRITE_COMMAND}`.')
  return image_labels


def presence(image_labels, ignore_label, num_classes=None):
  """Which classes each image holds.

  Args:
    image_labels: dict of filename to label values, as `read` returns.
    ignore_label: int; its pixels are no class.
    num_classes: optional int C; values at or above it are left out. None
      takes 1 + the largest value seen.

  Returns:
    (names, bool [n, C]): the filenames in sorted order and their rows.
  """
  names = sorted(image_labels)
  if num_classes is None:
    num_classes = 1 + max((v for name in names for v in image_labels[name]
                           if v != ignore_label), default=-1)
  rows = np.zeros((len(names), num_classes), bool)
  for row, name in enumerate(names):
    values = [v for v in image_labels[name]
              if v != ignore_label and 0 <= v < num_classes]
    rows[row, values] = True
  return names, rows

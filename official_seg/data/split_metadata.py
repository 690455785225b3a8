"""Facts of a split known before a run, kept beside its shards as JSON."""

import json
import os

import numpy as np
import tensorflow as tf
import tqdm

from official_seg import validation
from official_seg.data import example_proto
from official_seg.data import image_classes
from official_seg.data import input_fn
from official_seg.data import storage
from official_seg.data import tfexample

# Value types of the file's keys; label_histogram maps str(label) to pixels.
_KEYS = {'split': str, 'num_images': int, 'max_height': int, 'max_width': int,
         'label_histogram': dict}
# Keys of files written by the dataset converter; older files lack them.
_OPTIONAL_KEYS = {'channels': int, 'bit_depth': int}
_ADVICE = ('rewrite it from the shards (train_and_eval --dry_run prints its '
           'line) or delete it')
_LABEL_VALUES = 256
# Records per batch handed to Python: tf.data costs per element, not per byte.
_BATCH = 64


def path(data_dir, split):
  """Returns `<data_dir>/<split>-metadata.json`."""
  return os.path.join(data_dir, f'{split}-metadata.json')


class Tally:
  """Accumulates the facts of a split image by image.

  Writers that hold each image's size and label counts add them here rather
  than re-reading the shards they wrote; `compute` uses it too, so both give
  the same dict. Given each record's filename, it keeps the label values of
  each image too (`image_labels`, the `image_classes` file). A writer that
  knows the images' (channels, bit depth) sets `kind`.
  """

  def __init__(self):
    self.kind = None
    self.num_images = 0
    self.max_height = 0
    self.max_width = 0
    self.label_counts = np.zeros(_LABEL_VALUES, np.int64)
    self.image_labels = {}

  def add(self, height, width, label_counts, filename=None):
    """Adds one image.

    Args:
      height: int, image height in pixels.
      width: int, image width in pixels.
      label_counts: int [256], pixels of each label value of its label map.
      filename: optional str, the record's filename (`image/filename`).
    """
    self.num_images += 1
    self.max_height = max(self.max_height, int(height))
    self.max_width = max(self.max_width, int(width))
    self.label_counts += np.asarray(label_counts, np.int64)
    if filename is not None:
      image_classes.merged(self.image_labels, filename,
                           image_classes.values_present(label_counts))

  def metadata(self, split):
    """The metadata dict of the images added so far (see `compute`)."""
    present = np.flatnonzero(self.label_counts)
    metadata = {
        'split': split,
        'num_images': self.num_images,
        'max_height': self.max_height,
        'max_width': self.max_width,
        'label_histogram': {str(value): int(self.label_counts[value])
                            for value in present},
    }
    if self.kind is not None:
      metadata['channels'], metadata['bit_depth'] = (int(v) for v in self.kind)
    return metadata


def merged_kind(kind, other):
  """The (channels, bit depth) of images of two kinds, or None if they differ.

  8-bit grey among 8-bit colour images counts as colour: both decode alike
  as RGB, the grey repeated in each channel.

  Args:
    kind: (channels, bit depth), or None before the first image.
    other: (channels, bit depth).

  Returns:
    (channels, bit depth), or None.
  """
  if kind is None or tuple(kind) == tuple(other):
    return tuple(other)
  if kind[1] == other[1] == 8 and {kind[0], other[0]} <= {1, 3}:
    return (3, 8)
  return None


def _header_size(image, serialized):
  """int32 [2], (height, width) read from a JPEG's or PNG's header, or for
  raw pixels from the record's size features."""

  def png_size():
    # Every PNG starts with its IHDR chunk: big-endian width, then height.
    width_height = tf.io.decode_raw(tf.strings.substr(image, 16, 8),
                                    tf.int32, little_endian=False)
    return tf.reverse(width_height, [0])

  def stored_size():
    values, _ = example_proto.parse(
        serialized, {}, {tfexample.IMAGE_HEIGHT: 0, tfexample.IMAGE_WIDTH: 0})
    return tf.cast(tf.stack([values[tfexample.IMAGE_HEIGHT],
                             values[tfexample.IMAGE_WIDTH]]), tf.int32)

  return tf.cond(
      tf.io.is_jpeg(image), lambda: tf.image.extract_jpeg_shape(image)[:2],
      lambda: tf.cond(tfexample.is_png(image), png_size, stored_size))


def record_facts(serialized):
  """(int32 [2] image size, int64 [256] label counts) of one record."""
  image, label_bytes, filename = tfexample.Decoder().encoded(serialized)
  size = _header_size(image, serialized)
  label = tf.io.decode_png(label_bytes, channels=1)
  check = tf.debugging.Assert(
      tf.reduce_all(tf.equal(size, tf.shape(label)[:2])),
      ['Image and label sizes differ in example', filename, 'image', size,
       'label', tf.shape(label)[:2]])
  with tf.control_dependencies([check]):
    counts = tf.math.bincount(tf.cast(label, tf.int32),
                              minlength=_LABEL_VALUES,
                              maxlength=_LABEL_VALUES, dtype=tf.int64)
  return size, counts


def compute(data_dir, split, progress=False):
  """Reads every record of a split for its metadata.

  Images are not decoded: their sizes come from the JPEG or PNG headers
  (raw pixels' from the record's size features).
  Labels are decoded for the histogram.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    progress: bool, show a progress bar of records read on stderr.

  Returns:
    A JSON-safe dict: 'split' (str), 'num_images', 'max_height', 'max_width'
    (int), 'label_histogram' ({str(label value): int pixels}, values with
    pixels only, in numeric order). The converter's files also hold
    'channels' and 'bit_depth' (int) of the images, which `read` returns
    when present.

  Raises:
    validation.MissingFileError: no shard of the split; the message names
      the pattern.
    tf.errors.OpError: a record that does not read or decode, or whose image
      and label sizes differ; decoding errors name the example.
  """
  dataset = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  dataset = dataset.map(record_facts, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=False)
  tally = Tally()
  with tqdm.tqdm(desc=split, unit='img', disable=not progress) as bar:
    for sizes, counts in dataset.batch(_BATCH).as_numpy_iterator():
      for (height, width), label_counts in zip(sizes, counts):
        tally.add(height, width, label_counts)
      bar.update(len(sizes))
  return tally.metadata(split)


def _ordered(metadata):
  """Keys sorted, label values in numeric order, plain ints throughout."""
  out = {key: metadata[key] for key in sorted(metadata)}
  histogram = metadata['label_histogram']
  out['label_histogram'] = {key: int(histogram[key])
                            for key in sorted(histogram, key=int)}
  for key in ('num_images', 'max_height', 'max_width', *_OPTIONAL_KEYS):
    if key in metadata:
      out[key] = int(metadata[key])
  return out


def line(metadata):
  """One line of JSON with sorted keys: the content of a metadata file.

  Args:
    metadata: dict, as `compute` returns.

  Returns:
    str, without a newline; label values in numeric order.
  """
  return json.dumps(_ordered(metadata))


def write(data_dir, split, metadata):
  """Writes the metadata file of a split, replacing any earlier one.

  The file is written whole (`storage.write_whole`): on a local disk through
  a temporary name, on an object store as one upload, so readers never see a
  partial file.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    metadata: dict, as `compute` returns.

  Returns:
    str, the path written.
  """
  return storage.write_whole(path(data_dir, split), line(metadata) + '\n')


def write_tally(data_dir, split, tally):
  """Writes the metadata file of a split from a `Tally`, and its
  `image_classes` file when the tally was given the records' filenames.

  Returns:
    str, the metadata file's path.
  """
  if tally.image_labels:
    image_classes.write(data_dir, split, tally.image_labels)
  return write(data_dir, split, tally.metadata(split))


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _problem(metadata):
  """What is wrong with a metadata dict read from JSON, or None."""
  if not isinstance(metadata, dict):
    return 'does not hold a JSON object'
  for key, kind in _KEYS.items():
    if key not in metadata:
      return f'lacks the key {key!r}'
    value = metadata[key]
    if not isinstance(value, kind) or isinstance(value, bool):
      return f'has {key!r} = {value!r}, not a {kind.__name__}'
  for key, kind in _OPTIONAL_KEYS.items():
    if key in metadata and not _is_int(metadata[key]):
      return f'has {key!r} = {metadata[key]!r}, not a {kind.__name__}'
  for label, pixels in metadata['label_histogram'].items():
    if not (label.isascii() and label.isdigit() and _is_int(pixels)):
      return (f'has label_histogram entry {label!r}: {pixels!r}, not a label '
              'value and a pixel count')
  return None


def read(data_dir, split):
  """Reads the metadata file of a split.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.

  Returns:
    The dict `compute` returns, or None when the split has no metadata file.

  Raises:
    validation.ConfigurationError: the file is not valid JSON, lacks a key
      or has a value of the wrong type; the message names the file.
  """
  name = path(data_dir, split)
  if not tf.io.gfile.exists(name):
    return None
  with tf.io.gfile.GFile(name, 'rb') as f:
    content = f.read()
  try:
    metadata = json.loads(content)
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError alike.
    raise validation.ConfigurationError(
        f'{name} is not valid JSON ({e}); {_ADVICE}.') from None
  problem = _problem(metadata)
  if problem:
    raise validation.ConfigurationError(f'{name} {problem}; {_ADVICE}.')
  return metadata


def num_classes_seen(metadata, ignore_label):
  """1 + the largest label value with pixels other than `ignore_label`.

  Args:
    metadata: dict, as `compute` or `read` returns.
    ignore_label: int.

  Returns:
    int; 0 when no label value other than the ignore label has pixels.
  """
  values = [int(label) for label, pixels in
            metadata['label_histogram'].items()
            if pixels > 0 and int(label) != ignore_label]
  return max(values) + 1 if values else 0

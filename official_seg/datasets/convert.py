"""Converts a dataset on disk to DeepLab TFRecord shards, in parallel, checked."""

import collections
import functools
import math
import multiprocessing
import os

import tensorflow as tf
import tqdm

from official_seg.data import encode
from official_seg.data import layouts
from official_seg.data import split_metadata
from official_seg.data import storage
from official_seg.data import tfexample
from official_seg.datasets import colour_masks

# Shards of about this many source bytes; tf.data reads 100-200 MB files well.
TARGET_SHARD_BYTES = 100 * 2**20
# Enough shards for a few input pipelines of multi-worker training.
MIN_SHARDS = 4

# class_counts: int64 [256], pixels of each label value written; kind:
# (channels, bit depth) of the images, or None.
SplitSummary = collections.namedtuple(
    'SplitSummary', ['split', 'num_images', 'num_shards', 'class_counts',
                     'pattern', 'kind'], defaults=(None,))


def valid_label_text(layout, info):
  """The valid label values of a layout in words, for error messages."""
  if layout == 'cityscapes':
    return (f'Cityscapes label ids 0-{layouts.CITYSCAPES_NUM_IDS - 1}, mapped '
            'to train ids')
  return (f'classes 0-{info.num_classes - 1}, ignore label '
          f'{info.ignore_label}')


def auto_num_shards(pairs):
  """Shards for `pairs`: ~`TARGET_SHARD_BYTES` each, at least `MIN_SHARDS`."""
  size = sum(os.path.getsize(p.image) + os.path.getsize(p.label)
             for p in pairs)
  return max(1, min(len(pairs),
                    max(MIN_SHARDS, math.ceil(size / TARGET_SHARD_BYTES))))


def _encoded(pairs, encode_fn, num_workers):
  """Yields `encode_fn(pair)` in the order of `pairs`.

  Workers come from a forkserver, not a fork of this process: TensorFlow's
  threads make forking it unsafe, and the server preloads only the
  TensorFlow-free encode module, so workers start in a fraction of a second.
  """
  if num_workers <= 1:
    yield from map(encode_fn, pairs)
    return
  context = multiprocessing.get_context('forkserver')
  context.set_forkserver_preload([encode.__name__, colour_masks.__name__])
  with context.Pool(num_workers) as pool:
    yield from pool.imap(encode_fn, pairs, chunksize=4)


def clear_shards(output_dir, split, overwrite):
  """Refuses, or with `overwrite` deletes, shards of `split` already there.

  The split's metadata file goes too: it would describe shards that no
  longer exist if the conversion then failed.
  """
  pattern = tfexample.shard_pattern(output_dir, split)
  existing = tf.io.gfile.glob(pattern)
  if existing and not overwrite:
    raise layouts.DatasetError(
        f'{len(existing)} shards already match {pattern}; pass --overwrite to '
        'replace them, or choose another --output_dir.')
  for path in existing:
    tf.io.gfile.remove(path)
  metadata_path = split_metadata.path(output_dir, split)
  if tf.io.gfile.exists(metadata_path):
    tf.io.gfile.remove(metadata_path)


def agreed_kind(kind, item, pair, first):
  """The (channels, bit depth) of a split after one more image.

  Args:
    kind: (channels, bit depth) of the images so far, or None.
    item: `encode.Encoded`, the next image.
    pair: its `layouts.Pair`, for the message.
    first: `layouts.Pair` of the split's first image, for the message.

  Returns:
    (channels, bit depth), as `split_metadata.merged_kind`.

  Raises:
    layouts.DatasetError: channels or depth differ from the images before.
  """
  other = (item.channels, item.bit_depth)
  merged = split_metadata.merged_kind(kind, other)
  if merged is not None:
    return merged
  raise layouts.DatasetError(
      f'Image {pair.image} has {other[0]} channels of {other[1]} bits but '
      f'the images before it, from {first.image}, have {kind[0]} of '
      f'{kind[1]}; every image of a split must have the same channels and '
      'bit depth.')


def convert_split(pairs, output_dir, split, lookup, valid_text, num_shards=0,
                  num_workers=1, overwrite=False, progress=True, colours=None,
                  unknown_to_ignore=False, encode_fn=None):
  """Encodes and writes the pairs of one split as DeepLab shards.

  The split's `split_metadata` file is written from the encoded pairs, after
  the shards.

  Args:
    pairs: list of `layouts.Pair`.
    output_dir: str, where `<split>-NNNNN-of-NNNNN.tfrecord` go.
    split: str, the split name.
    lookup: int16 [256] from `layouts.label_lookup`.
    valid_text: str, the valid label values in words, for messages.
    num_shards: int; 0 picks `auto_num_shards`.
    num_workers: int, encoding processes; 1 encodes in this process.
    overwrite: bool, replace existing shards of the split.
    progress: bool, show a progress bar on stderr.
    colours: optional `colour_masks.ColourMap`: RGB(A) labels are colour
      masks of these classes; without it they are an error.
    unknown_to_ignore: bool, colours of no class become the ignore label.
    encode_fn: optional pair -> `encode.Encoded`, in place of reading each
      pair's label (picklable, e.g. a partial of `class_masks.encode_pair`).

  Returns:
    A `SplitSummary`.

  Raises:
    layouts.DatasetError: bad data (the message names the file), images of
      other channels or bit depth than the split's first, or existing
      shards; no shard of the split is left behind.
  """
  num_shards = min(num_shards or auto_num_shards(pairs), len(pairs))
  clear_shards(output_dir, split, overwrite)
  encode_fn = encode_fn or functools.partial(
      colour_masks.encode_pair, lookup=lookup, valid_text=valid_text,
      colours=colours, unknown_to_ignore=unknown_to_ignore)
  tally = split_metadata.Tally()

  def examples():
    bar = tqdm.tqdm(_encoded(pairs, encode_fn, num_workers), total=len(pairs),
                    desc=split, unit='img', disable=not progress)
    for pair, item in zip(pairs, bar):
      tally.kind = agreed_kind(tally.kind, item, pair, pairs[0])
      tally.add(item.height, item.width, item.class_counts, item.name)
      yield tfexample.make_example(item.image_bytes, item.label_bytes,
                                   item.name, item.image_format, item.height,
                                   item.width, item.channels)

  written = write_split(examples(), output_dir, split, num_shards, tally)
  return SplitSummary(split, written, num_shards, tally.label_counts,
                      tfexample.shard_pattern(output_dir, split), tally.kind)


def write_split(examples, output_dir, split, num_shards, tally):
  """Writes examples as the shards of a split, then its metadata file.

  Args:
    examples: iterable of `tf.train.Example`.
    output_dir: str, where the shards go.
    split: str, the split name.
    num_shards: int, how many shards.
    tally: `split_metadata.Tally` holding every example's facts once
      `examples` is exhausted.

  Returns:
    The number of examples written.

  Raises:
    Whatever `examples` raises; no shard of the split is left behind.
  """
  try:
    written = tfexample.write_shards(examples, output_dir, split, num_shards)
    split_metadata.write_tally(output_dir, split, tally)
  except BaseException:
    for index in range(num_shards):
      path = tfexample.shard_path(output_dir, split, index, num_shards)
      if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)
    raise
  return written


def format_summary(summary, info):
  """A closing report of one split: images, shards and class pixel counts.

  Args:
    summary: `SplitSummary`.
    info: `dataset_info.DatasetInfo` of the dataset.

  Returns:
    str, several lines.
  """
  lines = [f'{summary.split}: {summary.num_images} images in '
           f'{summary.num_shards} shards ({summary.pattern})']
  if summary.kind:
    lines.append(f'  images of {summary.kind[0]} channels, {summary.kind[1]} '
                 'bits (IMAGE_CHANNELS, IMAGE_BIT_DEPTH)')
  expected = info.split_sizes.get(summary.split)
  if expected is not None and expected != summary.num_images:
    lines.append(f'  note: SPLIT_SIZES expects {expected} images for '
                 f'{summary.split!r}; is the dataset complete?')
  total = max(int(summary.class_counts.sum()), 1)
  rows = [(i, name) for i, name in enumerate(info.class_names)]
  if info.ignore_label >= info.num_classes:
    rows.append((info.ignore_label, 'ignore'))
  lines.append(f'  {"id":>4} {"class":<24} {"pixels":>14} {"share":>7}')
  for value, name in rows:
    pixels = int(summary.class_counts[value])
    if value == info.ignore_label:
      name = f'{name} (ignore)' if name != 'ignore' else name
    lines.append(f'  {value:>4} {name:<24} {pixels:>14,} '
                 f'{100 * pixels / total:>6.2f}%')
  return '\n'.join(lines)


# DeepLab's training crop; the written gin file uses it unless every image is
# smaller.
DEFAULT_CROP = 513


def _crop_side(largest):
  """The least 16k + 1 (as DeepLab's 513, 769) of at least `largest`."""
  return 16 * math.ceil(max(largest - 1, 0) / 16) + 1


def dataset_gin_text(colours, data_dir, splits, extra=()):
  """A dataset gin file for shards converted from colour masks.

  Args:
    colours: `colour_masks.ColourMap`, the classes and palette.
    data_dir: str, the folder of the shards.
    splits: dict of split name to its `split_metadata` dict, in order.
    extra: lines to add at the end.

  Returns:
    str, gin text setting the dataset macros, `DatasetInfo.palette` and the
    crop sizes (EVAL_CROP_SIZE covers the largest image of `splits`); the
    images' channels and depth when the training split's metadata has them.
  """
  names = list(splits)
  train = 'train' if 'train' in splits else names[0]
  evaluate = 'val' if 'val' in splits else names[-1]
  height = _crop_side(max(m['max_height'] for m in splits.values()))
  width = _crop_side(max(m['max_width'] for m in splits.values()))
  sizes = {name: m['num_images'] for name, m in splits.items()}
  lines = [
      f'# Written by build_tfrecords from {colours.source}.',
      'import official_seg.data.dataset_info',
      '',
      f'NUM_CLASSES = {len(colours.class_names)}',
      f'CLASS_NAMES = {list(colours.class_names)!r}',
      f'IGNORE_LABEL = {colours.ignore_label}',
      f'DATA_DIR = {data_dir!r}',
      f'TRAIN_SPLIT = {train!r}',
      f'EVAL_SPLIT = {evaluate!r}',
      f'SPLIT_SIZES = {sizes!r}',
      f'DatasetInfo.palette = {colours.palette!r}',
      '# Evaluation pads each image to EVAL_CROP_SIZE: at least the largest.',
      f'CROP_SIZE = [{min(DEFAULT_CROP, height)}, {min(DEFAULT_CROP, width)}]',
      f'EVAL_CROP_SIZE = [{height}, {width}]',
  ]
  if 'channels' in splits[train]:
    lines += [f'IMAGE_CHANNELS = {splits[train]["channels"]}',
              f'IMAGE_BIT_DEPTH = {splits[train]["bit_depth"]}']
  if train == evaluate:
    lines[1:1] = [f'# Only split {train!r}: evaluation reads the training',
                  '# images; convert a val split for a fair score.']
  return '\n'.join(lines + list(extra)) + '\n'


def write_dataset_gin(colours, output_dir, extra=()):
  """Writes `<output_dir>/dataset.gin` (`dataset_gin_text`) for its shards.

  Every split with a metadata file in `output_dir` is named, so converting
  splits one run at a time keeps the earlier ones.

  Args:
    colours: `colour_masks.ColourMap`, the classes and palette.
    output_dir: str, the folder of the shards.
    extra: lines to add at the end (`dataset_gin_text`).

  Returns:
    str, the path written.
  """
  metadata = {}
  for path in sorted(tf.io.gfile.glob(split_metadata.path(output_dir, '*'))):
    split = os.path.basename(path)[:-len('-metadata.json')]
    metadata[split] = split_metadata.read(output_dir, split)
  path = os.path.join(output_dir, 'dataset.gin')
  storage.write_whole(path, dataset_gin_text(colours, output_dir, metadata,
                                             extra))
  return path


def classes_of(info, source):
  """The `colour_masks.ColourMap` of a `DatasetInfo`'s classes, for
  `write_dataset_gin` of labels that hold class ids (no colours)."""
  return colour_masks.ColourMap(source, tuple(info.class_names), None, None,
                                info.ignore_label, info.palette)

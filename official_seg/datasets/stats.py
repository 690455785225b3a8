"""Statistics of DeepLab shards: class frequencies, image sizes, class weights,
pixel means and deviations."""

import collections

import numpy as np
import tensorflow as tf

from official_seg.data import image_classes
from official_seg.data import input_fn
from official_seg.data import tfexample

# class_pixels: int64 [C], labelled pixels of each class; present_pixels:
# int64 [C], valid pixels of the images in which the class occurs;
# ignore_pixels: int; sizes: Counter of (height, width); image_labels: dict
# of record filename to its label values with pixels (`image_classes`).
Stats = collections.namedtuple(
    'Stats', ['num_images', 'class_pixels', 'present_pixels', 'ignore_pixels',
              'sizes', 'image_labels'])
_SIDE_BIN = 100


def _label_counts(serialized):
  """The label size, value histogram and filename of one record, without
  decoding the image."""
  _, label_bytes, filename = tfexample.Decoder().encoded(serialized)
  label = tf.io.decode_png(label_bytes, channels=1)
  counts = tf.math.bincount(tf.cast(label, tf.int32), minlength=256,
                            maxlength=256, dtype=tf.int64)
  return tf.shape(label)[:2], counts, filename


def compute_stats(data_dir, split, num_classes, ignore_label):
  """Reads every label of a split once.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    num_classes: int, C.
    ignore_label: int; its pixels count in no class (a class equal to the
      ignore label, as ADE20K's 0, has no pixels).

  Returns:
    `Stats`.

  Raises:
    validation.MissingFileError: no shard of the split; the message names
      the pattern.
  """
  dataset = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  dataset = dataset.map(_label_counts, num_parallel_calls=tf.data.AUTOTUNE)
  class_pixels = np.zeros(num_classes, np.int64)
  present_pixels = np.zeros(num_classes, np.int64)
  ignore_pixels, num_images, sizes = 0, 0, collections.Counter()
  image_labels = {}
  for size, counts, filename in dataset.as_numpy_iterator():
    image_classes.merged(image_labels, filename.decode('utf-8'),
                         image_classes.values_present(counts))
    ignore_pixels += int(counts[ignore_label])
    counts = counts[:num_classes].copy()
    if ignore_label < num_classes:
      counts[ignore_label] = 0
    class_pixels += counts
    present_pixels += np.where(counts > 0, counts.sum(), 0)
    sizes[tuple(int(s) for s in size)] += 1
    num_images += 1
  return Stats(num_images, class_pixels, present_pixels, ignore_pixels, sizes,
               image_labels)


def median_frequency_weights(stats):
  """Class weights by median frequency balancing (Eigen and Fergus, 2015).

  freq(c) is the pixels of class c over the valid pixels of the images that
  contain c; weight(c) = median(freq) / freq(c). A class with no pixels gets
  weight 1.0 (it adds nothing to the loss either way).

  Args:
    stats: `Stats`.

  Returns:
    float64 [C].
  """
  present = stats.present_pixels > 0
  weights = np.ones(len(stats.class_pixels))
  if present.any():
    freq = stats.class_pixels[present] / stats.present_pixels[present]
    weights[present] = np.median(freq) / freq
  return weights


def class_shares(stats):
  """float64 [C], each class's percentage of the labelled (not ignore) pixels."""
  return 100 * stats.class_pixels / max(int(stats.class_pixels.sum()), 1)


def side_histogram(sizes):
  """Images per bin of their longer side: {(low, high): count}, sorted."""
  bins = collections.Counter()
  for (height, width), count in sizes.items():
    low = max(height, width) // _SIDE_BIN * _SIDE_BIN
    bins[(low, low + _SIDE_BIN - 1)] += count
  return dict(sorted(bins.items()))


def gin_snippet(weights):
  """`segmentation_loss.class_weights = [...]` with 4 decimals."""
  values = ', '.join(f'{w:.4f}' for w in weights)
  return f'segmentation_loss.class_weights = [{values}]'


def format_report(stats, class_names, weights, title):
  """The printed report: classes, sizes, and the gin snippet.

  Args:
    stats: `Stats`.
    class_names: sequence of C str.
    weights: float [C], from `median_frequency_weights`.
    title: str, first line.

  Returns:
    str.
  """
  total = max(int(stats.class_pixels.sum()) + stats.ignore_pixels, 1)
  shares = class_shares(stats)
  lines = [title, f'{stats.num_images} images; ignore pixels '
           f'{stats.ignore_pixels:,} ({100 * stats.ignore_pixels / total:.2f}% '
           'of all pixels)',
           f'  {"id":>4} {"class":<24} {"pixels":>14} {"% labelled":>10} '
           f'{"weight":>8}']
  for index, name in enumerate(class_names):
    pixels = int(stats.class_pixels[index])
    lines.append(f'  {index:>4} {name:<24} {pixels:>14,} '
                 f'{shares[index]:>9.2f}% {weights[index]:>8.4f}')
  lines.append('Image sizes (height x width), most common first:')
  for (height, width), count in stats.sizes.most_common(10):
    lines.append(f'  {height}x{width}: {count}')
  lines.append('Longer side histogram:')
  for (low, high), count in side_histogram(stats.sizes).items():
    lines.append(f'  {low:>5}-{high:<5} {count:>7} {"#" * min(count, 60)}')
  lines.append('Suggested class weights (median frequency balancing):')
  lines.append(gin_snippet(weights))
  return '\n'.join(lines)


def _pixel_sums(decoder, channels):
  """sums(serialized) -> float64 [C] sums, [C] sums of squares, pixels."""

  def sums(serialized):
    image = tf.cast(decoder.decode(serialized)['image'], tf.float64)
    flat = tf.reshape(image, [-1, channels])
    return (tf.reduce_sum(flat, 0), tf.reduce_sum(tf.square(flat), 0),
            tf.shape(flat, out_type=tf.int64)[0])

  return sums


def channel_statistics(data_dir, split, channels, bit_depth):
  """The mean and standard deviation of each channel over a split's pixels.

  In the units of `Parser.mean_rgb`: 8-bit values, a 16-bit value v counting
  as v * 255 / 65535.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    channels: int, the images' channels (`DatasetInfo.image_channels`).
    bit_depth: 8 or 16 (`DatasetInfo.image_bit_depth`).

  Returns:
    (mean, std): float64 [channels] each; a channel of one value has std 0.

  Raises:
    validation.MissingFileError: no shard of the split.
  """
  decoder = tfexample.Decoder(channels=channels, bit_depth=bit_depth)
  dataset = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  dataset = dataset.map(_pixel_sums(decoder, channels),
                        num_parallel_calls=tf.data.AUTOTUNE)
  total, squares, count = np.zeros(channels), np.zeros(channels), 0
  for sums, sums_of_squares, pixels in dataset.as_numpy_iterator():
    total, squares, count = total + sums, squares + sums_of_squares, (
        count + pixels)
  mean = total / max(count, 1)
  std = np.sqrt(np.maximum(squares / max(count, 1) - mean**2, 0.0))
  scale = 255 / (2**bit_depth - 1)
  return mean * scale, std * scale


def normalization_bindings(mean, std):
  """[(binding, value)] of `Parser.mean_rgb` and `.stddev_rgb`, 4 decimals.

  Args:
    mean: float [C], from `channel_statistics`.
    std: float [C], likewise; a 0 (a constant channel) becomes 1.
  """
  std = np.where(np.asarray(std) > 0, std, 1.0)
  values = lambda v: [round(float(x), 4) for x in v]
  return [('Parser.mean_rgb', values(mean)), ('Parser.stddev_rgb', values(std))]


def normalization_gin(mean, std, title):
  """The gin text that makes the Parser normalize with a split's statistics.

  Args:
    mean: float [C], from `channel_statistics`.
    std: float [C], likewise; a 0 (a constant channel) becomes 1.
    title: str, the comment line naming the split.

  Returns:
    str, binding `Parser.mean_rgb` and `Parser.stddev_rgb`.
  """
  lines = [f'# Pixel statistics of {title}.',
           'import official_seg.data.preprocess', '']
  lines += [f'{name} = {value!r}'
            for name, value in normalization_bindings(mean, std)]
  return '\n'.join(lines) + '\n'

"""Image ops of the input pipeline: DeepLab's scaling, resizing, cropping, padding."""

import tensorflow as tf


def _random_uniform(minval, maxval, dtype, seed):
  """A scalar uniform draw: stateless with a seed, else from the op's state."""
  if seed is None:
    return tf.random.uniform([], minval, maxval, dtype=dtype)
  return tf.random.stateless_uniform([], seed, minval, maxval, dtype=dtype)


def split_seed(seed, num):
  """Splits a stateless seed (a fresh one when None) into `num` seeds [2]."""
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  return tf.unstack(tf.random.experimental.stateless_split(seed, num))


def random_scale_factor(min_scale, max_scale, step_size, seed=None):
  """Draws a scale factor the way DeepLab does.

  Args:
    min_scale: float, smallest factor.
    max_scale: float, largest factor.
    step_size: float; 0 draws uniformly from [min_scale, max_scale], otherwise
      from the discrete set min_scale, min_scale + step_size, ..., max_scale.
    seed: optional int32 or int64 [2], a stateless seed: the same seed draws
      the same factor. None draws a fresh one each time.

  Returns:
    A scalar float32 tensor.
  """
  if min_scale == max_scale:
    return tf.constant(float(min_scale))
  if step_size == 0:
    return _random_uniform(min_scale, max_scale, tf.float32, seed)
  num_steps = int(round((max_scale - min_scale) / step_size)) + 1
  index = _random_uniform(0, num_steps, tf.int32, seed)
  return min_scale + tf.cast(index, tf.float32) * step_size


def resized_side_bound(max_size, factor=None):
  """The longest side `resize_to_range_size` outputs under `max_size`.

  The bound made `factor * k + 1` downwards; rounding a side up to that form
  never passes it.
  """
  return max_size - (max_size - 1) % factor if factor else max_size


def resize_to_range_size(height, width, min_size, max_size=None, factor=None):
  """The output size of DeepLab's `preprocess_utils.resize_to_range`.

  Written out because neither TensorFlow nor the Model Garden has this rule:
  scale so the shorter side is `min_size`, unless that makes the longer side
  exceed `max_size` (then the longer side is `max_size`, made
  `factor * k + 1`); finally round each side up to `factor * k + 1`.

  Args:
    height: scalar int, input height.
    width: scalar int, input width.
    min_size: int, target of the shorter side.
    max_size: optional int, bound of the longer side.
    factor: optional int; both output sides become `factor * k + 1`.

  Returns:
    int32 [2], the output (height, width).
  """
  size = tf.cast(tf.stack([height, width]), tf.float32)
  if max_size is not None:
    max_size = resized_side_bound(max_size, factor)
  # Scale factor first, then the product, in float32, as DeepLab computes it.
  new_size = tf.cast(tf.floor(size * (min_size / tf.reduce_min(size))),
                     tf.int32)
  if max_size is not None:
    small_size = tf.cast(tf.floor(size * (max_size / tf.reduce_max(size))),
                         tf.int32)
    new_size = tf.where(tf.reduce_max(new_size) > max_size, small_size,
                        new_size)
  if factor:
    new_size += (factor - (new_size - 1) % factor) % factor
  return new_size


def resize_to_range(image, label, min_size, max_size=None, factor=None):
  """Resizes image and label as DeepLab's `resize_to_range` does.

  Args:
    image: uint8 or float32 [H, W, 3].
    label: int32 [H, W, 1], or None (serving has no label).
    min_size: int; see `resize_to_range_size`.
    max_size: optional int.
    factor: optional int.

  Returns:
    (image float32 [H', W', 3] bilinear, label int32 [H', W', 1] nearest or
    None), both with DeepLab's align_corners=True sampling.
  """
  shape = tf.shape(image)
  size = resize_to_range_size(shape[0], shape[1], min_size, max_size, factor)
  image = tf.compat.v1.image.resize_bilinear(image[None], size,
                                             align_corners=True)[0]
  if label is not None:
    label = tf.compat.v1.image.resize_nearest_neighbor(label[None], size,
                                                       align_corners=True)[0]
  return image, label


_BOX_MARGIN = 2.0**-14  # crop_box shrinks sampled spans by this fraction.


def random_crop_window(image_size, crop_size, flip, seed=None):
  """Draws DeepLab's random crop and flip of an image padded to crop_size.

  Args:
    image_size: int32 [2], (height, width) before padding (bottom, right).
    crop_size: (crop_height, crop_width) ints.
    flip: bool, flip left-right with probability 0.5.
    seed: optional int32 or int64 [2], a stateless seed: the same seed draws
      the same window. None draws a fresh one.

  Returns:
    (offset int32 [2], the crop's top-left pixel in the padded image, uniform
     over all valid offsets; flipped, bool scalar).
  """
  crop_seed, flip_seed = split_seed(seed, 2)
  limit = tf.maximum(image_size, crop_size) - crop_size + 1
  # tf.image.stateless_random_crop's and stateless_random_flip_*'s draws.
  offset = tf.random.stateless_uniform(
      [2], crop_seed, maxval=tf.int32.max, dtype=tf.int32) % limit
  coin = _random_uniform(0.0, 1.0, tf.float32, flip_seed)
  return offset, tf.logical_and(flip, coin < 0.5)


def crop_box(image_size, offset, window_size, flipped):
  """The `tf.image.crop_and_resize` box of a window of a scaled image.

  crop_and_resize samples row i of an h-row crop of a source of height H at
  y1 (H - 1) + i (y2 - y1) (H - 1) / (h - 1). Scaling to height Hs with
  aligned corners puts scaled row p at source row p (H - 1) / (Hs - 1);
  window row i is scaled row offset + i. Equating both for all i:
  y1 = offset / (Hs - 1) and y2 = (offset + h - 1) / (Hs - 1), so box
  coordinates [0, 1] span the scaled image (Hs = 1 takes 1 / (Hs - 1) as 1).
  Columns alike; a flip swaps x1 and x2.

  Why aligned corners: DeepLab scales so (align_corners=True); half-pixel
  centres (tf.image.resize: (p + 0.5) H / Hs - 0.5) differ by at most
  |1 - H / Hs| / 2 source pixels and clamp at borders, which crop_and_resize
  cannot. Spans shrink by _BOX_MARGIN about their centre ((H - 1) / 32768
  pixels an end; exact nearest ties may round the other way) lest float32
  rounding put the first or last row outside [0, H - 1], into extrapolation.

  Args:
    image_size: int32 [2], (Hs, Ws), the scaled image size.
    offset: int32 [2], the window's top-left pixel in the scaled image.
    window_size: int32 [2], (h, w); the window lies inside the scaled image.
    flipped: bool scalar, mirror the window left-right.

  Returns:
    float32 [4], (y1, x1, y2, x2).
  """
  start = tf.cast(offset, tf.float32)
  end = start + tf.cast(window_size, tf.float32) - 1.0
  extent = tf.maximum(tf.cast(image_size, tf.float32) - 1.0, 1.0)
  start, end = [_BOX_MARGIN / 2 + t / extent * (1.0 - _BOX_MARGIN)
                for t in (start, end)]
  box = tf.stack([start[0], start[1], end[0], end[1]])
  return tf.gather(box, tf.where(flipped, [0, 3, 2, 1], [0, 1, 2, 3]))


def normalize_image(image, mean_rgb, stddev_rgb):
  """(image - mean_rgb) / stddev_rgb of a float32 [h, w, 3] image.

  Training, evaluation and serving all normalize with this one function.
  Not preprocess_ops.normalize_scaled_float_image: TF's CPU kernels
  broadcast its [1, 1, 3] operands several times slower than a [w * 3] row
  over [h, w * 3] rows (docs/performance.md).
  """
  shape = tf.shape(image)
  scale = tf.tile(1.0 / tf.constant(stddev_rgb, tf.float32), shape[1:2])
  shift = tf.tile(-tf.constant(mean_rgb, tf.float32), shape[1:2]) * scale
  rows = tf.reshape(image, [shape[0], -1]) * scale + shift
  return tf.reshape(rows, shape)


def pad_to_size(image, label, height, width, ignore_label):
  """Pads at the bottom and right up to (height, width).

  The image is already normalized, so padding it with 0 is padding with the
  mean pixel, as DeepLab does; the label is padded with `ignore_label` so that
  padding never counts in the loss or in any metric.

  Args:
    image: float32 [h, w, 3], normalized.
    label: int32 [h, w, 1].
    height: scalar int, target height, at least h.
    width: scalar int, target width, at least w.
    ignore_label: int.

  Returns:
    (image float32 [height, width, 3], label int32 [height, width, 1]).
  """
  shape = tf.shape(image)
  paddings = [[0, height - shape[0]], [0, width - shape[1]], [0, 0]]
  image = tf.pad(image, paddings)
  label = tf.pad(label, paddings, constant_values=ignore_label)
  return image, label
